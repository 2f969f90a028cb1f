"""Make the cluster match the placements the cycle decided: decide first (plan, pure), then act
(apply, I/O), so the decision is testable with plain lists and the I/O step stays dumb.

Rules `plan` follows, in the order they matter:

* A desired pod is created only when no observed pod has its name AND no observed pod serves
  the same (job, task, replica) under another name. So there are never two pods for one
  replica, even while an old one terminates; the create happens on a later pass, once the
  old pod is gone.
* An observed managed pod is deleted when it is not desired, or is desired on another node
  (a moved placement: delete now, recreate on a later pass once the name is free).
* Never deleted by plan: pods already being deleted (asking again changes nothing), and, by
  default, finished pods (Succeeded/Failed). Their phase and exit code are what the observe step
  feeds back into job status, so they stay until the caller has read them and passes
  `delete_finished=True`.
* Pods without the managed label are invisible to the plan, whatever the backend returned.

`apply` deletes before it creates (freed GPUs first), in the backend's batch calls
(`ClusterBackend.create_pods`/`delete_pods`/`bind_pods`), isolates failures per pod and reports them;
re-running plan + apply after a partial failure finishes the job, and re-running it on a
converged cluster does nothing.

Gangs start whole or not at all, as a secondary scheduler binds (Volcano's gang plugin waits
for minAvailable before it binds any task): pods are created unbound, and a job's pods are
bound only once at least its min_available pods exist. A create that fails leaves the job's
pods unbound (nothing starts); a bind that fails undoes the binds of that job made in the
same pass (those pods are deleted, and created again on a later pass). Either error is
reported against the job (`ReconcileReport.job_errors`), for the cycle to turn into the job's
reason, or its failure when the API server refused for good.

Before a gang's pods are created, the nodes it is to be bound to are read again
(`ClusterBackend.nodes_room`, once per node receiving pods this pass): a gang one of whose
nodes another scheduler filled since the cycle's read gets no pod this pass, and its job a
NodeTakenError (scheduler.adapters.bind_recheck).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from jobspec.labels import JOB_ID, is_managed, replica_key
from jobspec.pods import DesiredPod
from scheduler.adapters.bind_recheck import gangs_taken
from scheduler.adapters.cluster.base import (
    ClusterBackend,
    NodeTakenError,
    ObservedPod,
    PodEvent,
)

logger = logging.getLogger(__name__)

DEFAULT_GRACE_SECONDS = 30


@dataclass(frozen=True)
class ReconcilePlan:
    create: list[DesiredPod] = field(default_factory=list)
    delete: list[ObservedPod] = field(default_factory=list)
    # Desired pods that exist unbound: bound with the rest of their gang.
    bind: list[DesiredPod] = field(default_factory=list)
    # job id -> how many of its desired pods exist (bound or not, not being deleted).
    present: dict[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.create and not self.delete and not self.bind


@dataclass(frozen=True)
class ReconcileReport:
    created: list[str] = field(default_factory=list)  # "namespace/name"
    deleted: list[str] = field(default_factory=list)
    bound: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # job id -> the first error that kept its gang from starting this pass, and its pod's
    # (name, namespace).
    job_errors: dict[str, Exception] = field(default_factory=dict)
    job_error_pods: dict[str, tuple[str, str]] = field(default_factory=dict)
    # What to record on the pods as Kubernetes Events (ClusterBackend.record_events).
    events: list[PodEvent] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def plan(
    desired: Iterable[DesiredPod],
    observed: Iterable[ObservedPod],
    *,
    delete_finished: bool = False,
    keep_finished: frozenset[tuple[str, str]] = frozenset(),
) -> ReconcilePlan:
    """Pure and deterministic: same inputs, same plan, both lists sorted by (namespace, name).

    Raises ValueError if `desired` names one pod or one replica twice: that is a bug upstream,
    and guessing which copy to keep could bind a replica to the wrong node.

    `keep_finished`: (namespace, name) of finished pods kept for their logs. A finished pod
    runs nothing, so it never keeps a new attempt of its replica from being created.
    """
    wanted = _index_desired(desired)
    managed = [pod for pod in observed if is_managed(pod.labels)]
    observed_names = {(pod.namespace, pod.name) for pod in managed}
    observed_replicas = {
        key for pod in managed if not pod.finished and (key := replica_key(pod.labels)) is not None
    }

    create = [
        pod
        for key, pod in wanted.items()
        if key not in observed_names and replica_key(pod.labels) not in observed_replicas
    ]
    delete = [
        pod
        for pod in managed
        if not _still_wanted(pod, wanted)
        and _deletable(pod, delete_finished=delete_finished)
        and not (pod.finished and _pod_key(pod) in keep_finished)
    ]
    bind: list[DesiredPod] = []
    present: dict[str, int] = defaultdict(int)
    for pod in managed:
        target = wanted.get(_pod_key(pod))
        if target is None or pod.deletion_requested or not _still_wanted(pod, wanted):
            continue
        present[_job_of(target)] += 1
        if pod.node_name is None:
            bind.append(target)
    return ReconcilePlan(
        create=sorted(create, key=_pod_key),
        delete=sorted(delete, key=_pod_key),
        bind=sorted(bind, key=_pod_key),
        present=dict(present),
    )


def apply(
    reconcile_plan: ReconcilePlan,
    backend: ClusterBackend,
    grace_seconds: int = DEFAULT_GRACE_SECONDS,
    *,
    evictions: Mapping[str, str] | None = None,
) -> ReconcileReport:
    """`evictions`: pod name -> why it is evicted, recorded as a Preempted event on each such
    pod the pass deletes."""
    report = ReconcileReport()
    deletes, creates = reconcile_plan.delete, reconcile_plan.create
    # Batch calls (a few queries in all on the simulated cluster); a backend without them is
    # called once per pod. Either way each pod has its own outcome.
    refs = [(pod.name, pod.namespace) for pod in deletes]
    outcomes = _outcomes(lambda: backend.delete_pods(refs, grace_seconds), len(deletes))
    for pod, error in zip(deletes, outcomes, strict=True):
        _record(report.deleted, report.errors, "delete", pod, error)
        why = (evictions or {}).get(pod.name)
        if error is None and why and not pod.finished:
            report.events.append(PodEvent(pod.name, pod.namespace, "Preempted", why, "Warning"))
    # The gangs to be bound this pass, rechecked against the nodes as they are now: one whose
    # node was taken since the cycle's read gets no pod at all (never half a gang).
    taken = _gangs_recheck(reconcile_plan, backend)
    for job, error in sorted(taken.items()):
        logger.warning("reconcile: no pod of job %s's gang made: %s", job, error)
        report.job_errors[job] = error
        report.job_error_pods[job] = (error.pod, error.namespace)
    creates = [pod for pod in creates if _job_of(pod) not in taken]
    outcomes = _outcomes(lambda: backend.create_pods(creates), len(creates))
    exists = defaultdict(int, reconcile_plan.present)
    unbound: dict[str, list[DesiredPod]] = defaultdict(list)
    for existing in reconcile_plan.bind:
        if _job_of(existing) not in taken:
            unbound[_job_of(existing)].append(existing)
    for pod, error in zip(creates, outcomes, strict=True):
        _record(report.created, report.errors, "create", pod, error)
        job = _job_of(pod)
        if error is None:
            exists[job] += 1
            unbound[job].append(pod)
        else:
            report.job_errors.setdefault(job, error)
            report.job_error_pods.setdefault(job, (pod.name, pod.namespace))
    ready = [
        pod
        for job in sorted(unbound)
        # Never start part of a gang: bind only once its min_available pods all exist.
        if job not in report.job_errors
        and exists[job] >= max(pod.min_available for pod in unbound[job])
        for pod in unbound[job]
    ]
    _gangs_bind(ready, backend, report, grace_seconds)
    return report


def _gangs_recheck(
    reconcile_plan: ReconcilePlan, backend: ClusterBackend
) -> dict[str, NodeTakenError]:
    """job id -> NodeTakenError for each gang this pass would bind whose nodes no longer have
    room for it (bind_recheck), read once per node that receives pods. A gang still short of
    its min_available pods is not bound this pass, so it is not looked at. A failed read
    leaves the pass as it was: the kubelet still refuses what does not fit."""
    gangs: dict[str, list[DesiredPod]] = defaultdict(list)
    exists = defaultdict(int, reconcile_plan.present)
    for pod in reconcile_plan.create:
        gangs[_job_of(pod)].append(pod)
        exists[_job_of(pod)] += 1
    for pod in reconcile_plan.bind:
        gangs[_job_of(pod)].append(pod)
    binding = {
        job: pods
        for job, pods in gangs.items()
        if exists[job] >= max(pod.min_available for pod in pods)
    }
    nodes = sorted({pod.node_name for pods in binding.values() for pod in pods})
    if not nodes:
        return {}
    try:
        # A gang's own pods are not in its way: a cycle overlapping this one may have made
        # (and bound) them since this pass's list, and they hold only what the gang needs.
        ignore = sorted({(pod.namespace, pod.name) for pods in binding.values() for pod in pods})
        rooms = backend.nodes_room(nodes, ignore)
    # Deliberately broad, as _outcomes: the recheck must never stop the pass.
    except Exception as error:
        logger.warning("reconcile: nodes not rechecked before the bind: %s", error)
        return {}
    return gangs_taken(binding, rooms)


def _gangs_bind(
    pods: list[DesiredPod], backend: ClusterBackend, report: ReconcileReport, grace_seconds: int
) -> None:
    """Bind `pods` (whole gangs) in one batch; a gang with a failed bind is taken back."""
    refs = [(pod.name, pod.namespace, pod.node_name) for pod in pods]
    outcomes = _outcomes(lambda: backend.bind_pods(refs), len(pods))
    for pod, error in zip(pods, outcomes, strict=True):
        _record(report.bound, report.errors, "bind", pod, error)
        if error is not None:
            report.job_errors.setdefault(_job_of(pod), error)
            report.job_error_pods.setdefault(_job_of(pod), (pod.name, pod.namespace))
            report.events.append(
                PodEvent(pod.name, pod.namespace, "FailedBinding", str(error), "Warning")
            )
    # Part of a gang is bound and would start: take it back. The next pass creates these pods
    # again (once gone) and binds the whole gang, or the job fails if it was refused for good.
    undo = [
        pod
        for pod, error in zip(pods, outcomes, strict=True)
        if error is None and _job_of(pod) in report.job_errors
    ]
    report.events.extend(
        PodEvent(
            pod.name,
            pod.namespace,
            "Scheduled",
            f"Successfully assigned {pod.namespace}/{pod.name} to {pod.node_name} "
            f"with its gang of {pod.min_available}",
        )
        for pod, error in zip(pods, outcomes, strict=True)
        if error is None and _job_of(pod) not in report.job_errors
    )
    if not undo:
        return
    refs_undo = [(pod.name, pod.namespace) for pod in undo]
    outcomes = _outcomes(lambda: backend.delete_pods(refs_undo, grace_seconds), len(undo))
    for pod, error in zip(undo, outcomes, strict=True):
        report.bound.remove(f"{pod.namespace}/{pod.name}")
        _record(report.deleted, report.errors, "undo the bind of", pod, error)


def _job_of(pod: DesiredPod) -> str:
    return pod.labels.get(JOB_ID, "")


def stuck_terminating(
    observed: Iterable[ObservedPod], unreachable: set[str], now: datetime
) -> list[ObservedPod]:
    """The portal's pods still Terminating past their grace period on a node whose kubelet
    cannot confirm the deletion (NotReady, or gone): only a deletion with grace 0 removes
    them, and until then they hold their job (and, in the snapshot, its GPUs). This is what
    the node lifecycle controller leaves to an operator (`kubectl delete --force`); the
    portal does it for its own pods only."""
    return sorted(
        (
            pod
            for pod in observed
            if is_managed(pod.labels)
            and pod.deletion_requested
            and pod.node_name in unreachable
            and pod.deletion_deadline is not None
            and pod.deletion_deadline <= now
        ),
        key=_pod_key,
    )


def force_delete(pods: list[ObservedPod], backend: ClusterBackend, report: ReconcileReport) -> None:
    refs = [(pod.name, pod.namespace) for pod in pods]
    outcomes = _outcomes(lambda: backend.delete_pods(refs, 0), len(pods))
    for pod, error in zip(pods, outcomes, strict=True):
        _record(report.deleted, report.errors, "force-delete", pod, error)


def _outcomes(call: Callable[[], list[Exception | None]], count: int) -> list[Exception | None]:
    if not count:
        return []
    try:
        outcomes = call()
    # Deliberately broad: a batch that breaks as a whole is reported against each of its pods
    # (and retried by the next pass) instead of stopping the cycle.
    except Exception as exc:
        return [exc] * count
    if len(outcomes) != count:
        return [RuntimeError(f"backend answered {len(outcomes)} outcomes for {count} pods")] * count
    return outcomes


def _record(
    done: list[str],
    errors: list[str],
    verb: str,
    pod: DesiredPod | ObservedPod,
    error: Exception | None,
) -> None:
    ref = f"{pod.namespace}/{pod.name}"
    if error is None:
        done.append(ref)
        return
    logger.warning("reconcile: %s %s failed: %s", verb, ref, error)
    errors.append(f"{verb} {ref}: {error}")


def _index_desired(desired: Iterable[DesiredPod]) -> dict[tuple[str, str], DesiredPod]:
    by_name: dict[tuple[str, str], DesiredPod] = {}
    replicas: dict[tuple[str, str, str], str] = {}
    for pod in desired:
        key = _pod_key(pod)
        if key in by_name:
            raise ValueError(f"pod {key[0]}/{key[1]} is desired twice")
        replica = replica_key(pod.labels)
        if replica is not None:
            if replica in replicas:
                raise ValueError(
                    f"replica {replica} is desired as both {replicas[replica]} and {pod.name}"
                )
            replicas[replica] = pod.name
        by_name[key] = pod
    return by_name


def _still_wanted(pod: ObservedPod, wanted: dict[tuple[str, str], DesiredPod]) -> bool:
    target = wanted.get(_pod_key(pod))
    return (
        target is not None
        and replica_key(target.labels) == replica_key(pod.labels)
        # An unbound observed pod (no node yet) cannot be "on the wrong node".
        and (pod.node_name is None or pod.node_name == target.node_name)
    )


def _deletable(pod: ObservedPod, *, delete_finished: bool) -> bool:
    if pod.deletion_requested:
        return False
    return delete_finished or not pod.finished


def _pod_key(pod: DesiredPod | ObservedPod) -> tuple[str, str]:
    return (pod.namespace, pod.name)
