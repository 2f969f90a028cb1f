"""The preemption notice (docs/design/preemption-notice.md): a pod of a queue with a
`preemption_notice_seconds` is told when it will be deleted, and kept until then.

- `notices_give` (persist, when the cycle evicts): the deadline goes on the victim's placement,
  so a worker that restarts keeps it; nothing is timed in memory.
- `notices_hold` (reconcile, after the plan): a released pod under notice is left out of the
  plan's deletions until its deadline, then deleted with what is left of the grace period
  counted from the deadline (`grace_left`), so a late cycle never gives it more time.
- `notices_apply` (reconcile, after apply): the live pods under notice get the
  `portal.gpu/preemption-deadline` annotation (their downward API file, jobspec.notice) and a
  Kubernetes Event saying the deadline; the pods whose deadline came are deleted.
- `notice_ends` (observe): how each pod under notice ended, kept for the preemption history.

A queue whose notice is 0 gives none: its pods are deleted at once, as Volcano deletes them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobspec.notice import DEADLINE_ANNOTATION, DEADLINE_PATH, deadline_text
from scheduler.adapters.bulk import ids_update
from scheduler.adapters.cluster.base import ClusterBackend, ObservedPod, PodEvent
from scheduler.adapters.portal_port import (
    Job,
    Placement,
    placement_namespace,
    placements_notice_give,
)
from scheduler.adapters.reconcile import ReconcilePlan, ReconcileReport

NOTICE_EVENT = "PreemptionNotice"
NOTICE_MESSAGE = "this pod is deleted at {deadline} ({path}): checkpoint and exit before then"


def notice_deadline(now: datetime, seconds: int) -> datetime:
    """`seconds` from `now`, rounded up to a whole second (the annotation's precision)."""
    at = now + timedelta(seconds=seconds)
    return at if not at.microsecond else at.replace(microsecond=0) + timedelta(seconds=1)


def notices_give(placements: Iterable[tuple[int, int]], now: datetime) -> set[int]:
    """`placements`: (placement id, its queue's notice in seconds). Each with a notice gets
    its deadline, unless it was told of an earlier one (its run-time limit's). Returns the
    ids under notice now: their pods are not deleted yet."""
    by_deadline: dict[datetime, list[int]] = defaultdict(list)
    for placement_id, seconds in placements:
        if seconds > 0:
            by_deadline[notice_deadline(now, seconds)].append(placement_id)
    for deadline, ids in sorted(by_deadline.items()):
        placements_notice_give(ids=ids, deadline=deadline, at=now)
    return {placement_id for ids in by_deadline.values() for placement_id in ids}


@dataclass(frozen=True, slots=True)
class Notice:
    name: str
    namespace: str
    deadline: datetime


def notices_read() -> dict[tuple[str, str], Notice]:
    """(namespace, pod name) -> its notice, for the active placements told of a deadline whose
    job still lives (a job cancelled meanwhile has its pods deleted at once)."""
    rows = (
        Placement.objects.filter(state__in=Placement.ACTIVE_STATES, notice_deadline__isnull=False)
        .exclude(job__status__in=Job.TERMINAL_STATUSES)
        .values_list("pod_name", "namespace", "notice_deadline")
    )
    notices = {}
    for name, stored, deadline in rows:
        if deadline is None:  # filtered out above; the check is for the type checker
            continue
        namespace = placement_namespace(stored)
        notices[(namespace, name)] = Notice(name, namespace, deadline)
    return notices


def grace_left(deadline: datetime, now: datetime, grace_seconds: int) -> int:
    """What is left of the deletion's grace period counted from the deadline: a cycle that
    comes late (a worker restarted) does not give the pod more time than one on time would.
    At least 1 s: the pod always gets its SIGTERM (0 would delete it at once)."""
    left = (deadline + timedelta(seconds=grace_seconds) - now).total_seconds()
    return max(1, min(grace_seconds, math.ceil(left)))


@dataclass(frozen=True)
class Held:
    """What `notices_hold` took out of a plan: pods kept until their deadline, and pods whose
    deadline came, with the grace each is deleted with."""

    kept: list[ObservedPod]
    due: list[tuple[ObservedPod, int]]


def notices_hold(
    plan: ReconcilePlan,
    notices: Mapping[tuple[str, str], Notice],
    now: datetime,
    grace_seconds: int,
) -> tuple[ReconcilePlan, Held]:
    """The plan without the deletions of pods under notice (finished pods are deleted as
    usual: they run nothing), and those pods, kept or due. Pure."""
    if not notices:
        return plan, Held([], [])
    deletes, kept, due = [], [], []
    for pod in plan.delete:
        notice = notices.get((pod.namespace, pod.name))
        if notice is None or pod.finished:
            deletes.append(pod)
        elif now < notice.deadline:
            kept.append(pod)
        else:
            due.append((pod, grace_left(notice.deadline, now, grace_seconds)))
    held = ReconcilePlan(create=plan.create, delete=deletes, bind=plan.bind, present=plan.present)
    return held, Held(kept, due)


def notices_apply(
    backend: ClusterBackend,
    report: ReconcileReport,
    *,
    observed: Iterable[ObservedPod],
    notices: Mapping[tuple[str, str], Notice],
    held: Held,
    evictions: Mapping[str, str],
) -> None:
    """Annotate the live pods under notice that lack their deadline (with an Event each),
    and delete those whose deadline came. Errors go into `report` as reconcile's do."""
    for pod in observed:
        notice = notices.get((pod.namespace, pod.name))
        if notice is None or pod.finished or pod.deletion_requested:
            continue
        text = deadline_text(notice.deadline)
        if pod.annotations.get(DEADLINE_ANNOTATION) == text:
            continue
        if (error := _outcome(backend, pod, text)) is not None:
            report.errors.append(f"annotate {pod.namespace}/{pod.name}: {error}")
            continue
        message = NOTICE_MESSAGE.format(deadline=text, path=DEADLINE_PATH)
        report.events.append(PodEvent(pod.name, pod.namespace, NOTICE_EVENT, message, "Warning"))
    by_grace: dict[int, list[ObservedPod]] = defaultdict(list)
    for pod, grace in held.due:
        by_grace[grace].append(pod)
    for grace, pods in sorted(by_grace.items()):
        refs = [(pod.name, pod.namespace) for pod in pods]
        try:
            outcomes = backend.delete_pods(refs, grace)
        # As reconcile's batches: a batch that breaks as a whole is each pod's error.
        except Exception as exc:  # noqa: BLE001
            outcomes = [exc] * len(pods)
        for pod, error in zip(pods, outcomes, strict=True):
            ref = f"{pod.namespace}/{pod.name}"
            if error is not None:
                report.errors.append(f"delete {ref}: {error}")
                continue
            report.deleted.append(ref)
            if why := evictions.get(pod.name):
                report.events.append(PodEvent(pod.name, pod.namespace, "Preempted", why, "Warning"))


def _outcome(backend: ClusterBackend, pod: ObservedPod, text: str) -> Exception | None:
    try:
        backend.annotate_pod(pod.name, pod.namespace, {DEADLINE_ANNOTATION: text})
    # Each pod is its own boundary, as in reconcile: one pod's failure never stops the rest.
    except Exception as exc:  # noqa: BLE001
        return exc
    return None


def notice_ends(
    placements: Iterable[Placement], pods: Mapping[str, ObservedPod], now: datetime
) -> dict[tuple[str, datetime], list[int]]:
    """How each pod under notice whose end is first seen now ended: (Placement.NoticeEnd,
    when) -> placement ids. By itself: it finished (Succeeded or Failed) without being
    deleted; at the deadline: it was deleted, or is gone, once the deadline came; early: it
    was deleted before (its job was cancelled)."""
    ends: dict[tuple[str, datetime], list[int]] = defaultdict(list)
    for placement in placements:
        deadline = placement.notice_deadline
        if deadline is None or placement.notice_end:
            continue
        pod = pods.get(placement.pod_name)
        if pod is not None and pod.finished and not pod.deletion_requested:
            ends[(Placement.NoticeEnd.ITSELF, now)].append(placement.pk)
        elif placement.state != Placement.State.RELEASING:
            continue  # told of its run-time limit, still running: nothing ended yet
        elif pod is None or pod.deletion_requested:
            if now >= deadline:
                ends[(Placement.NoticeEnd.DEADLINE, deadline)].append(placement.pk)
            else:
                ends[(Placement.NoticeEnd.EARLY, now)].append(placement.pk)
    return ends


def notice_ends_record(
    placements: Iterable[Placement], pods: Mapping[str, ObservedPod], now: datetime
) -> None:
    """Keep how the pods under notice ended (notice_ends) on their placements, for the
    preemption history: stored, never worked out again from a clock."""
    for (end, at), ids in sorted(notice_ends(placements, pods, now).items()):
        ids_update(Placement, ids, notice_end=end, notice_ended_at=at)
