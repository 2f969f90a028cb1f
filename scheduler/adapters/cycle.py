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
* persist re-checks its decisions against the rows as they are now and withdraws those whose
  premise changed (scheduler/adapters/revalidate.py). Every cycle that gets this far persists
  what is still valid, so overlapping cycles cannot starve each other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.cluster.models import GPU_MODEL_LABEL, Node, Placement
from portal.cluster.namespaces import placement_namespace
from portal.cluster.services import node_inventory_sync, node_seen_mark
from portal.jobs.gpushare import SHARING_NONE
from portal.jobs.limits import gpu_sharing
from portal.jobs.models import Job
from portal.jobs.services import job_start_refused, jobs_runtime_limit_end
from portal.scheduling.models import CycleRun, PreemptionEvent
from scheduler.adapters import reconcile
from scheduler.adapters.cluster.base import (
    ClusterBackend,
    ClusterError,
    ObservedNode,
    ObservedPod,
    RefusedClusterError,
)
from scheduler.adapters.cluster.gpushare import registered_cards
from scheduler.adapters.cluster.labels import JOB_ID
from scheduler.adapters.cluster.owner import KIND as OWNER_KIND
from scheduler.adapters.cluster.owner import owner_name
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.collector import run_cycle_paused
from scheduler.adapters.desired import desired_pods, ended_job_objects
from scheduler.adapters.lock import CycleAbandoned, cycle_write_lock
from scheduler.adapters.namespaces import (
    job_requeue_namespace_missing,
    namespace_not_found,
    namespaces_hold,
)
from scheduler.adapters.node_memo import NodeSyncMemo, node_sync_memo
from scheduler.adapters.observability import cycle_observed
from scheduler.adapters.observe import cluster_observe
from scheduler.adapters.persist import decisions_persist
from scheduler.adapters.quarantine import Faults, Isolation, bundle_without
from scheduler.adapters.revalidate import decisions_revalidate
from scheduler.adapters.snapshot import SnapshotBundle, snapshot_build
from scheduler.adapters.transitions import CycleTransitions
from scheduler.core.types import CycleResult

logger = logging.getLogger(__name__)

GPU_MODEL_LABELS = (GPU_MODEL_LABEL, "nvidia.com/gpu.product")
TOPOLOGY_PREFIXES = ("topology.kubernetes.io/", "volcano.sh/hypernode", "network.topology/")
ABANDONED = "did not finish: its worker died or lost the cycle lock"
ABANDONED_LOOKBACK = 100  # cycles
START_REFUSED = "the cluster refused the job's pods, so none of them runs: {error}"
START_WAITING = "pods not started yet, retrying: {error}"
SUPERSEDED = "cycle {newer} started after this one, which stopped before its {phase}"


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
    report: reconcile.ReconcileReport | None = None
    try:
        with _timed(timings, "snapshot_ms"):
            if not isinstance(backend, SimulatedBackend):
                # The simulated cluster's nodes are the inventory itself; a real one reports its own.
                observed_nodes = backend.list_nodes()
                with transaction.atomic():
                    _fence(cycle)
                    _refuse_if_superseded(cycle, "node sync")
                    nodes_sync(observed_nodes, memo=node_sync_memo(backend))
                    # The sync left exactly the listed nodes in the cluster: no 5,000-name IN.
                    node_seen_mark(in_cluster=True, at=now())
            pods = backend.list_pods()
            owners_deleted = getattr(backend, "owners_deleted", None)
            owners_gone = owners_deleted() if owners_deleted is not None else {}
            transitions = CycleTransitions()
            with transaction.atomic():
                _fence(cycle)
                _refuse_if_superseded(cycle, "observe")
                requeued = cluster_observe(
                    pods=pods, now=now(), owners_gone=owners_gone, transitions=transitions
                )
            _events_record(backend, requeued)
            with transaction.atomic():
                _fence(cycle)
                # Jobs past their run-time limit end before the snapshot, so their resources
                # go to others this cycle.
                jobs_runtime_limit_end(now=now())
            # Jobs whose namespace does not exist wait, saying so, instead of being placed.
            build = _snapshot_without(
                namespaces_hold(backend, now=now(), fence=lambda: _fence(cycle))
            )
            # A job whose data breaks a phase is quarantined; the cycle goes on without it.
            isolation = Isolation(now=now)
            bundle = isolation.snapshot(build)
        with _timed(timings, "core_ms"):
            bundle, result = isolation.core(bundle, run_cycle_paused)
        with _timed(timings, "persist_ms"):
            checkpoint()
            at = now()
            notes = isolation.persist(
                bundle,
                result,
                lambda b, r: decisions_persist_fenced(
                    bundle=b, result=r, cycle=cycle, now=at, transitions=transitions
                ),
                lambda: isolation.core(isolation.snapshot(build), run_cycle_paused),
            )
        with _timed(timings, "reconcile_ms"):
            checkpoint()
            faults = Faults()
            report = cluster_reconcile(
                backend=_LeaseChecked(backend, checkpoint), observed=pods, faults=faults, now=now()
            )
            isolation.quarantine(bundle, faults)
            gang_start_failures(job_errors=report.job_errors, now=now())
            notes = [*notes, *transitions.notes()]
            if notes or not report.ok or isolation.notes:
                cycle.error = "; ".join([*isolation.notes, *notes, *report.errors])[:10_000]
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
        cycle_observed(cycle=cycle, report=report)
    return cycle


