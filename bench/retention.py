"""Retention at scale: sizes and timings of a year of usage samples at 50 queues (PostgreSQL).

    createdb -h 127.0.0.1 -U postgres portal_retention
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_retention \\
        .venv/bin/python -m bench.retention --days 365 --queues 50 --keep-days 35

Seeds one sample per queue per minute for --days (one INSERT ... SELECT over generate_series),
builds the hour and day rollups, then runs retention twice: the first run works off the whole
backlog (what enabling retention on an old installation costs), the second is the steady state
(one day to roll up and delete). Prints table sizes (heap + indexes + TOAST) and timings as
JSON lines. PostgreSQL keeps the space of deleted rows for new ones (VACUUM, not VACUUM FULL),
so after retention a table stays at its largest size and stops growing: its steady size is
the kept rows times bytes_per_row. The database is emptied first: point it at one of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--keep-days", type=int, default=35)
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")
    os.environ.setdefault("DJANGO_DEBUG", "false")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from portal.ops.retention import retention_run
    from portal.queues.models import Queue
    from portal.scheduling.models import QueueUsageRollup, QueueUsageSample
    from portal.scheduling.rollups import usage_rollups_rebuild
    from portal.tenants.models import Tenant

    if connection.vendor != "postgresql":
        print("bench/retention.py: needs PostgreSQL (DATABASE_URL)", file=sys.stderr)
        return 2
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)

    def sizes(label: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")  # sizes after the space of deleted rows is reusable
            row = {"step": label}
            for model in (QueueUsageSample, QueueUsageRollup):
                table = model._meta.db_table
                cursor.execute(
                    "SELECT pg_total_relation_size(%s), pg_relation_size(%s), "
                    "(SELECT count(*) FROM " + table + ")",
                    [table, table],
                )
                total, heap, rows = cursor.fetchone()
                row[table] = {"rows": rows, "total_mib": round(total / 2**20, 1),
                              "heap_mib": round(heap / 2**20, 1),
                              "bytes_per_row": round(total / rows) if rows else None}  # fmt: skip
        print(json.dumps(row), flush=True)

    tenant = Tenant.objects.create(name="bench")
    queues = Queue.objects.bulk_create(
        [Queue(tenant=tenant, name=f"q{i:02d}") for i in range(args.queues)]
    )
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start = now - timedelta(days=args.days)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {QueueUsageSample._meta.db_table} "
            "(queue_id, at, gpus_allocated, gpus_deserved, gpus_pending, cpu_millis_allocated,"
            " memory_bytes_allocated) "
            "SELECT q.id, t, (extract(epoch FROM t)::bigint + q.id) %% 17, 8.0, "
            "(extract(epoch FROM t)::bigint / 60 + q.id) %% 5, 96000, 549755813888 "
            "FROM generate_series(%s::timestamptz, %s::timestamptz, interval '1 minute') AS t "
            "CROSS JOIN (SELECT id FROM queues_queue WHERE id = ANY(%s)) AS q",
            [start, now, [q.id for q in queues]],
        )
    seed_seconds = time.perf_counter() - started
    started = time.perf_counter()
    usage_rollups_rebuild()
    rebuild_seconds = time.perf_counter() - started
    print(json.dumps({"step": "seeded", "days": args.days, "queues": args.queues,
                      "insert_s": round(seed_seconds, 1),
                      "rollup_rebuild_s": round(rebuild_seconds, 1)}), flush=True)  # fmt: skip
    sizes(f"{args.days} days of samples, no retention")

    for label, at in (
        ("first run (backlog)", now),
        ("steady state (one day)", now + timedelta(days=1)),
    ):
        report = retention_run(
            now=at, sample_days=args.keep_days, preemption_event_days=0, cycle_run_days=0
        )
        print(json.dumps({"step": label, "seconds": round(report.seconds, 1),
                          "days_rolled_up": len(report.days_rolled_up),
                          "samples_deleted": report.samples_deleted,
                          "samples_left": report.samples_left}), flush=True)  # fmt: skip
    sizes(f"after retention (keep {args.keep_days} days)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
