"""Feed what the cluster reports back into placements and job statuses.

Runs at the start of every cycle, before the snapshot, so the core sees the cluster as it is:
pods that started, finished, failed or vanished, and evicted pods that are finally gone.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from portal.cluster.models import Node, Placement
from portal.jobs.models import Job
from scheduler.adapters.bulk import ids_update
from scheduler.adapters.cluster.base import ObservedPod
from scheduler.adapters.ledger import placement_end

P = Placement.State
S = Job.Status
POD_LOST = "pod {pod} disappeared from node {node}; the job was requeued"
NODE_GONE = "node {node} left the cluster with pod {pod}; the job was requeued"
POD_FAILED = "pod {pod} failed ({reason}); the job failed"
POD_REJECTED = "node {node} refused pod {pod} ({reason}); the job was requeued"
POD_START_TIMEOUT = (
    "pod {pod} did not start within {seconds} s on node {node}{last}; the job was requeued"
)
POD_CANNOT_START = "pod {pod} cannot start on node {node}: {reason}{message}"
# Waiting reasons that need someone to act (a wrong image name, a missing secret): they are
# the job's reason at once, not only after the start timeout.
START_BLOCKED = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
PLACEMENT_COLUMNS = ("id", "job_id", "pod_name", "node_name", "state", "started_at")
JOB_FIELDS = ("status", "started_at", "finished_at", "pending_reason", "pending_reason_at")
JOB_COLUMNS = ("id", "min_available", *JOB_FIELDS)


def cluster_observe(
    *, pods: list[ObservedPod], now: datetime, start_timeout_seconds: int | None = None
) -> None:
    """Apply observed pod phases to the active placements: one query to read, then one UPDATE
    per distinct change (a cycle's changes share a few values: "running", "succeeded", now).

    A pod that cannot start says so on its job at once (START_BLOCKED); a bound pod still not
    started after `start_timeout_seconds` (settings.KUBERNETES_POD_START_TIMEOUT_SECONDS), or
    one the kubelet refused at admission (OutOf<resource>: the node was fuller than the
    snapshot said), gives its placement back and the job is requeued."""
    if start_timeout_seconds is None:
        start_timeout_seconds = settings.KUBERNETES_POD_START_TIMEOUT_SECONDS
    start_deadline = now - timedelta(seconds=start_timeout_seconds)
    by_name = {pod.name: pod for pod in pods}
    with transaction.atomic():
        # A node deleted from the cluster takes its pods with it: whatever the API still
        # says about them, they will not run, and a bound one must not be created there.
        gone = set(Node.objects.filter(in_cluster=False).values_list("name", flat=True))
        # Locked, jobs included: a cancel committed between this read and the writes below
        # would otherwise be overwritten by the status computed from the stale row.
        placements = list(
            Placement.objects.filter(state__in=Placement.ACTIVE_STATES)
            .select_related("job")
            .select_for_update(of=("self", "job"))
            .only(*PLACEMENT_COLUMNS, *(f"job__{column}" for column in JOB_COLUMNS))
            .order_by("id")
        )
        moved: dict[str, list[int]] = defaultdict(list)
        lost: dict[int, str] = {}  # job id -> why its pod is lost
        failed: dict[int, tuple[Placement, ObservedPod]] = {}
        blocked: dict[int, str] = {}  # job id -> why a pod of it cannot start
        for placement in placements:
            pod = by_name.get(placement.pod_name)
            why = None
            if not placement.job.is_terminal:
                why = _lost_why(placement, pod, gone, start_deadline, start_timeout_seconds)
            if why is not None:
                lost.setdefault(placement.job_id, why)
                moved[P.DELETED].append(placement.id)
                continue
            state = _next_state(placement, pod)
            if state == P.DELETED and placement.state == P.RUNNING:
                lost.setdefault(
                    placement.job_id,
                    POD_LOST.format(pod=placement.pod_name, node=placement.node_name),
                )
            if state == P.BOUND and pod is not None and pod.reason in START_BLOCKED:
                blocked.setdefault(placement.job_id, _cannot_start(placement, pod))
            if state == P.FAILED and pod is not None:
                failed.setdefault(placement.job_id, (placement, pod))
            if state != placement.state:
                moved[state].append(placement.id)
        ended = (
            {"ended_at": placement_end(now)} if moved.keys() & set(Placement.ENDED_STATES) else {}
        )
        for state, ids in sorted(moved.items()):
            ends = ended if state in Placement.ENDED_STATES else {}
            ids_update(Placement, ids, state=state, updated_at=now, **ends)
        jobs = {p.job_id: p.job for p in placements}
        _jobs_advance(jobs, lost, failed, now, blocked)


def _lost_why(
    placement: Placement,
    pod: ObservedPod | None,
    gone: set[str],
    start_deadline: datetime,
    timeout: int,
) -> str | None:
    """Why an active placement of a live job is lost for good, or None."""
    if placement.state not in (P.BOUND, P.RUNNING):
        return None
    pod_name, node = placement.pod_name, placement.node_name
    if node in gone:
        # A node deleted from the cluster takes its pods with it: whatever the API still
        # says about them, they will not run, and a bound one must not be created there.
        return NODE_GONE.format(pod=pod_name, node=node)
    if pod is not None and pod.phase == "Failed" and _admission_refusal(pod.reason):
        return POD_REJECTED.format(pod=pod_name, node=node, reason=pod.reason)
    not_started = pod is None or pod.phase == "Pending"
    if placement.state == P.BOUND and not_started and placement.started_at < start_deadline:
        last = f" (last: {pod.reason})" if pod is not None and pod.reason else ""
        return POD_START_TIMEOUT.format(pod=pod_name, seconds=timeout, node=node, last=last)
    return None


def _admission_refusal(reason: str | None) -> bool:
    """The kubelet's admission refusals (k8s.io/kubernetes pkg/kubelet/lifecycle: OutOf<res>
    from the resource fit check, UnexpectedAdmissionError from a device plugin): the pod never
    ran, so the job is not at fault."""
    return bool(reason) and (reason.startswith("OutOf") or reason == "UnexpectedAdmissionError")


def _cannot_start(placement: Placement, pod: ObservedPod) -> str:
    message = f": {pod.message}" if pod.message else ""
    return POD_CANNOT_START.format(
        pod=placement.pod_name, node=placement.node_name, reason=pod.reason, message=message
    )[:1000]


def _next_state(placement: Placement, pod: ObservedPod | None) -> str:
    if placement.job.is_terminal and placement.state in (P.BOUND, P.RUNNING):
        return P.RELEASING  # cancelled (or failed) job: its pods go now
    if placement.state == P.RELEASING:
        return P.DELETED if pod is None else P.RELEASING
    if pod is None:
        # Bound and not created yet is normal (reconcile creates it); running and gone is not.
        return P.DELETED if placement.state == P.RUNNING else placement.state
    if pod.phase == "Succeeded":
        return P.SUCCEEDED
    if pod.phase == "Failed":
        return P.FAILED
    if pod.phase == "Running":
        return P.RUNNING
    return placement.state


def _jobs_advance(
    jobs: dict[int, Job],
    lost: dict[int, str],
    failed: dict[int, tuple[Placement, ObservedPod]],
    now: datetime,
    blocked: dict[int, str],
) -> None:
    """Job statuses from the placements' states after this observation."""
    counts: dict[int, Counter] = defaultdict(Counter)
    for row in Placement.objects.filter(job_id__in=list(jobs)).values("job_id", "state"):
        counts[row["job_id"]][row["state"]] += 1
    release: list[int] = []
    changes: dict[tuple, list[int]] = defaultdict(list)
    for job_id in sorted(jobs):
        job = jobs[job_id]
        count = counts[job_id]
        active = count[P.BOUND] + count[P.RUNNING]
        if job.is_terminal:
            continue
        before = {field: getattr(job, field) for field in JOB_FIELDS}
        if job_id in failed:
            placement, pod = failed[job_id]
            job.status, job.finished_at = S.FAILED, now
            job.pending_reason = POD_FAILED.format(
                pod=placement.pod_name, reason=pod.reason or f"exit code {pod.exit_code}"
            )
            release.append(job_id)
        elif job_id in lost and active + count[P.SUCCEEDED] < job.min_available:
            job.status = S.PREEMPTED
            job.pending_reason = lost[job_id]
            job.pending_reason_at = now
            release.append(job_id)
        elif job.status == S.PREEMPTED and active + count[P.RELEASING] == 0:
            job.status = S.PENDING  # its pods are gone: it waits for its turn again
        elif job.status in (S.ADMITTED, S.RUNNING) and active + count[P.RELEASING] == 0:
            if count[P.SUCCEEDED] >= job.min_available:
                job.status, job.finished_at = S.SUCCEEDED, now
                job.started_at = job.started_at or now
        elif job.status == S.ADMITTED and count[P.RUNNING] >= job.min_available:
            job.status, job.started_at = S.RUNNING, now
        stuck = blocked.get(job_id) if job.status == before["status"] == S.ADMITTED else None
        if stuck is not None and job.pending_reason != stuck:
            job.pending_reason, job.pending_reason_at = stuck, now
        if job.status != before["status"] or job.pending_reason != before["pending_reason"]:
            changed = {f: getattr(job, f) for f in JOB_FIELDS if getattr(job, f) != before[f]}
            changes[tuple(sorted(changed.items()))].append(job_id)
    for changed, ids in changes.items():
        ids_update(Job, ids, **dict(changed), updated_at=now)
    if release:
        Placement.objects.filter(job_id__in=release, state__in=[P.BOUND, P.RUNNING]).update(
            state=P.RELEASING, updated_at=now
        )
