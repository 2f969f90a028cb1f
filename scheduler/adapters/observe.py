"""Feed what the cluster reports back into placements and job statuses.

Runs at the start of every cycle, before the snapshot, so the core sees the cluster as it is:
pods that started, finished, failed or vanished, and evicted pods that are finally gone.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from jobspec.policies import (
    COMPLETE_JOB,
    OUT_OF_SYNC,
    POD_EVICTED,
    POD_FAILED,
    RESTART_POD,
    RESTARTS,
    RETRIED,
    TASK_COMPLETED,
    PolicyMatch,
    policy_match,
)
from scheduler.adapters.bulk import ids_update
from scheduler.adapters.cluster.base import ObservedPod, PodEvent
from scheduler.adapters.cycle_metrics import start_failures_counted
from scheduler.adapters.ledger import placement_end
from scheduler.adapters.notice import notice_ends_record
from scheduler.adapters.portal_port import (
    Attempt,
    BackoffSettings,
    Delay,
    Event,
    Job,
    JobTask,
    Kind,
    Node,
    Placement,
    allows,
    attempts_of,
    attempts_with,
    capped,
    delay_added,
    delays_due,
    delays_read,
    due,
    due_at,
    failed_reason,
    run_of,
    start_backoff,
    waiting_kind,
    waiting_reason,
)
from scheduler.adapters.transitions import CycleTransitions

POD_LOST = "pod {pod} disappeared from node {node}; the job was requeued"
NODE_GONE = "node {node} left the cluster with pod {pod}; the job was requeued"
POD_FAILED_REASON = "pod {pod} failed ({reason}); the job failed"
POD_REJECTED = "node {node} refused pod {pod} ({reason}); the job was requeued"
POD_START_TIMEOUT = (
    "pod {pod} did not start within {seconds} s on node {node}{last}; the job was requeued"
)
POD_CANNOT_START = "pod {pod} cannot start on node {node}: {reason}{message}"
POLICY_RESTART = (
    "pod {pod} {what} ({why}); policy {event} -> {action}: the job restarts "
    "(retry {retry} of {max_retry})"
)
POLICY_RETRIES_SPENT = (
    "pod {pod} {what} ({why}); policy {event} -> {action}, but the job has been restarted "
    "{max_retry} times (maxRetry): the job failed"
)
POLICY_ENDED = "pod {pod} {what} ({why}); policy {event} -> {action}: the job {ended}"
POLICY_POD_REPLACED = (
    "pod {pod} {what} ({why}); policy {event} -> RestartPod: the pod is placed again "
    "(retry {retry} of {max_retry})"
)
POLICY_DELAYED = (
    "{subject} {what}{why}; policy {event} -> {action} in {seconds} s (at {due:%Y-%m-%d "
    "%H:%M:%S} UTC) unless the job ends or restarts first"
)
REASON_CHARS = 1000
TASK_COMPLETED_ENDED = "task {task} completed; policy TaskCompleted -> {action}: the job {ended}"
PLACEMENT_COLUMNS = (
    "id", "job_id", "task_id", "pod_name", "node_name", "state", "started_at",
    "notice_deadline", "notice_end",
)  # fmt: skip
JOB_FIELDS = (
    "status",
    "started_at",
    "finished_at",
    "pending_reason",
    "pending_reason_at",
    "retry_count",
    "retries",
    "policy_delays",
    "policy_due_at",
    "start_attempts",
)
JOB_COLUMNS = ("id", "min_available", "policies", "max_retry", "admitted_at", *JOB_FIELDS)
# Fields holding lists, which cannot key a group of identical changes: written job by job.
_LIST_FIELDS = ("retries", "policy_delays", "start_attempts")
_PLACED = (Job.Status.ADMITTED, Job.Status.RUNNING)


def cluster_observe(
    *,
    pods: list[ObservedPod],
    now: datetime,
    start_timeout_seconds: int | None = None,
    owners_gone: Mapping[str, str] | None = None,
    transitions: CycleTransitions | None = None,
) -> list[PodEvent]:
    """Apply observed pod phases to the active placements: one query to read, then one UPDATE
    per distinct change (a cycle's changes share a few values: "running", "succeeded", now).

    A pod that cannot start (an image it cannot pull, a container it cannot create, in any of
    its containers: portal.jobs.backoff.waiting_kind) says so on its job at once, and gives
    its placement back once it has waited START_BLOCKED_GRACE_SECONDS; a bound pod still not
    started after `start_timeout_seconds` (settings.KUBERNETES_POD_START_TIMEOUT_SECONDS), or
    one the kubelet refused at admission (OutOf<resource>: the node was fuller than the
    snapshot said), gives its placement back too. Each is a start attempt of its job
    (Job.start_attempts): the job is requeued to wait its backoff, or fails once the failures
    of that kind reach its cap (portal.jobs.backoff).

    `owners_gone` (job id -> why): jobs whose owner object someone deleted, and with it their
    pods (the garbage collector's work, however far it has got): each active one is requeued
    like a job whose pods vanished, rather than failed, because nothing the job did is at fault.

    Job statuses change through `transitions` (portal.jobs.lifecycle); a change it refuses is
    skipped and counted there.

    Returns a Requeued event for each such pod of a job that was requeued (not ended by a
    policy), for the caller to record once this transaction has committed."""
    if start_timeout_seconds is None:
        start_timeout_seconds = settings.KUBERNETES_POD_START_TIMEOUT_SECONDS
    start_deadline = now - timedelta(seconds=start_timeout_seconds)
    deadlines = _Deadlines(
        start=start_deadline,
        timeout=start_timeout_seconds,
        blocked=now - timedelta(seconds=settings.START_BLOCKED_GRACE_SECONDS),
        now=now,
    )
    owner_gone = owners_gone or {}
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
        # (exit code, reason) -> placements whose pods were seen ending so: kept after the pods
        # are deleted, for the job page and the API.
        outcomes: dict[tuple[int | None, str], list[int]] = defaultdict(list)
        lost: dict[int, str] = {}  # job id -> why its pod is lost
        attempts: dict[int, Attempt] = {}  # job id -> the failed start behind its loss
        failed: dict[int, tuple[Placement, ObservedPod]] = {}
        blocked: dict[int, str] = {}  # job id -> why a pod of it cannot start
        released: dict[int, list[tuple[ObservedPod, str]]] = defaultdict(list)  # pod health
        for placement in placements:
            pod = by_name.get(placement.pod_name)
            why = None
            owner_why = owner_gone.get(str(placement.job_id))
            if placement.job.is_terminal:
                pass
            elif owner_why and placement.state in (Placement.State.BOUND, Placement.State.RUNNING):
                why = owner_why
            else:
                why, attempt = _lost_why(placement, pod, gone, deadlines)
                if why is not None and pod is not None and placement.node_name not in gone:
                    released[placement.job_id].append((pod, why))
                if attempt is not None and placement.job_id not in lost:
                    attempts[placement.job_id] = attempt
            if why is not None:
                lost.setdefault(placement.job_id, why)
                # A pod still on a live node holds its resources until it is gone (the
                # reconcile deletes it, with its grace): releasing, not deleted, so the next
                # snapshot does not hand them to another pod the kubelet would refuse.
                holds = pod is not None and placement.node_name not in gone
                moved[Placement.State.RELEASING if holds else Placement.State.DELETED].append(
                    placement.id
                )
                continue
            state = _next_state(placement, pod)
            if state == Placement.State.DELETED and placement.state == Placement.State.RUNNING:
                lost.setdefault(
                    placement.job_id,
                    POD_LOST.format(pod=placement.pod_name, node=placement.node_name),
                )
            if state == Placement.State.BOUND and pod is not None and waiting_kind(pod.reason):
                blocked.setdefault(placement.job_id, _cannot_start(placement, pod))
            if state == Placement.State.FAILED and pod is not None:
                failed.setdefault(placement.job_id, (placement, pod))
            if state != placement.state:
                moved[state].append(placement.id)
                if state in (Placement.State.SUCCEEDED, Placement.State.FAILED) and pod is not None:
                    outcomes[(pod.exit_code, (pod.reason or "")[:128])].append(placement.id)
        ended = (
            {"ended_at": placement_end(now)} if moved.keys() & set(Placement.ENDED_STATES) else {}
        )
        for state, ids in sorted(moved.items()):
            ends = ended if state in Placement.ENDED_STATES else {}
            ids_update(Placement, ids, state=state, updated_at=now, **ends)
        for (exit_code, reason), ids in sorted(outcomes.items(), key=lambda item: item[1]):
            ids_update(Placement, ids, exit_code=exit_code, exit_reason=reason)
        notice_ends_record(placements, by_name, now)
        jobs = {p.job_id: p.job for p in placements}
        jobs = {job.pk: job for job in _policy_due(now)} | jobs  # the placements' rows first
        lost_jobs = _Lost(lost, attempts, start_backoff())
        _jobs_advance(jobs, lost_jobs, failed, now, blocked, transitions or CycleTransitions())
    start_failures_counted(attempt.kind for attempt in attempts.values())
    return _requeued_events(released, jobs, attempts)


def _policy_due(now: datetime) -> list[Job]:
    """Jobs whose delayed policy action is due, pods on a node or not (a few at most)."""
    return list(
        Job.objects.filter(policy_due_at__lte=now)
        .select_for_update()
        .only(*JOB_COLUMNS)
        .order_by("id")
    )


def _requeued_events(
    released: dict[int, list[tuple[ObservedPod, str]]],
    jobs: dict[int, Job],
    attempts: dict[int, Attempt],
) -> list[PodEvent]:
    """A warning on each pod that pod health released (start timeout, admission refusal, an
    image it cannot pull): `kubectl describe pod` then says why the portal deletes a pod that
    is still Pending or was refused. BackOff with the job's reason (when it is tried again)
    for a failed start, Failed when that start ended the job, Requeued otherwise."""
    events = []
    for job_id in sorted(released):
        job = jobs[job_id]
        if job.status not in (Job.Status.PREEMPTED, Job.Status.FAILED):
            continue
        backs_off = job_id in attempts
        if job.status == Job.Status.FAILED and not backs_off:
            continue
        kind = "Requeued" if not backs_off else "BackOff"
        kind = "Failed" if job.status == Job.Status.FAILED else kind
        for pod, why in released[job_id]:
            message = job.pending_reason if backs_off else why
            events.append(PodEvent(pod.name, pod.namespace, kind, message, "Warning"))
    return events


@dataclass(frozen=True, slots=True)
class _Deadlines:
    start: datetime  # a bound pod placed before this and still not running is lost
    timeout: int  # the start timeout, in seconds, for its reason
    blocked: datetime  # a pod that cannot start, placed before this, is lost
    now: datetime


@dataclass(frozen=True, slots=True)
class _Lost:
    """Why each job lost a pod for good, and the failed start behind it, if one is."""

    why: dict[int, str]
    attempts: dict[int, Attempt]
    backoff: BackoffSettings


def _lost_why(
    placement: Placement, pod: ObservedPod | None, gone: set[str], deadlines: _Deadlines
) -> tuple[str | None, Attempt | None]:
    """Why an active placement of a live job is lost for good (None: it is not), and the
    failed start attempt it is, if it is one."""
    if placement.state not in (Placement.State.BOUND, Placement.State.RUNNING):
        return None, None
    pod_name, node = placement.pod_name, placement.node_name
    if node in gone:
        # A node deleted from the cluster takes its pods with it: whatever the API still
        # says about them, they will not run, and a bound one must not be created there.
        return NODE_GONE.format(pod=pod_name, node=node), None
    at = deadlines.now
    if pod is not None and pod.phase == "Failed" and _admission_refusal(pod.reason):
        words = _words(pod)
        attempt = Attempt(at, Kind.KUBELET_REFUSED, node=node, pod=pod_name, words=words)
        return POD_REJECTED.format(pod=pod_name, node=node, reason=pod.reason), attempt
    if placement.state != Placement.State.BOUND or not (pod is None or pod.phase == "Pending"):
        return None, None
    kind = waiting_kind(pod.reason) if pod is not None else None
    if pod is not None and kind is not None and placement.started_at < deadlines.blocked:
        attempt = Attempt(at, kind, node=node, pod=pod_name, words=_words(pod))
        return _cannot_start(placement, pod), attempt
    if placement.started_at < deadlines.start:
        last = f" (last: {pod.reason})" if pod is not None and pod.reason else ""
        why = POD_START_TIMEOUT.format(
            pod=pod_name, seconds=deadlines.timeout, node=node, last=last
        )
        words = _words(pod) if pod is not None and pod.reason else ""
        started = f"not running after {deadlines.timeout} s" + (f" ({words})" if words else "")
        return why, Attempt(at, Kind.START_TIMEOUT, node=node, pod=pod_name, words=started)
    return None, None


def _words(pod: ObservedPod) -> str:
    """The kubelet's reason and message, as it said them."""
    return f"{pod.reason}: {pod.message}" if pod.message else (pod.reason or "")


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
    if placement.job.is_terminal and placement.state in (
        Placement.State.BOUND,
        Placement.State.RUNNING,
    ):
        return Placement.State.RELEASING  # cancelled (or failed) job: its pods go now
    if placement.state == Placement.State.RELEASING:
        return Placement.State.DELETED if pod is None else Placement.State.RELEASING
    if pod is None:
        # Bound and not created yet is normal (reconcile creates it); running and gone is not.
        return (
            Placement.State.DELETED
            if placement.state == Placement.State.RUNNING
            else placement.state
        )
    if pod.phase == "Succeeded":
        return Placement.State.SUCCEEDED
    if pod.phase == "Failed":
        return Placement.State.FAILED
    if pod.phase == "Running":
        return Placement.State.RUNNING
    return placement.state


def _jobs_advance(
    jobs: dict[int, Job],
    lost: _Lost,
    failed: dict[int, tuple[Placement, ObservedPod]],
    now: datetime,
    blocked: dict[int, str],
    transitions: CycleTransitions,
) -> None:
    """Job statuses from the placements' states after this observation."""
    counts: dict[int, Counter] = defaultdict(Counter)
    for row in Placement.objects.filter(job_id__in=list(jobs)).values("job_id", "state"):
        counts[row["job_id"]][row["state"]] += 1
    release: list[int] = []
    changes: dict[tuple, list[int]] = defaultdict(list)
    policies = _Policies(jobs, failed)
    for job_id in sorted(jobs):
        job = jobs[job_id]
        count = counts[job_id]
        before = {field: getattr(job, field) for field in JOB_FIELDS}
        if job.is_terminal:
            if job.policy_delays:  # ended before its delayed actions' time: they are dropped
                job.policy_delays, job.policy_due_at = [], None
                _change_note(job, before, changes, now)
            continue
        if _job_advance(job, count, lost, failed.get(job_id), policies, now, transitions):
            release.append(job_id)
        stuck = (
            blocked.get(job_id) if job.status == before["status"] == Job.Status.ADMITTED else None
        )
        if stuck is not None and job.pending_reason != stuck:
            job.pending_reason, job.pending_reason_at = stuck, now
        if any(getattr(job, field) != before[field] for field in JOB_FIELDS):
            _change_note(job, before, changes, now)
    for changed, ids in changes.items():
        ids_update(Job, ids, **dict(changed), updated_at=now)
    if release:
        Placement.objects.filter(
            job_id__in=release, state__in=[Placement.State.BOUND, Placement.State.RUNNING]
        ).update(state=Placement.State.RELEASING, updated_at=now)


def _job_advance(
    job: Job,
    count: Counter,
    lost: _Lost,
    failed: tuple[Placement, ObservedPod] | None,
    policies: _Policies,
    now: datetime,
    transitions: CycleTransitions,
) -> bool:
    """Change the job's status for what its pods did (the event and its outcome from
    portal.jobs.lifecycle); True when its remaining pods are to be released."""
    active = count[Placement.State.BOUND] + count[Placement.State.RUNNING]
    gone = active + count[Placement.State.RELEASING] == 0  # no pod of it is left on a node
    if job.policy_due_at is not None and job.policy_due_at <= now:
        if _delays_fire(job, now, transitions):
            return True
        if job.status not in _PLACED:
            return False
    if failed is not None:
        return _on_failed(job, *failed, policies, now, transitions)
    why = lost.why.get(job.pk)
    if why is not None and active + count[Placement.State.SUCCEEDED] < job.min_available:
        attempt = lost.attempts.get(job.pk)
        if attempt is not None:
            return _on_start_failed(job, attempt, lost.backoff, policies, now, transitions)
        return _on_lost(job, why, policies, now, transitions)
    completed = policies.task_completed(job, job.pk)
    if completed is not None and completed[1].delay_seconds:
        task, match = completed
        _delay(job, match, TASK_COMPLETED, pod="", task=task, what="completed", why="", now=now)
        completed = None
    if gone and allows(job.status, Event.REQUEUE):
        transitions.apply(job, Event.REQUEUE, now)
    elif completed is not None:
        return _on_task_completed(job, completed[0], completed[1].action, now, transitions)
    elif gone and allows(job.status, Event.SUCCEED):
        if count[Placement.State.SUCCEEDED] >= job.min_available:
            transitions.apply(job, Event.SUCCEED, now)
    elif count[Placement.State.RUNNING] >= job.min_available and allows(job.status, Event.START):
        transitions.apply(job, Event.START, now)
    return False


def _delay(
    job: Job, match: PolicyMatch, event: str, *, pod: str, task: str, what: str, why: str,
    now: datetime,
) -> None:  # fmt: skip
    """Keep a delayed action on the job until its time (portal.jobs.delays); the job goes on
    meanwhile, the pod that raised it not replaced."""
    delay = Delay(
        action=match.action,
        event=event,
        pod=pod,
        task=task,
        what=what,
        why=why,
        due=due(now, match.delay_seconds),
        run=run_of(job.admitted_at),
    )
    delays = delay_added(job.policy_delays, delay)
    if delays is None:
        return  # the same action waits for the same pod already
    job.policy_delays = delays
    job.policy_due_at = due_at(delays_read(delays))
    job.pending_reason = POLICY_DELAYED.format(
        subject=f"pod {pod}" if pod else f"task {task}",
        what=what,
        why=f" ({why})" if why else "",
        event=event,
        action=match.action,
        seconds=match.delay_seconds,
        due=delay.due,
    )
    job.pending_reason_at = now


def _delays_fire(job: Job, now: datetime, transitions: CycleTransitions) -> bool:
    """Carry out the job's delayed actions whose time has come, in order (those of an earlier
    run are dropped); True when its pods are to be released."""
    ready, waiting = delays_due(job.policy_delays, now=now, run=run_of(job.admitted_at))
    job.policy_delays = [d.as_dict() for d in waiting]
    job.policy_due_at = due_at(waiting)
    if job.status not in _PLACED:
        job.policy_delays, job.policy_due_at = [], None
        return False
    for delay in ready:
        release = _policy_apply(
            job, delay.action, delay.event, delay.pod, delay.what, delay.why, now, transitions
        )
        if job.status not in _PLACED:
            job.policy_delays, job.policy_due_at = [], None
            return release
    return False


_ENDED = {Job.Status.SUCCEEDED: "succeeded", Job.Status.FAILED: "failed"}


def _change_note(job: Job, before: dict, changes: dict[tuple, list[int]], now: datetime) -> None:
    """Group the job's changed fields with other jobs' identical changes (one UPDATE each);
    a change of a list (its retries, its delayed actions) is written for this job alone."""
    changed = {f: getattr(job, f) for f in JOB_FIELDS if getattr(job, f) != before[f]}
    if changed.keys() & set(_LIST_FIELDS):
        ids_update(Job, [job.pk], **changed, updated_at=now)
        return
    changes[tuple(sorted(changed.items()))].append(job.pk)


def _on_task_completed(
    job: Job, task: str, action: str, now: datetime, transitions: CycleTransitions
) -> bool:
    """A TaskCompleted policy ends the job; False when the lifecycle refused it."""
    if not transitions.apply(job, Event.SUCCEED if action == COMPLETE_JOB else Event.FAIL, now):
        return False
    job.started_at = job.started_at or now  # a task of it completed: it ran, failed or not
    job.pending_reason = TASK_COMPLETED_ENDED.format(
        task=task, action=action, ended=_ENDED[job.status]
    )
    return True


def _on_failed(
    job: Job,
    placement: Placement,
    pod: ObservedPod,
    policies: _Policies,
    now: datetime,
    transitions: CycleTransitions,
) -> bool:
    """A pod of the job failed or was evicted: its policy's action, else the job fails.
    False when the lifecycle refused the change."""
    event = POD_EVICTED if pod.reason == "Evicted" else POD_FAILED
    match = policy_match(
        event=event,
        exit_code=pod.exit_code if event == POD_FAILED else None,
        task_policies=policies.task(placement.task_id),
        job_policies=job.policies,
    )
    what = "was evicted" if event == POD_EVICTED else "failed"
    why = pod.reason or f"exit code {pod.exit_code}"
    if match is None:
        if not transitions.apply(job, Event.FAIL, now):
            return False
        job.pending_reason = POD_FAILED_REASON.format(pod=placement.pod_name, reason=why)
        return True
    if match.delay_seconds:
        _delay(job, match, event, pod=placement.pod_name, task="", what=what, why=why, now=now)
        return False
    return _policy_apply(job, match.action, event, placement.pod_name, what, why, now, transitions)


def _on_start_failed(
    job: Job,
    attempt: Attempt,
    backoff: BackoffSettings,
    policies: _Policies,
    now: datetime,
    transitions: CycleTransitions,
) -> bool:
    """A pod of the job failed to start (portal.jobs.backoff): the attempt is kept on the job;
    at its cap the job fails with the kubelet's words, else it is lost as any pod is, saying
    when it is tried again."""
    job.start_attempts = attempts_with(job.start_attempts, attempt)
    attempts = attempts_of(job.start_attempts)
    if capped(attempts, attempt.kind, job.max_retry):
        if not transitions.apply(job, Event.FAIL, now):
            return False
        job.pending_reason = failed_reason(attempts, job.max_retry)[:REASON_CHARS]
        job.pending_reason_at = now
        return True
    why = waiting_reason(attempts, backoff, job.max_retry)[:REASON_CHARS]
    return _on_lost(job, why, policies, now, transitions)


def _on_lost(
    job: Job, why: str, policies: _Policies, now: datetime, transitions: CycleTransitions
) -> bool:
    """A pod of the job is lost (it vanished, its node left, the kubelet refused it, it never
    started): the OutOfSync event. By default, or by a restart policy with retries left, the job
    is requeued; an action that ends the job ends it. Only the job's policies apply (the lost
    pod is known by its reason alone). False when the lifecycle refused the change."""
    match = policy_match(
        event=OUT_OF_SYNC, exit_code=None, task_policies=[], job_policies=job.policies
    )
    # Carried out at once: upstream keeps OutOfSync for itself, and has no delay for it.
    action = None if match is None else match.action
    if action is None or (action in RESTARTS and job.retry_count < job.max_retry):
        if not transitions.apply(job, Event.RESTART, now):
            return False
        job.pending_reason, job.pending_reason_at = why, now
        if action is not None:
            _retry_record(job, action, OUT_OF_SYNC, "", why, now)
        return True
    return _policy_apply(job, action, OUT_OF_SYNC, "", "was lost", why, now, transitions)


def _policy_apply(
    job: Job,
    action: str,
    event: str,
    pod: str,
    what: str,
    why: str,
    now: datetime,
    transitions: CycleTransitions,
) -> bool:
    """Carry out a policy's action on `job` (jobspec.policies says what each means here):
    while retries are left RestartPod has the pod's replica placed again and a restart
    requeues the job; anything else ends it. True when the job's pods are to be released."""
    words = {"pod": pod or "a pod", "what": what, "why": why, "event": event, "action": action}
    if action == RESTART_POD and job.retry_count < job.max_retry:
        # The pod's placement has ended: its replica is placed again while the job's other
        # pods run on (state/running.go: KillTarget, then the controller makes the pod anew).
        reason = POLICY_POD_REPLACED.format(
            **words, retry=job.retry_count + 1, max_retry=job.max_retry
        )
        job.pending_reason, job.pending_reason_at = reason, now
        _retry_record(job, action, event, pod, reason, now)
        return False
    if action in RESTARTS and job.retry_count < job.max_retry:
        if not transitions.apply(job, Event.RESTART, now):
            return False
        reason = POLICY_RESTART.format(**words, retry=job.retry_count + 1, max_retry=job.max_retry)
        job.pending_reason, job.pending_reason_at = reason, now
        _retry_record(job, action, event, pod, reason, now)
        return True
    if action in RETRIED:
        if not transitions.apply(job, Event.FAIL, now):
            return False
        job.pending_reason = POLICY_RETRIES_SPENT.format(**words, max_retry=job.max_retry)
        return True
    if not transitions.apply(job, Event.SUCCEED if action == COMPLETE_JOB else Event.FAIL, now):
        return False
    job.pending_reason = POLICY_ENDED.format(**words, ended=_ENDED[job.status])
    return True


def _retry_record(job: Job, action: str, event: str, pod: str, reason: str, now: datetime) -> None:
    job.retry_count += 1
    job.retries = [
        *job.retries,
        {
            "at": now.isoformat(),
            "pod": pod,
            "event": event,
            "action": action,
            "reason": reason,
        },
    ]


class _Policies:
    """The task policies and task sizes one observation needs, read in at most two queries
    and only for jobs that have a failure, a vanished pod or a TaskCompleted policy."""

    def __init__(
        self,
        jobs: dict[int, Job],
        failed: dict[int, tuple[Placement, ObservedPod]],
    ) -> None:
        task_ids = {p.task_id for p, _ in failed.values()}
        self._task_policies = dict(
            JobTask.objects.filter(id__in=task_ids).values_list("id", "policies")
        ) if task_ids else {}  # fmt: skip
        watching = [
            job_id
            for job_id, job in jobs.items()
            if not job.is_terminal and _has_task_completed(job.policies)
        ]
        tasks = JobTask.objects.filter(job_id__in=watching) if watching else JobTask.objects.none()
        self._tasks: dict[int, list[tuple[int, str, int, list]]] = defaultdict(list)
        for task_id, job_id, name, replicas, task_policies in tasks.values_list(
            "id", "job_id", "name", "replicas", "policies"
        ):
            self._tasks[job_id].append((task_id, name, replicas, task_policies))
        # A task's own TaskCompleted policy counts too, for jobs without one at the job level.
        for task_id, job_id, name, replicas, task_policies in (
            JobTask.objects.filter(job_id__in=[j for j in jobs if j not in watching])
            .exclude(policies=[])
            .values_list("id", "job_id", "name", "replicas", "policies")
        ):
            if _has_task_completed(task_policies):
                self._tasks[job_id].append((task_id, name, replicas, task_policies))
        ids = [task_id for rows in self._tasks.values() for task_id, *_ in rows]
        self._succeeded = Counter(
            Placement.objects.filter(task_id__in=ids, state=Placement.State.SUCCEEDED).values_list(
                "task_id", flat=True
            )
        ) if ids else Counter()  # fmt: skip

    def task(self, task_id: int) -> list:
        return self._task_policies.get(task_id) or []

    def task_completed(self, job: Job, job_id: int) -> tuple[str, PolicyMatch] | None:
        """(task, policy) when a task of a running job has all its pods succeeded and a
        TaskCompleted policy says what that does, else None."""
        if not allows(job.status, Event.SUCCEED):  # not placed (admitted or running)
            return None
        for task_id, name, replicas, task_policies in self._tasks.get(job_id, ()):
            if self._succeeded[task_id] < replicas:
                continue
            match = policy_match(
                event=TASK_COMPLETED,
                exit_code=None,
                task_policies=task_policies,
                job_policies=job.policies,
            )
            if match is not None and match.action not in RETRIED:
                return name, match
        return None


def _has_task_completed(policies: list) -> bool:
    return any(TASK_COMPLETED in (policy.get("events") or ()) for policy in policies or ())
