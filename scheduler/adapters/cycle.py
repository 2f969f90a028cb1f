"""One scheduling cycle: observe -> snapshot -> core -> persist -> reconcile, timed per phase.

The caller holds the cluster-wide cycle lock (scheduler.tasks) and passes its `checkpoint`,
which raises once that lock may have passed to another worker. Each phase is safe to repeat:
if a worker dies anywhere in here, the next cycle observes the cluster again and converges.

The lock alone cannot promise one cycle at a time (Redis may restart and forget it, a worker
may stall past the TTL), so a cycle's write transactions are fenced in the database too. Each
takes the cycle write lock first (one fenced transaction at a time), and then:

* node sync and observe refuse to run once a newer cycle has started: that cycle listed the
  cluster later, and applying this cycle's older pod list after it could mark a pod that has
  just started as vanished.
* persist re-checks its decisions against the rows as they are now (`decisions_revalidate`,
  with the jobs locked: the web may cancel them) and withdraws those whose premise changed:
  binds of a job whose status changed since the snapshot (cancelled meanwhile, or placed by
  another cycle), of a replica that already has an active placement, or that would push a
  node past its GPUs, CPU or memory; evictions whose victim or preemptor changed. Withdrawal
  is per job, so a gang is never half-placed; the next cycle decides again from fresh rows.
  Every cycle that gets this far persists what is still valid, so overlapping cycles cannot
  starve each other.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone

from portal.cluster.models import Node, Placement
from portal.cluster.services import node_inventory_sync
from portal.jobs.models import Job
from portal.scheduling.models import CycleRun
from scheduler.adapters import reconcile
from scheduler.adapters.cluster.base import ClusterBackend, ObservedNode, ObservedPod
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.desired import desired_pods
from scheduler.adapters.lock import CycleAbandoned, cycle_write_lock
from scheduler.adapters.observe import cluster_observe
from scheduler.adapters.persist import decisions_persist
from scheduler.adapters.snapshot import SnapshotBundle, snapshot_build
from scheduler.core.cycle import run_cycle
from scheduler.core.types import Bind, CycleResult

logger = logging.getLogger(__name__)

GPU_MODEL_LABELS = ("gpu-model", "nvidia.com/gpu.product")
TOPOLOGY_PREFIXES = ("topology.kubernetes.io/", "volcano.sh/hypernode", "network.topology/")
ABANDONED = "did not finish: its worker died or lost the cycle lock"
ABANDONED_LOOKBACK = 100  # cycles
SUPERSEDED = "cycle {newer} started after this one, which stopped before its {phase}"
WITHDRAWN_NO_ROOM = (
    "placement withdrawn: node {node} had no room left when the decision was saved; "
    "retried next cycle"
)
WITHDRAWN_PLACED = "placement withdrawn: another cycle placed this job; retried next cycle"
BATCH = 1000


class CycleSuperseded(CycleAbandoned):
    pass


def _unchecked() -> None:
    return None


def scheduling_cycle_run(
    *,
    backend: ClusterBackend,
    now: Callable[[], datetime] = timezone.now,
    checkpoint: Callable[[], None] = _unchecked,
) -> CycleRun:
    """`checkpoint` raises CycleAbandoned when this cycle must stop writing; the cycle then
    ends with the reason in CycleRun.error instead of raising."""
    cycle = CycleRun.objects.create(started_at=now())
    # Holding the lock means no earlier cycle is still running, unless its worker died
    # (SIGKILL, a lost machine) or lost the lock; a live one overwrites this when it ends.
    # The next cycle notices within seconds, so a short look back is enough (and indexed).
    CycleRun.objects.filter(
        pk__lt=cycle.pk, pk__gte=cycle.pk - ABANDONED_LOOKBACK, finished_at__isnull=True
    ).update(finished_at=cycle.started_at, error=ABANDONED)
    timings: dict[str, float] = {}
    try:
        with _timed(timings, "snapshot_ms"):
            if not isinstance(backend, SimulatedBackend):
                # The simulated cluster's nodes are the inventory itself; a real one reports its own.
                observed_nodes = backend.list_nodes()
                with transaction.atomic():
                    _fence(cycle)
                    _refuse_if_superseded(cycle, "node sync")
                    nodes_sync(observed_nodes)
            pods = backend.list_pods()
            with transaction.atomic():
                _fence(cycle)
                _refuse_if_superseded(cycle, "observe")
                cluster_observe(pods=pods, now=now())
            bundle = snapshot_build(now=now())
        with _timed(timings, "core_ms"):
            result = run_cycle(bundle.snapshot, bundle.conf)
        with _timed(timings, "persist_ms"):
            checkpoint()
            notes = decisions_persist_fenced(bundle=bundle, result=result, cycle=cycle, now=now())
        with _timed(timings, "reconcile_ms"):
            checkpoint()
            report = cluster_reconcile(backend=_LeaseChecked(backend, checkpoint), observed=pods)
            if notes or not report.ok:
                cycle.error = "; ".join([*notes, *report.errors])[:10_000]
    except CycleAbandoned as reason:
        logger.warning("scheduling cycle %s abandoned: %s", cycle.id, reason)
        cycle.error = str(reason)[:10_000]
    except Exception as error:
        logger.exception("scheduling cycle %s failed", cycle.id)
        cycle.error = f"{type(error).__name__}: {error}"[:10_000]
        raise
    finally:
        for field, value in timings.items():
            setattr(cycle, field, value)
        cycle.finished_at = now()
        cycle.save()
    return cycle


def decisions_persist_fenced(
    *, bundle: SnapshotBundle, result: CycleResult, cycle: CycleRun, now: datetime
) -> list[str]:
    """Persist what still holds of `result`, in one fenced transaction. Returns notes on
    withdrawn decisions that point at a concurrency anomaly (recorded on the CycleRun)."""
    with transaction.atomic():
        _fence(cycle)
        result, notes = decisions_revalidate(bundle=bundle, result=result)
        decisions_persist(bundle=bundle, result=result, cycle=cycle, now=now)
    return notes


def _fence(cycle: CycleRun) -> None:
    """Call first thing in a cycle's write transaction: waits for any other cycle's fenced
    transaction to end, and keeps others out until this one ends."""
    cycle_write_lock()
    # Writing first also takes SQLite's single write lock now, before the reads that follow,
    # so they and the writes after them see one state.
    CycleRun.objects.filter(pk=cycle.pk).update(finished_at=None)


def _refuse_if_superseded(cycle: CycleRun, phase: str) -> None:
    newer = CycleRun.objects.filter(pk__gt=cycle.pk).order_by("pk").values_list("pk", flat=True)
    if newer_id := newer.first():
        raise CycleSuperseded(SUPERSEDED.format(newer=newer_id, phase=phase))


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
                f"SELECT id, status FROM {table} WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
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
    capacity: dict[str, tuple[int, int, int]] = {}
    for start in range(0, len(names), BATCH):
        rows = (
            Node.objects.select_for_update()
            .filter(name__in=names[start : start + BATCH])
            .order_by("name")
            .values_list("name", "gpu_count", "cpu_millis", "memory_bytes")
        )
        capacity.update((name, (gpus, cpu, memory)) for name, gpus, cpu, memory in rows)
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for start in range(0, len(names), BATCH):
        rows = (
            Placement.objects.filter(
                node_name__in=names[start : start + BATCH], state__in=Placement.ACTIVE_STATES
            )
            .values("node_name")
            .annotate(
                gpus=Sum("gpus"), cpu=Sum("task__cpu_millis"), memory=Sum("task__memory_bytes")
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
            total[0] += task.gpus
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


class _LeaseChecked:
    """The backend, refusing every call once the cycle's lease is lost: a cycle that may have
    been superseded must stop changing the cluster. Reconcile records each refusal as an
    error of that pod and moves on, so the rest of the pass costs nothing."""

    def __init__(self, backend: ClusterBackend, checkpoint: Callable[[], None]) -> None:
        self._backend = backend
        self._checkpoint = checkpoint

    def __getattr__(self, name: str):
        attribute = getattr(self._backend, name)
        if not callable(attribute):
            return attribute

        def checked(*args, **kwargs):
            self._checkpoint()
            return attribute(*args, **kwargs)

        return checked


def cluster_reconcile(
    *, backend: ClusterBackend, observed: list[ObservedPod] | None = None
) -> reconcile.ReconcileReport:
    """Make the cluster match the bound and running placements. Finished pods are deleted: the
    observe step has already recorded their outcome."""
    if observed is None:
        observed = backend.list_pods()
    gpu_resource_of = dict(Node.objects.values_list("name", "gpu_resource_name"))
    desired = desired_pods(namespace=settings.KUBERNETES_NAMESPACE, gpu_resource_of=gpu_resource_of)
    plan = reconcile.plan(desired, observed, delete_finished=True)
    return reconcile.apply(plan, backend, grace_seconds=settings.EVICTION_GRACE_SECONDS)


def nodes_sync(observed: list[ObservedNode]) -> None:
    gpu_names = set(settings.GPU_RESOURCE_NAMES)
    specs = []
    for node in observed:
        gpu_name = next((n for n in sorted(node.allocatable) if n in gpu_names), None)
        model = next((node.labels[k] for k in GPU_MODEL_LABELS if k in node.labels), "")
        specs.append(
            {
                "name": node.name,
                "gpu_resource_name": gpu_name or "nvidia.com/gpu",
                "gpu_count": node.allocatable.get(gpu_name, 0) if gpu_name else 0,
                "gpu_model": model,
                "cpu_millis": node.allocatable.get("cpu", 0),
                "memory_bytes": node.allocatable.get("memory", 0),
                "pods_capacity": node.allocatable.get("pods", 110),
                "labels": dict(node.labels),
                "topology_labels": {
                    k: v for k, v in node.labels.items() if k.startswith(TOPOLOGY_PREFIXES)
                },
                "schedulable": not node.unschedulable,
            }
        )
    node_inventory_sync(nodes=specs)


@contextmanager
def _timed(timings: dict[str, float], field: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[field] = (time.perf_counter() - start) * 1000
