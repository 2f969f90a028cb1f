"""Jobs whose namespace does not exist wait, saying so, instead of being placed.

With a namespace per tenant, the portal never creates namespaces (a cluster admin does, with
the portal's Roles in it: portal.cluster.rbac_for_tenant). A job whose tenant has none yet
must not be placed: it would hold GPUs, perhaps preempt others, and then fail to create its
pods every cycle. So each cycle asks the backend once which of the waiting jobs' namespaces
are missing (one list of namespaces), leaves those jobs out of the snapshot, and gives each
the reason NAMESPACE_MISSING (written only when it changes). A namespace that disappears
between that list and a create (404 "namespaces ... not found") requeues the job with the
same reason instead of failing it: the admin's fix is the same, and the next cycle holds it.
A namespace that exists but refused the backend's lists this cycle (403: the portal's Roles
were not applied there) holds its jobs the same way, with NAMESPACE_FORBIDDEN: a create there
would be refused too, and a refused create fails the job.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import datetime

from django.conf import settings
from django.db import transaction

from scheduler.adapters.backends import backend_from_settings
from scheduler.adapters.bulk import rows_update
from scheduler.adapters.cluster.base import ClusterBackend, ClusterError, RefusedClusterError
from scheduler.adapters.portal_port import (
    NAMESPACE_FORBIDDEN,
    NAMESPACE_MISSING,
    WAITING,
    ClusterUnavailable,
    Event,
    IllegalTransition,
    Job,
    Placement,
    placing_namespaces,
    transition,
)
from scheduler.core.types import PendingKind

logger = logging.getLogger(__name__)

WAITING_STATUSES = tuple(sorted(WAITING))
_NOT_FOUND = re.compile(r'namespaces "(?P<namespace>[^"]+)" not found')


def namespaces_hold(
    backend: ClusterBackend, *, now: datetime, fence: Callable[[], None] = lambda: None
) -> set[str]:
    """Keys (job ids as the snapshot has them) of the waiting jobs to leave out of this cycle
    because their namespace does not exist, or refused the backend's lists (no Roles there).
    Only with a namespace per tenant (the shared one is made with the portal's RBAC); a
    backend that cannot answer this cycle holds nothing back (a create then says why)."""
    if not settings.KUBERNETES_NAMESPACE_PER_TENANT:
        return set()
    tenant_of = dict(
        Job.objects.filter(status__in=WAITING_STATUSES).values_list("id", "tenant__name")
    )
    if not tenant_of:
        return set()
    where = placing_namespaces(tenant_of)
    try:
        missing = backend.namespaces_missing(set(where.values()))
    except ClusterError as error:
        logger.warning("cannot tell which namespaces exist: %s", error)
        return set()
    # Namespaces whose lists this cycle's backend was refused (403) exist without the
    # portal's Roles: a create there would be refused too, and fail the job.
    refusing = backend.namespaces_refusing() - missing
    why = dict.fromkeys(missing, NAMESPACE_MISSING)
    why |= dict.fromkeys(refusing, NAMESPACE_FORBIDDEN)
    held = {job_id: namespace for job_id, namespace in where.items() if namespace in why}
    if not held:
        return set()
    with transaction.atomic():
        fence()
        current = dict(
            Job.objects.filter(id__in=held, status__in=WAITING_STATUSES).values_list(
                "id", "pending_reason"
            )
        )
        rows = []
        for job_id in sorted(current):
            namespace = held[job_id]
            reason = why[namespace].format(namespace=namespace, tenant=tenant_of[job_id])
            if current[job_id] != reason:
                rows.append((job_id, reason, PendingKind.WAITS.value))
        rows_update(Job, ["pending_reason", "pending_kind"], rows, same={"pending_reason_at": now})
    return {str(job_id) for job_id in current}


def namespace_not_found(error: Exception) -> str | None:
    """The namespace a create was refused for because it does not exist, else None."""
    if not isinstance(error, RefusedClusterError) or error.status != 404:
        return None
    found = _NOT_FOUND.search(error.message)
    return found["namespace"] if found else None


def job_requeue_namespace_missing(*, job_id: int, namespace: str, at: datetime) -> Job | None:
    """An admitted job whose pods could not be made because their namespace is gone: its
    placements are given back (no pod of it exists there) and it is restarted, as a job whose
    pods were lost is (pending again once they are released), saying why. Returns the job, or
    None when it is no longer admitted."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.status != Job.Status.ADMITTED:
            return None
        try:
            change = transition(job.status, Event.RESTART)
        except IllegalTransition:
            return None
        fields = change.apply(job, at)
        job.pending_reason = NAMESPACE_MISSING.format(namespace=namespace, tenant=job.tenant.name)
        job.pending_reason_at = job.updated_at = at
        job.save(update_fields=[*fields, "pending_reason", "pending_reason_at", "updated_at"])
        Placement.objects.filter(
            job_id=job_id, state__in=[Placement.State.BOUND, Placement.State.RUNNING]
        ).update(state=Placement.State.RELEASING, updated_at=at)
    return job


def namespace_labels_read(*, names: list[str]) -> dict[str, dict[str, str]]:
    """The labels of the namespaces `names` that exist, for the portal's configuration check
    (portal.scheduling.facade.namespace_labels_read): from the configured backend, without
    the cycle's watch cache; ClusterUnavailable when the cluster cannot be asked."""
    try:
        return backend_from_settings(watch_cache=False).namespace_labels(names)
    except ClusterError as error:
        raise ClusterUnavailable(str(error)) from error
