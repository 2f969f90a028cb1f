"""Load test of job creation (POST /api/v1/jobs/) with gunicorn, PostgreSQL and wrk.

Creates a fresh database, migrates, seeds a tenant, queue, researcher and token, starts
gunicorn with the production settings on the loopback address, warms it up, drives it with
wrk (one unique job name per request), stops gunicorn and prints one JSON summary:
requests/s, latency percentiles, responses by status, rows stored, names stored twice,
whether every 2xx answer is in the database exactly once, and the CPU milliseconds per
request of gunicorn, PostgreSQL, wrk and Redis (the figure to compare on a shared machine).
See docs/load.md.

    .venv/bin/python -m bench.api_load                       # 30 s, 50 connections
    .venv/bin/python -m bench.api_load --duration 3 --connections 5 --workers 2
"""

import argparse
import json
import os
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = ROOT / ".venv" / "bin"
NAME_PREFIX = "load"

# One wrk thread = one Lua state. Each request carries a name unique across threads
# ("load-<thread>-<n>"); each response line "<status> <job name or ->" goes to the thread's
# own file so the caller can check every 2xx against the database.
WRK_SCRIPT = r"""
local token, queue, outdir = "{token}", "{queue}", "{outdir}"
local thread_id = 0
local threads = {{}}

function setup(thread)
  thread_id = thread_id + 1
  thread:set("id", thread_id)
  table.insert(threads, thread)
end

local counter = 0
local out = nil

function init(args)
  out = io.open(outdir .. "/responses-" .. id .. ".txt", "w")
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Token " .. token
  -- what the TLS-terminating proxy adds in production (SECURE_SSL_REDIRECT stays on)
  wrk.headers["X-Forwarded-Proto"] = "https"
end

function request()
  counter = counter + 1
  local body = '{{"queue":"' .. queue .. '","name":"{prefix}-' .. id .. '-' .. counter ..
    '","tasks":[{{"name":"worker","replicas":2,"image":"ghcr.io/example/trainer:latest",' ..
    '"gpus":1,"cpu_millis":1000}}]}}'
  return wrk.format(nil, "/api/v1/jobs/", nil, body)
end

function response(status, headers, body)
  local name = string.match(body or "", '"name":"({prefix}%-[%d]+%-[%d]+)"') or "-"
  out:write(status, " ", name, "\n")
end
"""

# wrk's summary as one JSON line (`wrk_stats` reads it back); a str.format template like the
# scripts it ends.
WRK_DONE = r"""
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {{"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"p50_us":%d,"p95_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f,' ..
    '"errors":{{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}}}\n',
    summary.requests, summary.duration, summary.bytes,
    latency:percentile(50), latency:percentile(95), latency:percentile(99),
    latency.max, latency.mean,
    e.connect, e.read, e.write, e.status, e.timeout))
end
"""

SEED = """
import django
django.setup()
from django.contrib.auth import get_user_model
from portal.api.services import api_token_create
from portal.queues.models import Queue
from portal.tenants.models import Membership, Tenant
tenant = Tenant.objects.create(name="loadtest")
Queue.objects.create(tenant=tenant, name="{queue}", weight=1)
user = get_user_model().objects.create_user("loader", password=None)
Membership.objects.create(user=user, tenant=tenant, role=Membership.Role.RESEARCHER)
# --pending-jobs: the tenant's queue already holds this many pending 1-pod jobs, so a
# create's cost can be compared with and without a long queue.
from portal.jobs.models import Job, JobTask
queue = Queue.objects.get(tenant=tenant)
jobs = Job.objects.bulk_create(
    [Job(tenant=tenant, queue=queue, submitter=user, name=f"waiting-{{i}}", min_available=1,
         status=Job.Status.PENDING) for i in range({pending})],
    batch_size=2000,
)
JobTask.objects.bulk_create(
    [JobTask(job=job, name="worker", replicas=1, image="trainer:1", gpus=1) for job in jobs],
    batch_size=2000,
)
# What the first scheduling cycle does: the tenants' pending-pod deltas folded into one row.
from portal.jobs.pod_count import tenant_pod_deltas_fold
tenant_pod_deltas_fold()
# What autovacuum does to a table that grew: fresh statistics, so the planner knows its size.
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("ANALYZE")
print(api_token_create(user=user, name="load test")[1])
"""


