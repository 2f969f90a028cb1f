"""Which of a cycle's decisions still hold when it persists them.

A cycle decides on a snapshot; by the time it persists, the web may have cancelled a job and,
if two cycles overlapped (Redis forgot the lock, a worker stalled past its TTL), another cycle
may have placed jobs or filled nodes. Inside the fenced persist transaction (see cycle.py)
`decisions_revalidate` withdraws, per job so that a gang is never half-placed:

* binds and evictions of jobs whose status changed since the snapshot;
* binds of a replica that has an active placement by now;
* binds that would push a node past its GPUs, CPU or memory;
* evictions whose victim's placements changed.

The next cycle decides again from fresh rows.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from collections.abc import Iterable

from django.db import connection
from django.db.models import Sum

from jobspec.gpushare import MILLI_PER_GPU, milli_cost
from scheduler.adapters.portal_port import Job, Node, Placement, placement_milli
from scheduler.adapters.snapshot import SnapshotBundle
from scheduler.core.types import Bind, CycleResult

logger = logging.getLogger(__name__)

WITHDRAWN_NO_ROOM = (
    "placement withdrawn: node {node} had no room left when the decision was saved; "
    "retried next cycle"
)
WITHDRAWN_PLACED = "placement withdrawn: another cycle placed this job; retried next cycle"
BATCH = 1000


def decisions_revalidate(
    *, bundle: SnapshotBundle, result: CycleResult
) -> tuple[CycleResult, list[str]]:
    """The decisions whose premise still holds, checked inside the caller's fenced
    transaction, with the rows the web may write (jobs) locked."""
    index = bundle.index
    preemptors = {evict.preemptor_job for evict in result.evictions if evict.preemptor_job}
    touched = (
        {bind.job for bind in result.binds} | {evict.job for evict in result.evictions} | preemptors
    )
    if not touched:
        return result, []
    status_now = _job_statuses_locked(sorted(int(key) for key in touched))
    moved = {key for key in touched if status_now.get(int(key)) != index.jobs[key].status}
    if moved:
        logger.info("jobs changed since the snapshot, their decisions withdrawn: %s", moved)

    victims = {evict.job for evict in result.evictions} - moved
    held = [p for p in index.placements.values() if str(p.job_id) in victims]
    state_now = dict(
        Placement.objects.filter(id__in=[p.id for p in held]).values_list("id", "state")
    )
    stale_victims = {str(p.job_id) for p in held if state_now.get(p.id) != p.state}
    # A preemptor that changed (placed by another cycle, cancelled) no longer needs room.
    evictions = tuple(
        evict
        for evict in result.evictions
        if evict.job not in moved
        and evict.job not in stale_victims
        and evict.preemptor_job not in moved
    )

    notes: list[str] = []
    reasons = dict(result.pending_reasons)
    binds = [bind for bind in result.binds if bind.job not in moved]
    placed = _jobs_with_placed_replicas(bundle, binds)
    for key in sorted(placed, key=int):
        reasons[key] = WITHDRAWN_PLACED
    binds = [bind for bind in binds if bind.job not in placed]
    no_room = _jobs_without_room(bundle, binds)
    for key, node in sorted(no_room.items(), key=lambda item: int(item[0])):
        reasons[key] = WITHDRAWN_NO_ROOM.format(node=node)
    binds = [bind for bind in binds if bind.job not in no_room]
    if placed or no_room or stale_victims:
        notes.append(
            "decisions withdrawn because the rows changed since the snapshot (another cycle "
            f"wrote in between?): jobs placed meanwhile {sorted(placed, key=int)}, "
            f"jobs without room {sorted(no_room, key=int)}, "
            f"victims whose placements changed {sorted(stale_victims, key=int)}"
        )
        logger.warning("scheduling cycle: %s", notes[-1])
    revalidated = dataclasses.replace(
        result, binds=tuple(binds), evictions=evictions, pending_reasons=reasons
    )
    return revalidated, notes


def _job_statuses_locked(ids: list[int]) -> dict[int, str]:
    """{id: status} of the jobs, locked until the transaction ends: a cancel from the web
    either committed before (and is seen here) or waits until this persist committed.

    Only jobs need row locks: placements and nodes are written by fenced cycle transactions
    (node sync, observe, persist), which the cycle write lock already runs one at a time.
    """
    if connection.vendor == "postgresql":
        # One array parameter: several times faster than the ORM's IN list of 2,000 ids.
        table = connection.ops.quote_name(Job._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, status FROM {table} WHERE id = ANY(%s) ORDER BY id FOR UPDATE",  # noqa: S608 - quoted model names; values are bound parameters
                [ids],
            )
            return dict(cursor.fetchall())
    # SQLite: the fence holds the database's only write lock, so no cancel commits meanwhile.
    statuses: dict[int, str] = {}
    for start in range(0, len(ids), BATCH):
        rows = Job.objects.filter(id__in=ids[start : start + BATCH]).values_list("id", "status")
        statuses.update(rows)
    return statuses


def _jobs_with_placed_replicas(bundle: SnapshotBundle, binds: list[Bind]) -> set[str]:
    """Jobs with a replica to bind that has an active placement by now."""
    pending = bundle.index.pending
    wanted = {(pending[bind.task].task.id, pending[bind.task].replica): bind.job for bind in binds}
    task_ids = sorted({task_id for task_id, _ in wanted})
    placed: set[str] = set()
    for start in range(0, len(task_ids), BATCH):
        rows = Placement.objects.filter(
            task_id__in=task_ids[start : start + BATCH], state__in=Placement.ACTIVE_STATES
        ).values_list("task_id", "replica")
        placed.update(wanted[row] for row in rows if row in wanted)
    return placed


def _jobs_without_room(bundle: SnapshotBundle, binds: list[Bind]) -> dict[str, str]:
    """Jobs whose binds would overfill a node, given the active placements as they are now.

    Jobs are taken in the core's bind order and admitted whole or not at all. The node rows
    are locked against an admin changing a node's capacity meanwhile.
    """
    names = sorted({bind.node for bind in binds})
    # GPUs in milli-GPU: shares of a card count their fraction.
    capacity: dict[str, tuple[int, int, int]] = {}
    card_mib: dict[str, int] = {}
    for start in range(0, len(names), BATCH):
        rows = (
            Node.objects.select_for_update()
            .filter(name__in=names[start : start + BATCH])
            .order_by("name")
            .values_list("name", "gpu_count", "cpu_millis", "memory_bytes", "gpu_memory_mib")
        )
        for name, gpus, cpu, memory, mib in rows:
            capacity[name] = (gpus * MILLI_PER_GPU, cpu, memory)
            card_mib[name] = mib
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for start in range(0, len(names), BATCH):
        rows = (
            Placement.objects.filter(
                node_name__in=names[start : start + BATCH], state__in=Placement.ACTIVE_STATES
            )
            .values("node_name")
            .annotate(
                gpus=Sum(placement_milli()),
                cpu=Sum("task__cpu_millis"),
                memory=Sum("task__memory_bytes"),
            )
            .values_list("node_name", "gpus", "cpu", "memory")
        )
        for name, gpus, cpu, memory in rows:
            used[name] = [gpus or 0, cpu or 0, memory or 0]

    no_room: dict[str, str] = {}
    for key, job_binds in _by_job(binds).items():
        need: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for bind in job_binds:
            task = bundle.index.pending[bind.task].task
            total = need[bind.node]
            total[0] += milli_cost(
                gpus=task.gpus,
                gpu_milli=task.gpu_milli,
                gpu_memory_mib=task.gpu_memory_mib,
                device_memory_mib=card_mib.get(bind.node, 0),
            )
            total[1] += task.cpu_millis
            total[2] += task.memory_bytes
        full = next(
            (
                node
                for node, asked in sorted(need.items())
                if node not in capacity
                or any(u + a > c for u, a, c in zip(used[node], asked, capacity[node]))
            ),
            None,
        )
        if full is not None:
            no_room[key] = full
            continue
        for node, asked in need.items():
            used[node] = [u + a for u, a in zip(used[node], asked)]
    return no_room


def _by_job(binds: Iterable[Bind]) -> dict[str, list[Bind]]:
    grouped: dict[str, list[Bind]] = {}
    for bind in binds:
        grouped.setdefault(bind.job, []).append(bind)
    return grouped
