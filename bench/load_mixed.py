"""Mixed load: clients submitting and listing jobs at once, with the scheduler running.

Creates a fresh PostgreSQL database, migrates, seeds tenants, queues,
researchers with tokens and the demo cluster's nodes, then starts what a deployment runs:
gunicorn (portal.settings.production), a Celery worker and Celery beat on Redis, with the
simulated cluster backend. Two wrk processes share the clients: one half POSTs
`/api/v1/jobs/` (unique job names, tokens and queues in turn), the other half GETs
`/api/v1/jobs/?limit=20` (every other request `&mine=true`). When the load stops, gunicorn
stops; the worker and beat keep running until every stored job has had a scheduling
decision (admitted, running, finished, or pending with the reason of a cycle rather than
the one `job_submit` stores) or --catch-up-timeout passes. Prints one JSON summary:
throughput, latency percentiles and statuses per kind of request, socket errors, and the
accounting: every 201 stored exactly once, no duplicate names, no 5xx, caught up.

    .venv/bin/python -m bench.load_mixed                     # 200 clients, 60 s
    .venv/bin/python -m bench.load_mixed --clients 20 --duration 5
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.api_load import (
    VENV_BIN,
    WRK_DONE,
    CpuMeter,
    cpu_per_request,
    database_seeded,
    free_port,
    loadavg,
    portal_env,
    psql,
    read_responses,
    stop,
    wait_ready,
    wrk_stats,
)

ROOT = Path(__file__).resolve().parent.parent
NAME_PREFIX = "mixed"

# Shared by both scripts: one output file per wrk thread, one line per response
# ("<status> <job name or ->"); WRK_DONE adds the summary line the caller parses.
WRK_COMMON = r"""
local tokens = {{{tokens}}}
local queues = {{{queues}}}
local outdir, kind = "{outdir}", "{kind}"
local thread_id = 0

function setup(thread)
  thread_id = thread_id + 1
  thread:set("id", thread_id)
end

local counter = 0
local out = nil

function init(args)
  out = io.open(outdir .. "/" .. kind .. "-" .. id .. ".txt", "w")
  wrk.headers["X-Forwarded-Proto"] = "https"
end

function response(status, headers, body)
  local name = string.match(body or "", '"name":"({prefix}%-[%d]+%-[%d]+)"') or "-"
  if kind == "list" then name = "-" end
  out:write(status, " ", name, "\n")
end
"""

# Jobs of 1-4 GPUs that run 20-140 s on the simulated cluster, so some finish during the run.
WRK_SUBMIT = r"""
function request()
  counter = counter + 1
  local user = (id * 7919 + counter) % #tokens + 1
  local body = '{{"queue":"' .. queues[user] .. '","name":"{prefix}-' .. id .. '-' .. counter ..
    '","expected_duration_seconds":' .. (20 + (counter * 37) % 120) ..
    ',"tasks":[{{"name":"worker","replicas":' .. (1 + counter % 2) ..
    ',"image":"ghcr.io/example/trainer:latest","gpus":' .. (1 + counter % 4) ..
    ',"cpu_millis":1000}}]}}'
  return wrk.format("POST", "/api/v1/jobs/", {{
    ["Authorization"] = "Token " .. tokens[user],
    ["Content-Type"] = "application/json",
    ["X-Forwarded-Proto"] = "https",
  }}, body)
end
"""

WRK_LIST = r"""
function request()
  counter = counter + 1
  local user = (id * 7919 + counter) % #tokens + 1
  local path = "/api/v1/jobs/?limit=20"
  if counter % 2 == 0 then path = path .. "&mine=true" end
  return wrk.format("GET", path, {{
    ["Authorization"] = "Token " .. tokens[user],
    ["X-Forwarded-Proto"] = "https",
  }})
end
"""

SEED = """
import json
import django
django.setup()
from django.conf import settings
from django.contrib.auth import get_user_model
from portal.api.services import api_token_create
from portal.cluster.services import node_inventory_load, node_inventory_sync
from portal.jobs.services import JOB_PENDING_REASON_SUBMITTED
from portal.queues.models import Queue
from portal.tenants.models import Membership, Tenant

node_inventory_sync(nodes=node_inventory_load(path=settings.SIMULATED_CLUSTER_FILE))
tenants = []
for t in range({tenants}):
    tenant = Tenant.objects.create(name=f"load-{{t}}")
    queue = Queue.objects.create(
        tenant=tenant, name=f"load-queue-{{t}}", weight=1 + t % 3, capability_gpus=16
    )
    tenants.append((tenant, queue))