def log(message: str) -> None:
    print(f"[api_load] {message}", file=sys.stderr, flush=True)


def psql(sql: str, *, db: str = "postgres", pg: dict[str, str]) -> str:
    out = subprocess.run(
        [
            "psql",
            "-h",
            pg["host"],
            "-p",
            pg["port"],
            "-U",
            pg["user"],
            "-d",
            db,
            "-v",
            "ON_ERROR_STOP=1",
            "-At",
            "-c",
            sql,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout.strip()


def portal_env(
    *,
    pg: dict[str, str],
    db: str,
    workdir: Path,
    redis_url: str,
    rate: str,
    db_query: str = "",
    pending_pods_cap: int | None = None,
) -> dict[str, str]:
    """The environment of the portal processes a benchmark starts: production settings, a
    database and a Redis database of the run's own, the job-creation rate limit given (and
    the tenant's pending-pods cap, if given)."""
    cap = (
        {}
        if pending_pods_cap is None
        else {"JOB_MAX_PENDING_PODS_PER_TENANT": str(pending_pods_cap)}
    )
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.production",
        "DATABASE_URL": f"postgres://{pg['user']}@{pg['host']}:{pg['port']}/{db}{db_query}",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "REDIS_URL": redis_url,
        "CELERY_BROKER_URL": redis_url,
        "API_JOB_CREATE_RATE": rate,
        "PORTAL_VAR_DIR": str(workdir / "var"),
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
        **cap,
    }


def database_seeded(*, db: str, pg: dict[str, str], env: dict[str, str], seed: str) -> str:
    """Drop and create `db`, migrate it, run the Python `seed` in it; returns the seed's last
    output line."""
    python = str(VENV_BIN / "python")
    psql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)', pg=pg)
    psql(f'CREATE DATABASE "{db}"', pg=pg)
    subprocess.run(
        [python, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=300,
    )
    seeded = subprocess.run(
        [python, "-c", seed],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return seeded.stdout.strip().splitlines()[-1]


def stop(proc: subprocess.Popen | None) -> None:
    """SIGTERM the process group (gunicorn or celery and their children), then SIGKILL."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


def wrk_stats(output: str) -> dict:
    """The summary WRK_DONE printed."""
    return json.loads(
        next(
            line.removeprefix("WRK_JSON ")
            for line in output.splitlines()
            if line.startswith("WRK_JSON ")
        )
    )


def read_responses(workdir: Path, prefix: str) -> tuple[Counter[int], list[str]]:
    """Statuses of every response the wrk threads wrote to `<prefix>-<thread>.txt`, and the
    job names of the 2xx ones."""
    statuses: Counter[int] = Counter()
    names: list[str] = []
    for path in sorted(workdir.glob(f"{prefix}-*.txt")):
        for line in path.read_text().splitlines():
            status, name = line.split(" ", 1)
            statuses[int(status)] += 1
            if 200 <= int(status) < 300:
                names.append(name)
    return statuses, names


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(url: str, token: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(
        url, headers={"Authorization": f"Token {token}", "X-Forwarded-Proto": "https"}
    )
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(request, timeout=2) as answer:
                if answer.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.2)
    raise SystemExit("gunicorn did not answer in time")


def redis_queue_length(redis_url: str, *, delete: bool) -> int | None:
    try:
        import redis
    except ImportError:
        return None
    try:
        client = redis.Redis.from_url(redis_url, socket_timeout=5)
        length = int(client.llen("celery"))
        if delete:
            client.delete("celery")  # the kicks queued by this run (no worker consumes them)
        return length
    except Exception:  # noqa: BLE001 - reporting only
        return None


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of one process so far (0 when it is gone or unreadable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_tree(root: int) -> list[int]:
    """`root` and its descendants (gunicorn master and workers, celery and its children)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(parents.get(pid, []))
    return tree


def postgres_backends(db: str, pg: dict[str, str]) -> list[int]:
    out = psql(f"SELECT pid FROM pg_stat_activity WHERE datname = '{db}'", pg=pg)
    return [int(pid) for pid in out.split()]


def redis_cpu_seconds(redis_url: str) -> float | None:
    """The Redis server's own CPU so far (shared with anyone else using that server)."""
    try:
        import redis

        info = redis.Redis.from_url(redis_url, socket_timeout=5).info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    except Exception:  # noqa: BLE001 - reporting only
        return None


class CpuMeter:
    """CPU seconds spent by the server processes between `start()` and `stop()`.

    On a shared machine requests/s depends on what else runs; CPU per request does not
    (much), so it is the figure to compare changes with. PostgreSQL backends are counted
    while they live: with --conn-max-age 0 each request's backend is gone before `stop()`.
    """

    def __init__(self, *, roots: dict[str, int], db: str, pg: dict[str, str], redis_url: str):
        self.roots, self.db, self.pg, self.redis_url = roots, db, pg, redis_url

    def _snapshot(self) -> dict[str, dict[int, float]]:
        snap = {
            name: {pid: process_cpu_seconds(pid) for pid in process_tree(root)}
            for name, root in self.roots.items()
        }
        snap["postgres"] = {
            pid: process_cpu_seconds(pid) for pid in postgres_backends(self.db, self.pg)
        }
        return snap

    def start(self) -> None:
        self.before = self._snapshot()
        self.redis_before = redis_cpu_seconds(self.redis_url)
        self.children_before = resource.getrusage(resource.RUSAGE_CHILDREN)

    def stop(self) -> dict[str, float | None]:
        after = self._snapshot()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        redis_after = redis_cpu_seconds(self.redis_url)
        seconds: dict[str, float | None] = {
            name: sum(cpu - self.before[name].get(pid, 0.0) for pid, cpu in pids.items())
            for name, pids in after.items()
        }
        # wrk is the only child waited for between start() and stop()
        seconds["load_generator"] = (children.ru_utime + children.ru_stime) - (
            self.children_before.ru_utime + self.children_before.ru_stime
        )
        seconds["redis"] = (
            redis_after - self.redis_before
            if redis_after is not None and self.redis_before is not None
            else None
        )
        return seconds


def cpu_per_request(seconds: dict[str, float | None], requests: int) -> dict[str, float | None]:
    per = {
        name: (round(value * 1000 / requests, 2) if value is not None and requests else None)
        for name, value in seconds.items()
    }
    per["total"] = round(sum(value for value in per.values() if value is not None), 2)
    return per


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=30, help="seconds of load (wrk -d)")
    parser.add_argument("--connections", type=int, default=50, help="wrk -c")
    parser.add_argument(
        "--warmup", type=int, default=5, help="seconds of load before the measured run (0: none)"
    )
    parser.add_argument("--threads", type=int, default=2, help="wrk -t")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn --workers")
    parser.add_argument("--worker-class", default="sync", help="gunicorn --worker-class")
    parser.add_argument("--worker-threads", type=int, default=1, help="gunicorn --threads")
    parser.add_argument("--db", default="portal_load", help="database to (re)create")
    parser.add_argument("--pg-host", default="127.0.0.1")
    parser.add_argument("--pg-port", default="5432")
    parser.add_argument("--pg-user", default="postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    parser.add_argument("--port", type=int, default=0, help="gunicorn port (0: a free one)")
    parser.add_argument(
        "--conn-max-age",
        type=int,
        default=None,
        help="CONN_MAX_AGE via DATABASE_URL ?conn_max_age= (0: a connection per request; "
        "default: the production settings' 60 s)",
    )
    parser.add_argument("--rate", default="1000000/min", help="API_JOB_CREATE_RATE")
    parser.add_argument(
        "--pending-pods-cap",
        type=int,
        default=1_000_000,
        help="JOB_MAX_PENDING_PODS_PER_TENANT: the default 5,000 refuses every create once "
        "2,500 of the load's 2-pod jobs wait (no scheduler runs); checked on every request "
        "either way",
    )
    parser.add_argument(
        "--pending-jobs",
        type=int,
        default=0,
        help="pending 1-pod jobs the tenant holds before the load (the pending-pods cap is "
        "raised by as many)",
    )
    parser.add_argument("--access-log", action="store_true", help="gunicorn access log on")
    parser.add_argument("--keep-db", action="store_true", help="leave the database behind")
    parser.add_argument("--wrk", default=shutil.which("wrk") or "wrk")
    return parser.parse_args(argv)


def run(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if not shutil.which(args.wrk):
        raise SystemExit("wrk not found (apt-get install -y wrk)")
    pg = {"host": args.pg_host, "port": args.pg_port, "user": args.pg_user}
    queue = "load-queue"
    port = args.port or free_port()
    workdir = Path(tempfile.mkdtemp(prefix="api_load-"))
    env = portal_env(
        pg=pg,
        db=args.db,
        workdir=workdir,
        redis_url=args.redis_url,
        rate=args.rate,
        pending_pods_cap=args.pending_pods_cap + args.pending_jobs,
        db_query="" if args.conn_max_age is None else f"?conn_max_age={args.conn_max_age}",
    )
    log(f"recreating database {args.db}")
    log(f"seeding {args.pending_jobs} pending jobs" if args.pending_jobs else "seeding")
    token = database_seeded(
        db=args.db, pg=pg, env=env, seed=SEED.format(queue=queue, pending=args.pending_jobs)
    )
    redis_queue_length(args.redis_url, delete=True)

    script = workdir / "post_job.lua"
    script.write_text(
        (WRK_SCRIPT + WRK_DONE).format(token=token, queue=queue, outdir=workdir, prefix=NAME_PREFIX)
    )
    # Warm-up requests: their own names and response files, not counted in the figures.
    (workdir / "warmup").mkdir()
    warmup_script = workdir / "warmup.lua"
    warmup_script.write_text(
        (WRK_SCRIPT + WRK_DONE).format(
            token=token, queue=queue, outdir=workdir / "warmup", prefix="warm"
        )
    )
    gunicorn_cmd = [
        str(VENV_BIN / "gunicorn"),
        "portal.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(args.workers),
        "--worker-class",
        args.worker_class,
        "--threads",
        str(args.worker_threads),
        "--timeout",
        "60",
        "--error-logfile",
        str(workdir / "gunicorn.log"),
    ]
    # gunicorn.conf.py (read from ROOT) sets the rest: keep-alive, heartbeat directory
    env["GUNICORN_ACCESS_LOG"] = str(workdir / "access.log") if args.access_log else ""
    env.pop("GUNICORN_CMD_ARGS", None)
    log("starting " + " ".join(gunicorn_cmd[1:]))
    gunicorn = subprocess.Popen(gunicorn_cmd, cwd=ROOT, env=env, start_new_session=True)
    wrk_out = ""
    load_before = load_after = ""
    cpu_seconds: dict[str, float | None] = {}
    meter = CpuMeter(roots={"gunicorn": gunicorn.pid}, db=args.db, pg=pg, redis_url=args.redis_url)
    try:
        wait_ready(f"http://127.0.0.1:{port}/api/v1/queues/", token, gunicorn)

        def wrk(lua: Path, seconds: int) -> str:
            cmd = [
                args.wrk,
                f"-t{args.threads}",
                f"-c{args.connections}",
                f"-d{seconds}s",
                "--timeout",
                "10s",
                "-s",
                str(lua),
                f"http://127.0.0.1:{port}",
            ]
            log("running " + " ".join(cmd))
            return subprocess.run(
                cmd, check=True, capture_output=True, text=True, timeout=seconds + 60
            ).stdout

        if args.warmup:
            # Each worker's first requests import and set up what the rest reuse (views,
            # serializers, the database and Redis connections): not the steady state.
            wrk(warmup_script, args.warmup)
        load_before = loadavg()
        meter.start()
        wrk_out = wrk(script, args.duration)
        cpu_seconds = meter.stop()
        load_after = loadavg()
    finally:
        stop(gunicorn)

    stats = wrk_stats(wrk_out)
    statuses, ok_names = read_responses(workdir, "responses")

    rows = int(
        psql(
            "SELECT count(*) FROM jobs_job j JOIN auth_user u ON u.id = j.submitter_id "
            f"WHERE u.username = 'loader' AND j.name LIKE '{NAME_PREFIX}-%'",
            db=args.db,
            pg=pg,
        )
    )
    duplicates = int(
        psql(
            "SELECT count(*) FROM (SELECT name FROM jobs_job GROUP BY name HAVING count(*) > 1) d",
            db=args.db,
            pg=pg,
        )
    )
    stored = Counter(psql("SELECT name FROM jobs_job", db=args.db, pg=pg).splitlines())
    ok_missing = sum(1 for name in ok_names if stored[name] == 0)
    ok_unparsed = ok_names.count("-")
    tasks = int(
        psql(
            "SELECT count(*) FROM jobs_jobtask t JOIN jobs_job j ON j.id = t.job_id "
            f"WHERE j.name LIKE '{NAME_PREFIX}-%'",
            db=args.db,
            pg=pg,
        )
    )
    kicks = redis_queue_length(args.redis_url, delete=True)
    if not args.keep_db:
        psql(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)', pg=pg)
    shutil.rmtree(workdir, ignore_errors=True)

    seconds = stats["duration_us"] / 1e6
    ok = sum(count for status, count in statuses.items() if 200 <= status < 300)
    summary = {
        "requests_per_s": round(stats["requests"] / seconds, 1),
        "ok_per_s": round(ok / seconds, 1),
        "requests": stats["requests"],
        "duration_s": round(seconds, 2),
        "latency_ms": {
            key: round(stats[f"{key}_us"] / 1000, 1) for key in ("p50", "p95", "p99", "max")
        },
        "status": {str(status): count for status, count in sorted(statuses.items())},
        "socket_errors": stats["errors"],
        "rows": rows,
        "tasks": tasks,
        "duplicates": duplicates,
        "ok_missing_in_db": ok_missing,
        "ok_without_name": ok_unparsed,
        "accounting_ok": ok_missing == 0 and duplicates == 0 and ok_unparsed == 0 and rows >= ok,
        "celery_kicks_queued": kicks,
        # CPU ms per answered request by process group; capacity = all cores / total
        # (per job stored: requests still in flight when wrk stops were served too)
        "cpu_ms_per_request": (per := cpu_per_request(cpu_seconds, max(rows, stats["requests"]))),
        "capacity_req_s_if_cpu_bound": round((os.cpu_count() or 1) * 1000 / per["total"], 1)
        if per["total"]
        else None,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "config": {
            "settings": "portal.settings.production",
            "gunicorn": f"{args.workers} x {args.worker_class}"
            + (f" ({args.worker_threads} threads)" if args.worker_threads > 1 else ""),
            "wrk": f"-t{args.threads} -c{args.connections} -d{args.duration}s "
            f"after {args.warmup} s of warm-up",
            "access_log": args.access_log,
            "conn_max_age": "production default"
            if args.conn_max_age is None
            else args.conn_max_age,
            "cpus": os.cpu_count(),
        },
    }
    return summary


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
