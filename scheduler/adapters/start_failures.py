"""What a job becomes when the cluster would not start its pods (reconcile's job errors).

A job whose pods the API server refused for good (403, 422) fails with the server's words as
its reason, instead of being created again every cycle; a job that only has to wait (the
server failed, a gang pod is still terminating) keeps its placements and says why, so the
reason is on the job, not only in the cycle record; one whose namespace does not exist waits
for it (scheduler.adapters.namespaces).
"""

from __future__ import annotations

from datetime import datetime

from scheduler.adapters.cluster.base import RefusedClusterError
from scheduler.adapters.namespaces import job_requeue_namespace_missing, namespace_not_found
from scheduler.adapters.portal_port import job_start_refused, job_start_retrying


def gang_start_failures(*, job_errors: dict[str, Exception], now: datetime) -> None:
    for job_id, error in sorted(job_errors.items()):
        if not job_id.isdigit():
            continue
        if namespace := namespace_not_found(error):
            job_requeue_namespace_missing(job_id=int(job_id), namespace=namespace, at=now)
        elif isinstance(error, RefusedClusterError):
            job_start_refused(job_id=int(job_id), error=str(error), at=now)
        else:
            job_start_retrying(job_id=int(job_id), error=str(error), at=now)