def _snapshot_without(held: set[str]) -> Callable[..., SnapshotBundle]:
    """snapshot_build, leaving out the jobs `held` (their keys)."""
    if not held:
        return snapshot_build

    def build(*, now: datetime) -> SnapshotBundle:
        return bundle_without(snapshot_build(now=now), held)

    return build


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


def cluster_reconcile(
    *,
    backend: ClusterBackend,
    observed: list[ObservedPod] | None = None,
    faults: Faults | None = None,
    now: datetime | None = None,
) -> reconcile.ReconcileReport:
    """Make the cluster match the bound and running placements. Finished pods are deleted once
    FINISHED_POD_RETENTION_SECONDS have passed since they ended (the observe step has recorded
    their outcome; until then their logs can be read, by the portal or `kubectl logs`). With `faults`, jobs whose pods cannot be
    built are reported there and left out (see desired_pods)."""
    if observed is None:
        observed = backend.list_pods()
    gpu_resource_of = dict(Node.objects.values_list("name", "gpu_resource_name"))
    desired = desired_pods(gpu_resource_of=gpu_resource_of, faults=faults)
    plan = reconcile.plan(
        desired,
        observed,
        delete_finished=True,
        keep_finished=_finished_pods_kept(now or timezone.now()),
    )
    report = reconcile.apply(
        plan,
        backend,
        grace_seconds=settings.EVICTION_GRACE_SECONDS,
        evictions=eviction_reasons(plan.delete),
    )
    _job_objects_sweep(backend, desired, report, now or timezone.now(), observed)
    unreachable = set(
        Node.objects.filter(Q(ready=False) | Q(in_cluster=False)).values_list("name", flat=True)
    )
    if stuck := reconcile.stuck_terminating(observed, unreachable, now or timezone.now()):
        reconcile.force_delete(stuck, backend, report)
    _events_record(backend, report.events)
    return report


def _events_record(backend: ClusterBackend, events: list) -> None:
    """Kubernetes Events where the backend has them (the simulated cluster has none)."""
    record_events = getattr(backend, "record_events", None)
    if events and record_events is not None:
        record_events(events)