tokens, queues = [], []
for u in range({users}):
    tenant, queue = tenants[u % len(tenants)]
    user = get_user_model().objects.create_user(f"loader-{{u}}", password=None)
    Membership.objects.create(user=user, tenant=tenant, role=Membership.Role.RESEARCHER)
    tokens.append(api_token_create(user=user, name="load test")[1])
    queues.append(queue.name)
print(json.dumps({{"tokens": tokens, "queues": queues, "submitted": JOB_PENDING_REASON_SUBMITTED}}))
"""

# A job still waiting for its first decision: pending, with the reason job_submit stored (or
# none at all). Any cycle that saw it replaced that reason or changed its status.
UNDECIDED_SQL = (
    "SELECT count(*) FROM jobs_job WHERE status = 'pending' "
    "AND (pending_reason = '' OR pending_reason = '{submitted}')"
)


def log(message: str) -> None:
    print(f"[load_mixed] {message}", file=sys.stderr, flush=True)


def lua_strings(values: list[str]) -> str:
    return ", ".join(f'"{value}"' for value in values)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=200, help="connections in all")
    parser.add_argument(
        "--submit-share", type=float, default=0.5, help="part of the clients that submit"
    )
    parser.add_argument("--duration", type=int, default=60, help="seconds of load")
    parser.add_argument("--wrk-threads", type=int, default=1, help="threads of each wrk")
    parser.add_argument("--tenants", type=int, default=4)
    parser.add_argument("--users", type=int, default=20, help="researchers (tokens) in turn")
    parser.add_argument("--workers", type=int, default=None, help="gunicorn workers")
    parser.add_argument("--worker-class", default=None, help="gunicorn worker class")
    parser.add_argument("--worker-threads", type=int, default=None, help="gunicorn threads")
    parser.add_argument("--celery-concurrency", type=int, default=2)
    parser.add_argument("--cycle-seconds", type=float, default=5.0, help="beat period")
    parser.add_argument(
        "--catch-up-timeout",
        type=float,
        default=120.0,
        help="seconds after the load for every job to get a scheduling decision",
    )
    parser.add_argument("--db", default="portal_load_mixed", help="database to (re)create")
    parser.add_argument("--pg-host", default="127.0.0.1")
    parser.add_argument("--pg-port", default="5432")
    parser.add_argument("--pg-user", default="postgres")
    parser.add_argument(
        "--redis-url",
        default="redis://127.0.0.1:6379/15",
        help="broker and cache: a Redis database of its own (its Celery keys are deleted)",
    )
    parser.add_argument("--rate", default="1000000/min", help="API_JOB_CREATE_RATE")
    parser.add_argument("--keep-db", action="store_true", help="leave the database behind")
    parser.add_argument("--wrk", default=shutil.which("wrk") or "wrk")
    return parser.parse_args(argv)


def redis_cleanup(redis_url: str) -> int | None:
    """Delete the Celery queue and Kombu bookkeeping this run left; returns the queue length."""
    try:
        import redis

        client = redis.Redis.from_url(redis_url, socket_timeout=5)
        length = int(client.llen("celery"))
        keys = ["celery", "unacked", "unacked_index", "unacked_mutex"]
        keys += [key.decode() for key in client.scan_iter("_kombu.binding.*")]
        client.delete(*keys)
        return length
    except Exception:  # noqa: BLE001 - cleanup and reporting only
        return None


def kind_summary(stats: dict, statuses: Counter[int]) -> dict:
    seconds = stats["duration_us"] / 1e6
    return {
        "requests": stats["requests"],
        "requests_per_s": round(stats["requests"] / seconds, 1),
        "latency_ms": {
            key: round(stats[f"{key}_us"] / 1000, 1) for key in ("p50", "p95", "p99", "max")
        },
        "status": {str(status): count for status, count in sorted(statuses.items())},
        "socket_errors": stats["errors"],
    }


def run(argv: list[str] | None = None) -> dict:  # noqa: C901, PLR0912, PLR0915 - a benchmark script read top to bottom
    args = parse_args(argv)
    if not shutil.which(args.wrk):
        raise SystemExit("wrk not found (apt-get install -y wrk)")
    submitters = max(1, round(args.clients * args.submit_share))
    listers = args.clients - submitters
    if listers < 1:
        raise SystemExit("--clients and --submit-share leave no client to list jobs")
    pg = {"host": args.pg_host, "port": args.pg_port, "user": args.pg_user}
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="load_mixed-"))
    env = portal_env(pg=pg, db=args.db, workdir=workdir, redis_url=args.redis_url, rate=args.rate)
    env["CLUSTER_BACKEND"] = "simulated"
    env["SCHEDULER_CYCLE_SECONDS"] = str(args.cycle_seconds)
    for name in ("GUNICORN_CMD_ARGS", "WEB_CONCURRENCY"):
        env.pop(name, None)  # the gunicorn options are this script's, see below
    env["GUNICORN_ACCESS_LOG"] = ""  # one line per request would be most of the output

    log(f"recreating database {args.db}")
    seeded = database_seeded(
        db=args.db, pg=pg, env=env, seed=SEED.format(tenants=args.tenants, users=args.users)
    )
    seed = json.loads(seeded)
    redis_cleanup(args.redis_url)
    undecided_sql = UNDECIDED_SQL.format(submitted=seed["submitted"].replace("'", "''"))

    scripts = {}
    for kind, body in (("submit", WRK_SUBMIT), ("list", WRK_LIST)):
        scripts[kind] = workdir / f"{kind}.lua"
        scripts[kind].write_text(
            (WRK_COMMON + body + WRK_DONE).format(
                tokens=lua_strings(seed["tokens"]),
                queues=lua_strings(seed["queues"]),
                outdir=workdir,
                kind=kind,
                prefix=NAME_PREFIX,
            )
        )

    # gunicorn.conf.py (the deployment's settings) unless overridden here
    gunicorn_cmd = [
        str(VENV_BIN / "gunicorn"),
        "portal.wsgi:application",
        "--config",
        str(ROOT / "gunicorn.conf.py"),
        "--bind",
        f"127.0.0.1:{port}",
        "--error-logfile",
        str(workdir / "gunicorn.log"),
    ]
    for option, value in (
        ("--workers", args.workers),
        ("--worker-class", args.worker_class),
        ("--threads", args.worker_threads),
    ):
        if value is not None:
            gunicorn_cmd += [option, str(value)]
    celery = str(VENV_BIN / "celery")
    worker_cmd = [
        celery,
        "-A",
        "portal",
        "worker",
        "--loglevel=WARNING",
        f"--concurrency={args.celery_concurrency}",
        # Both queues: the cycle task is routed to `cycle` (CELERY_TASK_ROUTES).
        "-Q",
        "celery,cycle",
    ]
    beat_cmd = [
        celery,
        "-A",
        "portal",
        "beat",
        "--loglevel=WARNING",
        "--schedule",
        str(workdir / "celerybeat-schedule"),
    ]
    gunicorn = worker = beat = None
    logs = {name: (workdir / f"{name}.log").open("w") for name in ("worker", "beat")}
    outputs: dict[str, str] = {}
    cpu_seconds: dict[str, float | None] = {}
    load_before = load_after = ""
    catch_up_seconds = None
    undecided_at_stop = undecided = None
    try:
        worker = subprocess.Popen(
            worker_cmd,
            cwd=ROOT,
            env=env,
            stdout=logs["worker"],
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        beat = subprocess.Popen(
            beat_cmd,
            cwd=ROOT,
            env=env,
            stdout=logs["beat"],
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log("starting " + " ".join(gunicorn_cmd[1:]))
        gunicorn = subprocess.Popen(gunicorn_cmd, cwd=ROOT, env=env, start_new_session=True)
        wait_ready(f"http://127.0.0.1:{port}/api/v1/queues/", seed["tokens"][0], gunicorn)
        meter = CpuMeter(
            roots={"gunicorn": gunicorn.pid, "celery_worker": worker.pid, "celery_beat": beat.pid},
            db=args.db,
            pg=pg,
            redis_url=args.redis_url,
        )
        load_before = loadavg()
        meter.start()
        wrks = {}
        for kind, clients in (("submit", submitters), ("list", listers)):
            threads = max(1, min(args.wrk_threads, clients))
            cmd = [
                args.wrk,
                f"-t{threads}",
                f"-c{clients}",
                f"-d{args.duration}s",
                "--timeout",
                "10s",
                "-s",
                str(scripts[kind]),
                f"http://127.0.0.1:{port}",
            ]
            log("running " + " ".join(cmd))
            wrks[kind] = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        for kind, proc in wrks.items():
            outputs[kind], _ = proc.communicate(timeout=args.duration + 60)
            if proc.returncode:
                raise SystemExit(f"wrk ({kind}) exited with {proc.returncode}")
        cpu_seconds = meter.stop()
        load_after = loadavg()
        stop(gunicorn)  # no request after this point: what is stored is final
        undecided_at_stop = int(psql(undecided_sql, db=args.db, pg=pg))
        log(f"load over; {undecided_at_stop} jobs await a scheduling decision")
        started = time.monotonic()
        undecided = undecided_at_stop
        while undecided and time.monotonic() - started < args.catch_up_timeout:
            if worker.poll() is not None or beat.poll() is not None:
                raise SystemExit("celery exited:\n" + (workdir / "worker.log").read_text()[-3000:])
            time.sleep(1.0)
            undecided = int(psql(undecided_sql, db=args.db, pg=pg))
        if not undecided:
            catch_up_seconds = round(time.monotonic() - started, 1)
    finally:
        for proc in (gunicorn, beat, worker):
            stop(proc)
        for handle in logs.values():
            handle.close()

    submit_statuses, ok_names = read_responses(workdir, "submit")
    list_statuses, _ = read_responses(workdir, "list")
    stored = Counter(psql("SELECT name FROM jobs_job", db=args.db, pg=pg).splitlines())
    rows = sum(stored.values())
    duplicates = sum(1 for count in stored.values() if count > 1)
    ok_missing = sum(1 for name in ok_names if name != "-" and stored[name] == 0)
    ok_unparsed = ok_names.count("-")
    states = dict(
        line.split("|")
        for line in psql(
            "SELECT status, count(*) FROM jobs_job GROUP BY status", db=args.db, pg=pg
        ).splitlines()
    )
    cycles = psql(
        "SELECT count(*), coalesce(round(avg(extract(epoch FROM finished_at - started_at)) "
        "* 1000), 0), coalesce(round(max(extract(epoch FROM finished_at - started_at)) "
        "* 1000), 0), count(*) FILTER (WHERE error <> '') FROM scheduling_cyclerun",
        db=args.db,
        pg=pg,
    ).split("|")
    kicks_left = redis_cleanup(args.redis_url)
    worker_log = (workdir / "worker.log").read_text()
    if not args.keep_db:
        psql(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)', pg=pg)

    submit = kind_summary(wrk_stats(outputs["submit"]), submit_statuses)
    listing = kind_summary(wrk_stats(outputs["list"]), list_statuses)
    created = sum(count for status, count in submit_statuses.items() if 200 <= status < 300)
    server_errors = sum(
        count
        for statuses in (submit_statuses, list_statuses)
        for status, count in statuses.items()
        if status >= 500
    )
    socket_errors = sum(submit["socket_errors"].values()) + sum(listing["socket_errors"].values())
    total = submit["requests"] + listing["requests"]
    shutil.rmtree(workdir, ignore_errors=True)
    summary = {
        "requests_per_s": round(submit["requests_per_s"] + listing["requests_per_s"], 1),
        "submit": submit,
        "list": listing,
        "server_errors": server_errors,
        "socket_errors": socket_errors,
        "created": created,
        "rows": rows,
        "duplicates": duplicates,
        "ok_missing_in_db": ok_missing,
        "ok_without_name": ok_unparsed,
        "accounting_ok": ok_missing == 0
        and duplicates == 0
        and ok_unparsed == 0
        and rows >= created,
        "undecided_at_load_stop": undecided_at_stop,
        "undecided_after_wait": undecided,
        "caught_up": undecided == 0,
        "catch_up_seconds": catch_up_seconds,
        "jobs_by_status": {status: int(count) for status, count in sorted(states.items())},
        "cycles": {
            "runs": int(cycles[0]),
            "mean_ms": float(cycles[1]),
            "max_ms": float(cycles[2]),
            "failed": int(cycles[3]),
        },
        "celery_messages_left": kicks_left,
        "worker_errors_logged": worker_log.count("ERROR"),
        "cpu_ms_per_request": cpu_per_request(cpu_seconds, max(total, 1)),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "config": {
            "settings": "portal.settings.production",
            "gunicorn": "gunicorn.conf.py"
            + "".join(
                f" {option}={value}"
                for option, value in (
                    ("workers", args.workers),
                    ("worker_class", args.worker_class),
                    ("threads", args.worker_threads),
                )
                if value is not None
            ),
            "clients": {"submit": submitters, "list": listers},
            "duration_s": args.duration,
            "users": args.users,
            "tenants": args.tenants,
            "celery": f"worker --concurrency={args.celery_concurrency} + beat every "
            f"{args.cycle_seconds:g} s",
            "cluster": "simulated (demo_cluster.yaml)",
            "cpus": os.cpu_count(),
        },
    }
    return summary


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
