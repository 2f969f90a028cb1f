"""Benchmark the whole cycle against a real database: seed, then time each phase.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_bench \\
        python -m scheduler.adapters.bench_cycle --nodes 1000 --jobs 10000 --queues 50

Prints one JSON object per cycle: snapshot/core/persist/reconcile milliseconds as the cycle
records them, their parts (list_pods, observe, snapshot_build, decisions_persist,
desired_pods), db_ms (everything but the core), binds and the (snapshot + persist) / core ratio.
The database is migrated and emptied first (--reset is required when it already holds jobs), so
point it at a database of its own. DEBUG is off unless DJANGO_DEBUG says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable
from datetime import timedelta

GANG_MIX = ((1, 30), (2, 20), (4, 20), (8, 15), (16, 10), (32, 5))  # (GPUs, weight %)
GiB = 1024**3
# Functions the cycle module calls, timed apart: cycle module attribute -> JSON key.
PARTS = {
    "cluster_observe": "observe_ms",
    "snapshot_build": "snapshot_build_ms",
    "decisions_persist": "decisions_persist_ms",
    "desired_pods": "desired_pods_ms",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reset", action="store_true", help="empty a database that has data")
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")
    # As in production: with DEBUG on, Django also keeps the text of every query it runs.
    os.environ.setdefault("DJANGO_DEBUG", "false")
    import django

    django.setup()
    from django.core.management import call_command

    from portal.jobs.models import Job

    call_command("migrate", verbosity=0)
    if Job.objects.exists():
        if not args.reset:
            print("bench_cycle: the database holds jobs; pass --reset to empty it", file=sys.stderr)
            return 2
        call_command("flush", interactive=False, verbosity=0)
    seed(nodes=args.nodes, jobs=args.jobs, queues=args.queues, rng=random.Random(args.seed))  # noqa: S311 - a seeded workload, not a secret
    for number in range(1, args.cycles + 1):
        print(json.dumps(run_once(number), sort_keys=True), flush=True)
    return 0


def seed(*, nodes: int, jobs: int, queues: int, rng: random.Random) -> None:
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone

    from portal.cluster.models import Node
    from portal.jobs.models import Job, JobTask
    from portal.queues.models import Queue
    from portal.tenants.models import Tenant

    now = timezone.now()
    with transaction.atomic():
        user = get_user_model().objects.create(username="bench")
        tenants = Tenant.objects.bulk_create(
            [Tenant(name=f"team-{i}") for i in range(max(1, queues // 5))]
        )
        queue_rows = Queue.objects.bulk_create(
            [
                Queue(tenant=tenants[i % len(tenants)], name=f"q-{i:03d}", weight=1 + i % 4)
                for i in range(queues)
            ]
        )
        Node.objects.bulk_create(
            [
                Node(
                    name=f"node-{i:05d}",
                    gpu_count=8,
                    gpu_model="H100",
                    cpu_millis=96_000,
                    memory_bytes=1024 * GiB,
                    topology_labels={"topology.kubernetes.io/zone": f"rack-{i // 32}"},
                )
                for i in range(nodes)
            ],
            batch_size=1000,
        )
        sizes, weights = zip(*GANG_MIX)
        job_rows, shapes = [], []
        for i in range(jobs):
            queue = queue_rows[rng.randrange(queues)]
            gpus = rng.choices(sizes, weights)[0]
            replicas, per_pod = (gpus // 8, 8) if gpus > 8 else (1, gpus)
            shapes.append((replicas, per_pod))
            job_rows.append(
                Job(
                    tenant_id=queue.tenant_id,
                    queue=queue,
                    submitter=user,
                    name=f"job-{i}",
                    priority=rng.choice((0, 0, 0, 10)),
                    min_available=replicas,
                    status=Job.Status.PENDING,
                    submitted_at=now - timedelta(seconds=jobs - i),
                )
            )
        Job.objects.bulk_create(job_rows, batch_size=2000)
        JobTask.objects.bulk_create(
            [
                JobTask(
                    job=job,
                    name="worker",
                    replicas=replicas,
                    image="trainer:latest",
                    gpus=per_pod,
                    cpu_millis=8000 * per_pod,
                    memory_bytes=64 * GiB * per_pod,
                )
                for job, (replicas, per_pod) in zip(job_rows, shapes)
            ],
            batch_size=2000,
        )


def run_once(number: int) -> dict:
    from django.conf import settings

    from scheduler.adapters import cycle as cycle_module
    from scheduler.adapters.cluster.simulated import SimulatedBackend
    from scheduler.adapters.cycle import scheduling_cycle_run

    # The cycle records snapshot_ms as listing the pods + observe + snapshot_build, persist_ms
    # as re-checking the decisions + decisions_persist, reconcile_ms as desired_pods + plan +
    # apply. The parts are timed here by wrapping them where the cycle looks them up.
    parts: dict[str, float] = {}
    backend = SimulatedBackend(default_run_seconds=settings.SIMULATED_DEFAULT_RUN_SECONDS)
    backend.list_pods = _timed(parts, "list_pods_ms", backend.list_pods)
    originals = {name: getattr(cycle_module, name) for name in PARTS if hasattr(cycle_module, name)}
    try:
        for name, function in originals.items():
            setattr(cycle_module, name, _timed(parts, PARTS[name], function))
        run = scheduling_cycle_run(backend=backend)
    finally:
        for name, function in originals.items():
            setattr(cycle_module, name, function)
    shell = run.snapshot_ms + run.persist_ms
    return {
        "cycle": number,
        "snapshot_ms": round(run.snapshot_ms, 1),
        **{name: round(ms, 1) for name, ms in parts.items()},
        "core_ms": round(run.core_ms, 1),
        "persist_ms": round(run.persist_ms, 1),
        "reconcile_ms": round(run.reconcile_ms, 1),
        # Everything but the core: what the database side of the cycle costs.
        "db_ms": round(shell + run.reconcile_ms, 1),
        "total_ms": round(shell + run.core_ms + run.reconcile_ms, 1),
        "binds": run.binds,
        "evictions": run.evictions,
        "pending_jobs": run.pending_jobs,
        "snapshot_plus_persist_over_core": round(shell / run.core_ms, 2) if run.core_ms else None,
        "error": run.error,
    }


def _timed(parts: dict[str, float], key: str, function: Callable) -> Callable:
    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            parts[key] = parts.get(key, 0.0) + (time.perf_counter() - start) * 1000

    return timed


if __name__ == "__main__":
    sys.exit(main())