def _job_objects_sweep(
    backend: ClusterBackend,
    desired: list,
    report: reconcile.ReconcileReport,
    now: datetime,
    observed: Sequence[ObservedPod] = (),
) -> None:
    """Delete the job objects (svc plugin) no desired pod needs, where the backend has them;
    an ended job's stay until its ttlSecondsAfterFinished runs out. A job's owner object goes
    once none of that holds and no pod of the job is left to own (finished pods are kept for
    their retention)."""
    sweep = getattr(backend, "sweep_job_objects", None)
    if sweep is None:
        return
    kept_jobs = ended_job_objects(_ttl_jobs_kept(now))
    keep = {
        (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        for objects in (*(pod.job_objects for pod in desired), *kept_jobs)
        for obj in objects
    }
    deleted = set(report.deleted)
    owning = [(pod.namespace, pod.labels.get(JOB_ID, "")) for pod in desired] + [
        (pod.namespace, pod.labels.get(JOB_ID, ""))
        for pod in observed
        if not pod.deletion_requested and f"{pod.namespace}/{pod.name}" not in deleted
    ]
    owning += [
        (obj["metadata"]["namespace"], obj["metadata"].get("labels", {}).get(JOB_ID, ""))
        for objects in kept_jobs
        for obj in objects
    ]
    keep |= {(OWNER_KIND, namespace, owner_name(job)) for namespace, job in owning if job}
    # A desired pod's objects that someone deleted are made again (a Service or host-name
    # ConfigMap its running pods resolve).
    wanted = [obj for pod in desired for obj in pod.job_objects]
    try:
        report.deleted.extend(sweep(keep, wanted))
    except ClusterError as error:
        report.errors.append(f"job objects: {error}")


def _finished_pods_kept(now: datetime) -> frozenset[tuple[str, str]]:
    """(namespace, name) of finished pods still within their retention: a job's
    ttlSecondsAfterFinished from the job's end (kept while the job runs on), else
    FINISHED_POD_RETENTION_SECONDS from the pod's own end."""
    retention = settings.FINISHED_POD_RETENTION_SECONDS
    finished = Placement.objects.filter(
        state__in=[Placement.State.SUCCEEDED, Placement.State.FAILED]
    )
    by_default = finished.filter(job__ttl_seconds_after_finished__isnull=True)
    names = (
        list(
            by_default.filter(ended_at__gte=now - timedelta(seconds=retention)).values_list(
                "namespace", "pod_name"
            )
        )
        if retention > 0
        else []
    )
    for namespace, name, status, finished_at, cancelled_at, ttl in finished.filter(
        job__ttl_seconds_after_finished__isnull=False
    ).values_list(
        "namespace",
        "pod_name",
        "job__status",
        "job__finished_at",
        "job__cancelled_at",
        "job__ttl_seconds_after_finished",
    ):
        ended = finished_at or cancelled_at
        if status not in Job.TERMINAL_STATUSES or (
            ended is not None and now < ended + timedelta(seconds=ttl)
        ):
            names.append((namespace, name))
    return frozenset((placement_namespace(namespace), name) for namespace, name in names)


def _ttl_jobs_kept(now: datetime) -> list[int]:
    """Ended jobs whose ttlSecondsAfterFinished has not run out: their svc objects stay."""
    rows = Job.objects.filter(
        ttl_seconds_after_finished__gt=0, status__in=Job.TERMINAL_STATUSES
    ).values_list("id", "finished_at", "cancelled_at", "ttl_seconds_after_finished")
    return [
        job_id
        for job_id, finished_at, cancelled_at, ttl in rows
        if (ended := finished_at or cancelled_at) is not None
        and now < ended + timedelta(seconds=ttl)
    ]


def eviction_reasons(pods: list[ObservedPod]) -> dict[str, str]:
    """pod name -> why the portal deletes it: the latest preemption of its job on its node
    (the sentence the preemption history shows), else that its job ended or was cancelled."""
    running = [pod for pod in pods if not pod.finished]
    job_ids = {int(j) for pod in running if (j := pod.labels.get(JOB_ID, "")).isdigit()}
    if not job_ids:
        return {}
    sentences: dict[tuple[int, str], str] = {}
    for job_id, node, sentence in (
        PreemptionEvent.objects.filter(victim_job_id__in=job_ids)
        .order_by("occurred_at", "id")
        .values_list("victim_job_id", "node_name", "sentence")
    ):
        sentences[(job_id, node)] = sentence
    statuses = dict(Job.objects.filter(id__in=job_ids).values_list("id", "status"))
    reasons = {}
    for pod in running:
        job_id = int(pod.labels.get(JOB_ID, "0") or 0)
        sentence = sentences.get((job_id, pod.node_name or ""))
        if sentence:
            reasons[pod.name] = sentence
        elif statuses.get(job_id) == Job.Status.CANCELLED:
            reasons[pod.name] = "its job was cancelled"
    return reasons


def gang_start_failures(*, job_errors: dict[str, Exception], now: datetime) -> None:
    """A job whose pods the API server refused for good (403, 422) fails with the server's
    words as its reason, instead of being created again every cycle; a job that only has to
    wait (the server failed, a gang pod is still terminating) keeps its placements and says
    why, so the reason is on the job, not only in the cycle record. One whose namespace does
    not exist waits for it (scheduler.adapters.namespaces)."""
    for job_id, error in sorted(job_errors.items()):
        if not job_id.isdigit():
            continue
        if namespace := namespace_not_found(error):
            job_requeue_namespace_missing(job_id=int(job_id), namespace=namespace, at=now)
        elif isinstance(error, RefusedClusterError):
            job_start_refused(job_id=int(job_id), reason=START_REFUSED.format(error=error), at=now)
        else:
            Job.objects.filter(
                pk=int(job_id), status__in=[Job.Status.ADMITTED, Job.Status.RUNNING]
            ).update(pending_reason=START_WAITING.format(error=error)[:1000], pending_reason_at=now)


def registered_gpus(node: ObservedNode, stack: str, model: str) -> dict[str, Any]:
    """The node's cards as the GPU sharing stack registered them (count, memory, UUIDs by
    index), which win over allocatable: HAMi inflates its nvidia.com/gpu to cards x split."""
    cards = registered_cards(stack, node.annotations) if stack != SHARING_NONE else None
    if not cards:
        return {"gpu_memory_mib": 0, "gpu_uuids": []}
    return {
        "gpu_count": len(cards),
        "gpu_model": model or cards[0].model,
        # One memory per node: the smallest card's, so a request never over-fills one.
        "gpu_memory_mib": min(card.memory_mib for card in cards),
        "gpu_uuids": [card.uuid for card in cards],
    }


def nodes_sync(observed: list[ObservedNode], memo: NodeSyncMemo | None = None) -> None:
    stack = gpu_sharing()
    gpu_names = set(settings.GPU_RESOURCE_NAMES)
    # A node's row follows from the node and these settings alone.
    context = (stack, frozenset(gpu_names))
    current = memo.current(observed, context) if memo else set()
    specs = []
    for node in observed:
        if node.name in current:
            continue
        gpu_name = next((n for n in sorted(node.allocatable) if n in gpu_names), None)
        model = next((node.labels[k] for k in GPU_MODEL_LABELS if k in node.labels), "")
        specs.append(
            {
                "name": node.name,
                "gpu_resource_name": gpu_name or "nvidia.com/gpu",
                "gpu_count": node.allocatable.get(gpu_name, 0) if gpu_name else 0,
                "gpu_model": model,
                **registered_gpus(node, stack, model),
                "cpu_millis": node.allocatable.get("cpu", 0),
                "memory_bytes": node.allocatable.get("memory", 0),
                "pods_capacity": node.allocatable.get("pods", 110),
                "labels": dict(node.labels),
                "topology_labels": {
                    k: v for k, v in node.labels.items() if k.startswith(TOPOLOGY_PREFIXES)
                },
                "schedulable": not node.unschedulable,
                "taints": [dict(taint) for taint in node.taints],
                "ready": node.ready,
                "used_by_others": dict(node.used_by_others),
            }
        )
    # The list is the cluster's own: a node missing from it was deleted, and its capacity
    # with it (marking it unschedulable would keep it in every queue's deserved share).
    written = node_inventory_sync(nodes=specs, absent_gone=True, current=current)
    if memo:
        memo.synced(observed, context, wrote=any(written.values()))


@contextmanager
def _timed(timings: dict[str, float], field: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[field] = (time.perf_counter() - start) * 1000
