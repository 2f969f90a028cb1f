"""Where the CPU of one job creation goes: the WSGI app in-process, no HTTP, no gunicorn.

Creates a fresh PostgreSQL database, migrates and seeds it as bench.api_load does, then
calls `portal.wsgi.application` directly with the production settings for --requests
`POST /api/v1/jobs/` (same body as the load test), after a warm-up. Prints CPU ms and wall
ms per request, SQL queries per request (with their statements), and, with --profile, the
top functions by cumulative and own time (cProfile). See docs/load.md.

    .venv/bin/python -m bench.api_profile --requests 500 --profile
"""

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench._cachegrind import instructions
from bench.api_load import (
    ROOT,
    SEED,
    database_seeded,
    portal_env,
    process_cpu_seconds,
    psql,
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--db", default="portal_profile", help="database to (re)create")
    parser.add_argument("--pg-host", default="127.0.0.1")
    parser.add_argument("--pg-port", default="5432")
    parser.add_argument("--pg-user", default="postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    parser.add_argument(
        "--profile",
        choices=["cprofile", "pyinstrument"],
        help="profile the measured requests (cProfile on CPU time, or pyinstrument sampling)",
    )
    parser.add_argument("--top", type=int, default=30, help="rows of each profile table")
    parser.add_argument("--sort", default="cumulative,tottime", help="pstats sort keys")
    parser.add_argument(
        "--callers", help="cProfile: also print the callers of functions matching this"
    )
    parser.add_argument(
        "--callees", help="cProfile: also print the callees of functions matching this"
    )
    parser.add_argument("--list", action="store_true", help="also time GET /api/v1/jobs/")
    parser.add_argument("--rate", default="1000000/min", help="API_JOB_CREATE_RATE")
    parser.add_argument(
        "--db-options",
        default="",
        help="experiment: appended to DATABASE_URL, e.g. '&server_side_binding=true'",
    )
    parser.add_argument(
        "--no-kick", action="store_true", help="experiment: skip the scheduling-cycle kick"
    )
    parser.add_argument(
        "--no-throttle", action="store_true", help="experiment: no job_create throttle"
    )
    parser.add_argument(
        "--pending-jobs",
        type=int,
        default=0,
        help="pending 1-pod jobs the tenant holds before the measured creates (the "
        "pending-pods cap raised to fit them and the creates)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count CPU instructions per request under valgrind (slow, but the same figure "
        "however busy the machine is): two runs, --requests apart, and their difference",
    )
    return parser.parse_args(argv)


def instructions_per_request(argv: list[str], args: argparse.Namespace) -> None:
    """Run this script twice under cachegrind, with 10 and 10 + --requests measured POSTs,
    and print the difference in instructions executed per request (this process only: the
    database and Redis are not counted)."""
    rest = [arg for arg in argv if arg != "--instructions"]
    counts = [
        instructions(
            [sys.executable, "-m", "bench.api_profile", *rest, "--requests", str(n)],
            env={"PYTHONPATH": str(ROOT)},
        )
        for n in (10, 10 + args.requests)
    ]
    print(
        json.dumps(
            {
                "requests": args.requests,
                "pending_jobs": args.pending_jobs,
                "instructions_per_post_millions": round(
                    (counts[1] - counts[0]) / args.requests / 1e6, 2
                ),
            }
        )
    )


def main(argv: list[str] | None = None) -> None:  # noqa: C901, PLR0915 - a benchmark script read top to bottom
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.instructions:
        instructions_per_request(argv, args)
        return
    pg = {"host": args.pg_host, "port": args.pg_port, "user": args.pg_user}
    workdir = Path(tempfile.mkdtemp(prefix="api_profile-"))
    os.environ.update(
        portal_env(
            pg=pg,
            db=args.db,
            workdir=workdir,
            redis_url=args.redis_url,
            rate=args.rate,
            db_query=f"?conn_max_age=60{args.db_options}",
            pending_pods_cap=args.pending_jobs + 2 * (args.requests + args.warmup) + 1000,
        )
    )
    token = database_seeded(
        db=args.db,
        pg=pg,
        env=dict(os.environ),
        seed=SEED.format(queue="load-queue", pending=args.pending_jobs),
    )

    import warnings

    warnings.filterwarnings("ignore", message="No directory at")
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from portal.wsgi import application

    if args.no_kick:
        import portal.jobs.services

        portal.jobs.services.cycle_kick = lambda: None
    if args.no_throttle:
        from portal.jobs.apis import JobCreateApi

        JobCreateApi.throttle_classes = []

    counter = 0

    def environ(method: str, path: str, body: bytes = b"", query: str = "") -> dict:
        return {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "HTTP_HOST": "127.0.0.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_AUTHORIZATION": f"Token {token}",
            "HTTP_X_FORWARDED_PROTO": "https",
            "wsgi.input": io.BytesIO(body),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": False,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
            "wsgi.version": (1, 0),
        }

    def post() -> None:
        nonlocal counter
        counter += 1
        body = json.dumps(
            {
                "queue": "load-queue",
                "name": f"profile-{counter}",
                "tasks": [
                    {
                        "name": "worker",
                        "replicas": 2,
                        "image": "ghcr.io/example/trainer:latest",
                        "gpus": 1,
                        "cpu_millis": 1000,
                    }
                ],
            }
        ).encode()
        status = []
        result = application(environ("POST", "/api/v1/jobs/", body), lambda s, h: status.append(s))
        b"".join(result)
        result.close()
        if not status[0].startswith("201"):
            raise SystemExit(f"unexpected answer {status[0]}")

    def get_list() -> None:
        status = []
        result = application(
            environ("GET", "/api/v1/jobs/", query="limit=20"), lambda s, h: status.append(s)
        )
        b"".join(result)
        result.close()
        if not status[0].startswith("200"):
            raise SystemExit(f"unexpected answer {status[0]}")

    for _ in range(args.warmup):
        post()
    with CaptureQueriesContext(connection) as queries:
        post()
    report: dict = {
        "queries_per_post": len(queries),
        "post_queries": [q["sql"][:160] for q in queries.captured_queries],
    }

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]

    def measure(fn, n: int, batch: int = 50) -> dict:
        # CPU per request in batches: the lowest batch is the least disturbed by whatever
        # else runs on the machine (the median shows how much that was). The PostgreSQL
        # backend serving this process is measured too (same machine, /proc).
        batches, wall = [], time.perf_counter()
        pg_cpu = process_cpu_seconds(backend)
        for start in range(0, n, batch):
            size = min(batch, n - start)
            cpu = time.process_time()
            for _ in range(size):
                fn()
            batches.append((time.process_time() - cpu) / size * 1000)
        wall = time.perf_counter() - wall
        return {
            "requests": n,
            "cpu_ms_min_batch": round(min(batches), 2),
            "cpu_ms_median_batch": round(statistics.median(batches), 2),
            "postgres_cpu_ms": round((process_cpu_seconds(backend) - pg_cpu) / n * 1000, 2),
            "wall_ms": round(wall / n * 1000, 2),
        }

    profiler = sampler = None
    if args.profile == "cprofile":
        # CPU time, not wall time: other processes share the machine and the database waits.
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
    elif args.profile == "pyinstrument":
        from pyinstrument import Profiler

        sampler = Profiler(interval=0.0005)  # wall time: database waits show up as such
        sampler.start()
    report["post"] = measure(post, args.requests)
    if profiler:
        profiler.disable()
    if sampler:
        sampler.stop()
    if args.list:
        with CaptureQueriesContext(connection) as queries:
            get_list()
        report["queries_per_list"] = len(queries)
        report["list"] = measure(get_list, max(args.requests // 5, 20))
    connection.close()

    try:
        import redis

        redis.Redis.from_url(args.redis_url).delete("celery")
    except Exception:  # noqa: BLE001, S110 - cleanup only
        pass
    psql(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)', pg=pg)
    print(json.dumps(report, indent=2))
    if sampler:
        print(sampler.output_text(unicode=False, color=False, show_all=False))
    if profiler:
        for key in args.sort.split(","):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(args.top)
            print(out.getvalue())
        if args.callers:
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).print_callers(args.callers)
            print(out.getvalue())
        if args.callees:
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).print_callees(args.callees)
            print(out.getvalue())


if __name__ == "__main__":
    main()
