"""What a job becomes when the cluster would not start its pods (reconcile's job errors).

A job whose pods the API server refused for good (403 from Pod Security or RBAC, 422 invalid)
fails with the server's words as its reason, instead of being created again every cycle. A
refusal that clears by itself is a failed start attempt (portal.jobs.backoff): a namespace
ResourceQuota exceeded (a 403 whose message says "exceeded quota") or a pod name another
portal's object holds, a node found full at bind time (scheduler.adapters.bind_recheck: the
job then avoids that node). The job's pods are released at once, and it waits its backoff in the
queue, saying when it is tried again; a quota or a full node never fails it. A job that only has to wait (the
server failed, a gang pod is still terminating) keeps its placements and says why, so the
reason is on the job, not only in the cycle record; one whose namespace does not exist waits
for it (scheduler.adapters.namespaces).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from scheduler.adapters.cluster.base import (
    NameTakenError,
    NodeTakenError,
    PodEvent,
    RefusedClusterError,
)
from scheduler.adapters.cycle_metrics import start_failures_counted
from scheduler.adapters.namespaces import job_requeue_namespace_missing, namespace_not_found
from scheduler.adapters.portal_port import (
    Attempt,
    Job,
    Kind,
    job_start_failed,
    job_start_refused,
    job_start_retrying,
    quota_exceeded,
)

BACKOFF_EVENT = "BackOff"
FAILED_EVENT = "FailedCreate"


def gang_start_failures(
    *,
    job_errors: Mapping[str, Exception],
    now: datetime,
    pods: Mapping[str, tuple[str, str]] | None = None,
) -> list[PodEvent]:
    """Each job's error onto the job; returns a warning for each failed start attempt, on the
    pod (`pods`: job id -> its pod's (name, namespace)) whose create or bind failed."""
    events = []
    for job_id, error in sorted(job_errors.items()):
        if not job_id.isdigit():
            continue
        name, namespace = (pods or {}).get(job_id, ("", ""))
        if namespace_ := namespace_not_found(error):
            job_requeue_namespace_missing(job_id=int(job_id), namespace=namespace_, at=now)
        elif (attempt := _attempt(error, name, now)) is not None:
            job = job_start_failed(job_id=int(job_id), attempt=attempt)
            if job is not None:
                start_failures_counted([attempt.kind])
                if name:
                    events.append(_event(job, name, namespace))
        elif isinstance(error, RefusedClusterError):
            job_start_refused(job_id=int(job_id), error=str(error), at=now)
        else:
            job_start_retrying(job_id=int(job_id), error=str(error), at=now)
    return events


def _attempt(error: Exception, pod: str, now: datetime) -> Attempt | None:
    """The failed start attempt `error` is, or None when it is not one."""
    if isinstance(error, NameTakenError):
        return Attempt(now, Kind.NAME_TAKEN, pod=pod, words=str(error))
    if isinstance(error, NodeTakenError):
        return Attempt(now, Kind.NODE_TAKEN, node=error.node, pod=pod, words=error.words)
    if isinstance(error, RefusedClusterError):
        quota = quota_exceeded(error.status, error.message)
        if quota is not None:
            return Attempt(now, Kind.QUOTA, pod=pod, words=error.message, quota=quota)
    return None


def _event(job: Job, name: str, namespace: str) -> PodEvent:
    reason = FAILED_EVENT if job.status == Job.Status.FAILED else BACKOFF_EVENT
    return PodEvent(name, namespace, reason, job.pending_reason, "Warning")
