"""The cycle worker's pass: the I/O around the core's decision (scheduler.core.cycle), as
numbered phases, one call each, timed per phase (as Kueue's scheduler.go `schedule()` reads).

1. nodes: a real cluster's nodes into the Node rows (cluster.node_sync);
2. observe: what the pods did since the last cycle, into placements and job statuses;
3. snapshot: one consistent read of the rows, as the core's types (snapshot, namespaces);
4. decide: the core's run_cycle, with the garbage collector paused (gc_pause);
5. persist: the decisions that still hold, into the rows (revalidate, persist);
6. reconcile: the cluster made to match the placements (desired, reconcile), and what the
   cluster refused, onto its jobs (start_failures);
7. close: what went wrong on the way and each phase's time, on the CycleRun row and in the
   worker's metrics (cycle_metrics).

A job whose data breaks phase 3, 4, 5 or 6 is quarantined and the cycle goes on without it
(quarantine.Isolation). The caller holds the cluster-wide cycle lock (scheduler.tasks) and
passes its `checkpoint`, which raises once that lock may have passed to another worker. Each
phase is safe to repeat: if a worker dies anywhere in here, the next cycle observes the cluster
again and converges.

The lock alone cannot promise one cycle at a time (Redis may restart and forget it, a worker
may stall past the TTL), so a cycle's write transactions are fenced in the database too. Each
takes the cycle write lock first (one fenced transaction at a time), and then:

* node sync and observe refuse to run once a newer cycle has started: that cycle listed the
  cluster later, and applying this cycle's older pod list after it could mark a pod that has
  just started as vanished.
* persist re-checks its decisions against the rows as they are now and withdraws those whose
  premise changed (scheduler/adapters/revalidate.py). Every cycle that gets this far persists
  what is still valid, so overlapping cycles cannot starve each other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from jobspec.pods import DesiredPod
from scheduler.adapters import reconcile
from scheduler.adapters.cluster.base import ClusterBackend, ClusterError, ObservedPod
from scheduler.adapters.cluster.node_sync import node_sync_memo, nodes_sync
from scheduler.adapters.cycle_metrics import cycle_observed
from scheduler.adapters.desired import desired_pods, job_objects_kept
from scheduler.adapters.gc_pause import run_cycle_paused
from scheduler.adapters.lock import CycleAbandoned, cycle_write_lock
from scheduler.adapters.namespaces import namespaces_hold
from scheduler.adapters.notice import notices_apply, notices_hold, notices_read
from scheduler.adapters.observe import cluster_observe
from scheduler.adapters.persist import decisions_persist
from scheduler.adapters.portal_port import (
    CycleRun,
    Node,
    eviction_reasons,
    finished_pods_kept,
    jobs_runtime_limit_end,
    node_seen_mark,
    tenant_pod_deltas_fold,
    ttl_jobs_kept,
)
from scheduler.adapters.quarantine import Faults, Isolation, bundle_without
from scheduler.adapters.revalidate import decisions_revalidate
from scheduler.adapters.snapshot import SnapshotBundle, snapshot_build
from scheduler.adapters.start_failures import gang_start_failures
from scheduler.adapters.transitions import CycleTransitions
from scheduler.core.types import CycleResult

logger = logging.getLogger(__name__)

ABANDONED = "did not finish: its worker died or lost the cycle lock"
ABANDONED_LOOKBACK = 100  # cycles
SUPERSEDED = "cycle {newer} started after this one, which stopped before its {phase}"
ERROR_CHARS = 10_000


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
    cycle = cycle_open(now())
    timings: dict[str, float] = {}
    report: reconcile.ReconcileReport | None = None
    try:
        transitions = CycleTransitions()
        isolation = Isolation(now=now)
        with _timed(timings, "snapshot_ms"):
            # 1. A real cluster's nodes into the Node rows.
            nodes_sync_fenced(backend, cycle, now)
            # 2. What the pods did since the last cycle, into placements and job statuses; the
            # jobs past their run-time limit ended.
            pods = cluster_observe_fenced(backend, cycle, now, transitions)
            # 3. One consistent read of the rows, as the core's snapshot.
            build = snapshot_builder(backend, cycle, now)
            bundle = isolation.snapshot(build)
        with _timed(timings, "core_ms"):
            # 4. The core decides: binds, evictions, pipelined tasks, reasons, shares.
            bundle, result = isolation.core(bundle, run_cycle_paused)
        with _timed(timings, "persist_ms"):
            # 5. The decisions that still hold, into the rows, in one fenced transaction.
            checkpoint()
            notes = decisions_persist_isolated(
                isolation, build, bundle, result, cycle=cycle, now=now(), transitions=transitions
            )
        with _timed(timings, "reconcile_ms"):
            # 6. The cluster made to match the placements; its refusals onto their jobs.
            checkpoint()
            report = cluster_reconcile_isolated(isolation, bundle, backend, pods, checkpoint, now)
        # 7. The tenants' pending-pod counts folded, so a job creation reads few rows.
        tenant_pod_deltas_fold()
        # 8. What went wrong on the way, on the cycle's row.
        cycle.error = cycle_error([*isolation.notes, *notes, *transitions.notes()], report)
    except CycleAbandoned as reason:
        logger.warning("scheduling cycle %s abandoned: %s", cycle.id, reason)
        cycle.error = str(reason)[:ERROR_CHARS]
    except Exception as error:
        logger.exception("scheduling cycle %s failed", cycle.id)
        cycle.error = f"{type(error).__name__}: {error}"[:ERROR_CHARS]
        raise
    finally:
        cycle_close(cycle, timings, report, now())
    return cycle


# -- the phases ----------------------------------------------------------------------------


def cycle_open(started_at: datetime) -> CycleRun:
    """The cycle's row. Holding the lock means no earlier cycle is still running, unless its
    worker died (SIGKILL, a lost machine) or lost the lock; a live one overwrites this when it
    ends. The next cycle notices within seconds, so a short look back is enough (and indexed)."""
    cycle = CycleRun.objects.create(started_at=started_at)
    CycleRun.objects.filter(
        pk__lt=cycle.pk, pk__gte=cycle.pk - ABANDONED_LOOKBACK, finished_at__isnull=True
    ).update(finished_at=cycle.started_at, error=ABANDONED)
    return cycle


def nodes_sync_fenced(
    backend: ClusterBackend, cycle: CycleRun, now: Callable[[], datetime]
) -> None:
    """Phase 1, on a backend that lists the cluster's own nodes (the simulated cluster's nodes
    are the Node rows themselves)."""
    if not backend.lists_cluster_nodes:
        return
    observed = backend.list_nodes()
    with transaction.atomic():
        _fence(cycle)
        _refuse_if_superseded(cycle, "node sync")
        nodes_sync(observed, memo=node_sync_memo(backend))
        # The sync left exactly the listed nodes in the cluster: no 5,000-name IN.
        node_seen_mark(in_cluster=True, at=now())


def cluster_observe_fenced(
    backend: ClusterBackend,
    cycle: CycleRun,
    now: Callable[[], datetime],
    transitions: CycleTransitions,
) -> list[ObservedPod]:
    """Phase 2: the managed pods as listed, after their phases went into the rows; then the
    jobs past their run-time limit ended."""
    pods = backend.list_pods()
    owners_gone = backend.owners_deleted()
    with transaction.atomic():
        _fence(cycle)
        _refuse_if_superseded(cycle, "observe")
        requeued = cluster_observe(
            pods=pods, now=now(), owners_gone=owners_gone, transitions=transitions
        )
    if requeued:
        backend.record_events(requeued)
    with transaction.atomic():
        _fence(cycle)
        # Jobs past their run-time limit end before the snapshot, so their resources go to
        # others this cycle.
        jobs_runtime_limit_end(now=now())
    return pods


def snapshot_builder(
    backend: ClusterBackend, cycle: CycleRun, now: Callable[[], datetime]
) -> Callable[..., SnapshotBundle]:
    """Phase 3's read (run again after a culprit is found): snapshot_build, without the jobs
    whose namespace does not exist, which wait saying so instead of being placed."""
    held = namespaces_hold(backend, now=now(), fence=lambda: _fence(cycle))
    if not held:
        return snapshot_build

    def build(*, now: datetime) -> SnapshotBundle:
        return bundle_without(snapshot_build(now=now), held)

    return build


def decisions_persist_isolated(
    isolation: Isolation,
    build: Callable[..., SnapshotBundle],
    bundle: SnapshotBundle,
    result: CycleResult,
    *,
    cycle: CycleRun,
    now: datetime,
    transitions: CycleTransitions,
) -> list[str]:
    """Phase 5; a job whose rows break it is quarantined, and the core decides again without
    it (no decision made for its sake is written)."""
    return isolation.persist(
        bundle,
        result,
        lambda b, r: decisions_persist_fenced(
            bundle=b, result=r, cycle=cycle, now=now, transitions=transitions
        ),
        lambda: isolation.core(isolation.snapshot(build), run_cycle_paused),
    )


def decisions_persist_fenced(
    *,
    bundle: SnapshotBundle,
    result: CycleResult,
    cycle: CycleRun,
    now: datetime,
    transitions: CycleTransitions | None = None,
) -> list[str]:
    """Persist what still holds of `result`, in one fenced transaction. Returns notes on
    withdrawn decisions that point at a concurrency anomaly (recorded on the CycleRun)."""
    with transaction.atomic():
        _fence(cycle)
        result, notes = decisions_revalidate(bundle=bundle, result=result)
        decisions_persist(
            bundle=bundle, result=result, cycle=cycle, now=now, transitions=transitions
        )
    return notes


def cluster_reconcile_isolated(
    isolation: Isolation,
    bundle: SnapshotBundle,
    backend: ClusterBackend,
    pods: list[ObservedPod],
    checkpoint: Callable[[], None],
    now: Callable[[], datetime],
) -> reconcile.ReconcileReport:
    """Phase 6, refusing every call to the cluster once the lease is lost; a job whose pods
    cannot be built is quarantined, and a job whose pods the cluster refused fails or waits."""
    faults = Faults()
    checked = _LeaseChecked(backend, checkpoint)
    report = cluster_reconcile(backend=checked, observed=pods, faults=faults, now=now())
    isolation.quarantine(bundle, faults)
    events = gang_start_failures(
        job_errors=report.job_errors, now=now(), pods=report.job_error_pods
    )
    if events:
        checked.record_events(events)
    return report


def cluster_reconcile(
    *,
    backend: ClusterBackend,
    observed: list[ObservedPod] | None = None,
    faults: Faults | None = None,
    now: datetime | None = None,
) -> reconcile.ReconcileReport:
    """Make the cluster match the bound and running placements; finished pods and ended jobs'
    objects go once their retention is over (portal.ops.retention), released pods under a
    preemption notice at their deadline (scheduler.adapters.notice). With `faults`, jobs whose
    pods cannot be built are reported there and left out (see desired_pods)."""
    now = now or timezone.now()
    if observed is None:
        observed = backend.list_pods()
    gpu_resource_of = dict(Node.objects.values_list("name", "gpu_resource_name"))
    desired = desired_pods(gpu_resource_of=gpu_resource_of, faults=faults)
    plan = reconcile.plan(
        desired, observed, delete_finished=True, keep_finished=finished_pods_kept(now=now)
    )
    # Released pods under a preemption notice stay until their deadline (notice).
    grace = settings.EVICTION_GRACE_SECONDS
    notices = notices_read()
    plan, held = notices_hold(plan, notices, now, grace)
    evicting = [*(pod for pod in plan.delete if not pod.finished), *(pod for pod, _ in held.due)]
    evicted = eviction_reasons(pods=evicting)
    report = reconcile.apply(plan, backend, grace_seconds=grace, evictions=evicted)
    if notices:
        notices_apply(
            backend, report, observed=observed, notices=notices, held=held, evictions=evicted
        )
    if backend.makes_job_objects:
        job_objects_sweep(backend, desired, observed, report, now)
    unreachable = set(
        Node.objects.filter(Q(ready=False) | Q(in_cluster=False)).values_list("name", flat=True)
    )
    if stuck := reconcile.stuck_terminating(observed, unreachable, now):
        reconcile.force_delete(stuck, backend, report)
    if report.events:
        backend.record_events(report.events)
    return report


def job_objects_sweep(
    backend: ClusterBackend,
    desired: list[DesiredPod],
    observed: list[ObservedPod],
    report: reconcile.ReconcileReport,
    now: datetime,
) -> None:
    """Delete the job objects no pod needs and no retention keeps; make again those of
    desired pods that someone deleted (a Service or host-name ConfigMap its pods resolve)."""
    kept = job_objects_kept(desired, observed, set(report.deleted), ttl_jobs_kept(now=now))
    wanted = [(pod.owner_object, obj) for pod in desired for obj in pod.job_objects]
    try:
        report.deleted.extend(backend.sweep_job_objects(kept, wanted))
    except ClusterError as error:
        report.errors.append(f"job objects: {error}")


def cycle_error(notes: list[str], report: reconcile.ReconcileReport) -> str:
    """Phase 7: the cycle's notes and the cluster's errors, '' when all went well."""
    return "; ".join([*notes, *report.errors])[:ERROR_CHARS]


def cycle_close(
    cycle: CycleRun,
    timings: dict[str, float],
    report: reconcile.ReconcileReport | None,
    finished_at: datetime,
) -> None:
    for field, value in timings.items():
        setattr(cycle, field, value)
    cycle.finished_at = finished_at
    cycle.save()
    cycle_observed(cycle=cycle, report=report)


# -- the fence and the lease ---------------------------------------------------------------


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


@contextmanager
def _timed(timings: dict[str, float], field: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[field] = (time.perf_counter() - start) * 1000
