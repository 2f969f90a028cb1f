"""Page benchmark: seed a large history, then time the pages server-side.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_bench \\
        .venv/bin/python -m portal.dashboards.bench [--jobs 100000] [--days 30] [--queues 50]

Seeds (bulk_create) tenants, queues, nodes, jobs with tasks and placements, per-minute usage
samples, preemption events and a year of usage ledger rows, then requests each page 20 times with Django's test Client as
a site admin and prints p50/p95 milliseconds and query counts as JSON. Only run it against a
scratch database: it migrates it and adds rows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import datetime, timedelta
from typing import Any

BATCH = 5000


def seed_usage_history(
    *, queues: list[Any], now: datetime, days: float, step_minutes: int = 1, seed: int = 7
) -> int:
    """Per-queue usage samples every `step_minutes` over `days` (a smooth daily wave)."""
    import math

    from portal.scheduling.models import QueueUsageSample

    rng = random.Random(seed)  # noqa: S311 - a seeded workload, not a secret
    steps = int(days * 24 * 60 / step_minutes)
    created = 0
    batch: list[QueueUsageSample] = []
    for index, queue in enumerate(queues):
        phase = rng.random() * 2 * math.pi
        base = 2 + (index % 7)
        for step in range(steps):
            at = now - timedelta(minutes=step * step_minutes)
            wave = math.sin(phase + step * step_minutes / 1440 * 2 * math.pi)
            allocated = max(0, int(base + base * 0.8 * wave + rng.randint(-1, 1)))
            batch.append(
                QueueUsageSample(
                    queue=queue,
                    at=at,
                    gpus_allocated=allocated,
                    gpus_deserved=float(base + 2),
                    gpus_pending=max(0, int(3 * wave)),
                )
            )
            if len(batch) >= BATCH:
                QueueUsageSample.objects.bulk_create(batch)
                created += len(batch)
                batch = []
    QueueUsageSample.objects.bulk_create(batch)
    return created + len(batch)


def seed_preemptions(*, jobs: list[Any], now: datetime, days: float, count: int, seed: int = 11):
    from portal.scheduling.models import PreemptionEvent

    rng = random.Random(seed)  # noqa: S311 - a seeded workload, not a secret
    actions = ["reclaim", "reclaim", "preempt", "rescheduling"]
    events = []
    for _ in range(count):
        victim = rng.choice(jobs)
        preemptor = rng.choice(jobs)
        gpus = rng.choice([1, 2, 4, 8])
        action = rng.choice(actions)
        events.append(
            PreemptionEvent(
                victim_job=victim,
                victim_task_name="worker",
                victim_queue_id=victim.queue_id,
                victim_tenant_id=victim.tenant_id,
                node_name=f"gpu-node-{rng.randint(1, 40):03d}",
                preemptor_job=preemptor,
                preemptor_queue_id=preemptor.queue_id,
                action=action,
                gpus_freed=gpus,
                occurred_at=now - timedelta(seconds=rng.randint(0, int(days * 86400))),
                sentence=f"{action}: job {victim.name} lost {gpus} GPUs to {preemptor.name}",
            )
        )
    PreemptionEvent.objects.bulk_create(events, batch_size=BATCH)
    return len(events)


def seed_ledger(
    *, queues: list[Any], now: datetime, months: int = 12, users: int = 20, seed: int = 5
) -> int:
    """Usage ledger rows: every queue x `users` users for each of the last `months` months
    (what a year of cycles books for a busy site)."""
    from django.contrib.auth import get_user_model

    from portal.accounting.booking import month_of
    from portal.accounting.models import LedgerEntry

    rng = random.Random(seed)  # noqa: S311 - a seeded workload, not a secret
    user_model = get_user_model()
    people = [
        user_model.objects.get_or_create(username=f"bench-user-{i:02d}")[0] for i in range(users)
    ]
    month = month_of(now)
    entries = []
    for _ in range(months):
        for queue in queues:
            for person in people:
                hours = rng.randint(0, 400)
                borrowed = rng.randint(0, hours)
                entries.append(
                    LedgerEntry(
                        month=month,
                        tenant_id=queue.tenant_id,
                        queue=queue,
                        user=person,
                        gpu_milli_seconds_within=(hours - borrowed) * 3_600_000,
                        gpu_milli_seconds_borrowed=borrowed * 3_600_000,
                        cpu_milli_seconds_within=hours * 8 * 3_600_000,
                        gpu_milli_seconds_lost=rng.randint(0, 20) * 3_600_000,
                    )
                )
        month = (month.replace(day=1) - timedelta(days=1)).replace(day=1)
    LedgerEntry.objects.bulk_create(entries, batch_size=BATCH, ignore_conflicts=True)
    return len(entries)


def seed(*, n_jobs: int, days: int, n_queues: int, n_nodes: int = 40) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from portal.cluster.models import Node, Placement
    from portal.jobs.models import Job, JobTask
    from portal.queues.models import Queue
    from portal.tenants.models import Tenant

    rng = random.Random(3)  # noqa: S311 - a seeded workload, not a secret
    now = timezone.now()
    user_model = get_user_model()
    admin, _ = user_model.objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    tenants = [Tenant.objects.get_or_create(name=f"bench-t{i}")[0] for i in range(10)]
    queues = []
    for i in range(n_queues):
        queue, _ = Queue.objects.get_or_create(
            name=f"bench-q{i:02d}",
            defaults={"tenant": tenants[i % len(tenants)], "weight": 1 + i % 4},
        )
        queues.append(queue)
    nodes = []
    for i in range(n_nodes):
        node, _ = Node.objects.get_or_create(
            name=f"bench-node-{i:03d}",
            defaults={
                "gpu_count": 8,
                "gpu_model": "H100" if i % 2 else "A100",
                "cpu_millis": 96000,
                "memory_bytes": 1024**4,
            },
        )
        nodes.append(node)

    statuses = [Job.Status.SUCCEEDED] * 6 + [Job.Status.PENDING] * 2 + [Job.Status.RUNNING]
    statuses += [Job.Status.CANCELLED]
    jobs = [
        Job(
            tenant_id=queue.tenant_id,
            queue=queue,
            submitter=admin,
            name=f"bench-job-{i}",
            min_available=1,
            status=rng.choice(statuses),
            submitted_at=now - timedelta(seconds=rng.randint(0, days * 86400)),
        )
        for i, queue in ((i, rng.choice(queues)) for i in range(n_jobs))
    ]
    jobs = Job.objects.bulk_create(jobs, batch_size=BATCH)
    tasks = JobTask.objects.bulk_create(
        [
            JobTask(job=job, name="worker", replicas=1, image="trainer", gpus=rng.choice([1, 2, 4]))
            for job in jobs
        ],
        batch_size=BATCH,
    )
    free = {node.pk: node.gpu_count for node in nodes}
    placements = []
    for task in tasks:
        if task.job.status != Job.Status.RUNNING:
            continue
        node = next((n for n in nodes if free[n.pk] >= task.gpus), None)
        if node is None:
            break
        free[node.pk] -= task.gpus
        placements.append(
            Placement(
                job=task.job,
                task=task,
                replica=0,
                node=node,
                node_name=node.name,
                pod_name=f"bench-pod-{task.pk}",
                state=Placement.State.RUNNING,
                gpus=task.gpus,
            )
        )
    Placement.objects.bulk_create(placements, batch_size=BATCH)
    samples = seed_usage_history(queues=queues, now=now, days=days)
    events = seed_preemptions(jobs=jobs, now=now, days=days, count=max(n_jobs // 20, 1))
    ledger = seed_ledger(queues=queues, now=now)
    rollups = _after_bulk_load()
    return {
        "jobs": len(jobs),
        "placements": len(placements),
        "usage_samples": samples,
        "preemptions": events,
        "ledger_entries": ledger,
        "queues": len(queues),
        "usage_rollups": rollups,
    }


def _after_bulk_load() -> dict[str, int]:
    """Samples were bulk-inserted (not through the scheduler's persist step): rebuild the hourly
    and daily rollups, then refresh the planner's statistics on PostgreSQL (a fresh bulk load
    has none until autovacuum, if it is on, gets to it; the plans depend on them)."""
    from django.db import connection

    from portal.scheduling.rollups import usage_rollups_rebuild

    counts = usage_rollups_rebuild()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return counts


def measure(*, repeat: int = 20) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_HOST="localhost")
    client.force_login(get_user_model().objects.get(username="bench-admin"))
    urls = {
        "dashboard": "/dashboards/",
        "chart usage (day)": "/dashboards/data/usage/?range=day",
        "chart usage (week)": "/dashboards/data/usage/?range=week",
        "chart usage (month)": "/dashboards/data/usage/?range=month",
        "chart quota": "/dashboards/data/quota/",
        "chart occupancy": "/dashboards/data/occupancy/",
        "chart pending": "/dashboards/data/pending/",
        "chart preemptions (week)": "/dashboards/data/preemptions/?range=week",
        "job list": "/jobs/",
        "job list (page 100, pending)": "/jobs/?status=pending&page=100",
        "preemption history": "/admin-area/preemptions/",
        "preemption history (filtered)": "/admin-area/preemptions/?action=reclaim&page=10",
        **_quota_pages(),
        **_usage_pages(),
    }
    results = {}
    for label, url in urls.items():
        timings = []
        queries = 0
        for _ in range(repeat):
            with CaptureQueriesContext(connection) as captured:
                start = time.perf_counter()
                response = client.get(url)
                timings.append((time.perf_counter() - start) * 1000)
            if response.status_code != 200:
                raise RuntimeError(f"{url}: HTTP {response.status_code}")
            queries = len(captured.captured_queries)
        timings.sort()
        results[label] = {
            "url": url,
            "p50_ms": round(statistics.median(timings), 1),
            "p95_ms": round(timings[max(int(len(timings) * 0.95) - 1, 0)], 1),
            "queries": queries,
        }
    return results


def _quota_pages() -> dict[str, str]:
    """The tenant and queue quota pages, on the first tenant and queue seeded."""
    from urllib.parse import urlencode

    from portal.queues.models import Queue
    from portal.tenants.models import Tenant
    from portal.tenants.quota import QUOTA_FIELDS

    tenant, queue = Tenant.objects.order_by("pk").first(), Queue.objects.order_by("pk").first()
    if tenant is None or queue is None:
        return {}
    values = {f: getattr(tenant, f) for f in QUOTA_FIELDS if getattr(tenant, f) is not None}
    proposed = urlencode({**values, "weight": tenant.weight + 1, "reclaimable": "on"})
    return {
        "tenants": "/tenants/",
        "tenant detail": f"/tenants/{tenant.pk}/",
        "tenant quota edit": f"/tenants/{tenant.pk}/edit/",
        "tenant quota preview": f"/tenants/{tenant.pk}/preview/?{proposed}",
        "queue edit": f"/queues/{queue.pk}/edit/",
        "api tenants": "/api/v1/tenants/",
    }


def _usage_pages() -> dict[str, str]:
    """The usage report (page, API, CSV) on last month, and the dashboard by tenant."""
    from django.utils import timezone

    from portal.accounting.booking import month_of
    from portal.tenants.models import Tenant

    month = (month_of(timezone.now()) - timedelta(days=1)).replace(day=1)
    pages = {
        f"usage page (per {group})": f"/usage/?group_by={group}&month={month:%Y-%m}"
        for group in ("tenant", "queue", "user")
    }
    pages["api usage report (per user)"] = (
        f"/api/v1/usage/report/?group_by=user&month={month:%Y-%m}"
    )
    pages["api usage report CSV (per queue)"] = (
        f"/api/v1/usage/report/?group_by=queue&month={month:%Y-%m}&format=csv"
    )
    pages["chart tenants"] = "/dashboards/data/tenants/"
    tenant = Tenant.objects.order_by("pk").first()
    if tenant is not None:
        pages["dashboard (one tenant)"] = f"/dashboards/?tenant={tenant.pk}"
        pages["chart quota (one tenant)"] = f"/dashboards/data/quota/?tenant={tenant.pk}"
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--no-seed", action="store_true", help="measure the existing rows")
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")
    os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.DEBUG = False
    call_command("migrate", verbosity=0)
    report: dict[str, Any] = {"database": settings.DATABASES["default"]["ENGINE"]}
    if not args.no_seed:
        start = time.perf_counter()
        report["seeded"] = seed(n_jobs=args.jobs, days=args.days, n_queues=args.queues)
        report["seed_seconds"] = round(time.perf_counter() - start, 1)
    report["pages"] = measure(repeat=args.repeat)
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
