import copy
import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction
from django.db.models import F

from portal.common.ids import parse_id
from portal.jobs.models import Job
from portal.tenants.models import Membership, Tenant
from portal.tenants.quota import QUOTA_FIELDS, audited_save, changes_record
from portal.tenants.services import (  # noqa: F401 - FIELD_NOT_EDITABLE: the same refusal
    CLUSTER_POLICY_FORBIDDEN,
    FIELD_NOT_EDITABLE,
    check_queue_guarantees_fit_tenant,
    policy_change_check,
    refuse_unknown,
    tenant_locked,
)

from .access import can_edit_queue, can_manage_queues_of
from .models import RESOURCES, Queue, QueueChange, QueueOrder

# Fields `queue_update` may change; every change is written as a QueueChange row.
RUNTIME_FIELDS = ("max_runtime_seconds", "min_runtime_seconds", "preemption_notice_seconds")
EDITABLE_FIELDS = (*QUOTA_FIELDS, "priority", "state", *RUNTIME_FIELDS)

QUEUE_EDIT_FORBIDDEN = "Only a lead of the queue's tenant or a site admin may change this queue."
QUEUE_CREATE_FORBIDDEN = "Only a lead of the tenant or a site admin may create its queues."
QUEUE_DELETE_ACTIVE_JOBS = "the queue has {count} active job(s); cancel them or close the queue"
QUEUE_DELETE_HAS_HISTORY = "the queue has {count} finished job(s); close it instead of deleting"
QUEUE_DEFAULT_FORBIDDEN = "Only a lead of the tenant or a site admin may set its default queues."
QUEUE_DEFAULT_OTHER_TENANT = "tenant {tenant} has no queue {queue}"
QUEUE_DEFAULT_NOT_A_MEMBER = "{user} is not a member of tenant {tenant}"


def _guarantees(queue: Queue) -> dict[str, int]:
    return {resource: getattr(queue, f"guarantee_{resource}") for resource in RESOURCES}


@transaction.atomic
def queue_create(
    *,
    tenant: Tenant,
    name: str,
    actor: AbstractBaseUser | None = None,
    weight: int = 1,
    guarantee_gpus: int = 0,
    guarantee_cpu_millis: int = 0,
    guarantee_memory_bytes: int = 0,
    capability_gpus: int | None = None,
    capability_cpu_millis: int | None = None,
    capability_memory_bytes: int | None = None,
    borrowing_limit_gpus: int | None = None,
    borrowing_limit_cpu_millis: int | None = None,
    borrowing_limit_memory_bytes: int | None = None,
    reclaimable: bool = True,
    priority: int = 0,
    state: str = Queue.State.OPEN,
    max_runtime_seconds: int | None = None,
    min_runtime_seconds: int = 0,
    preemption_notice_seconds: int = 0,
) -> Queue:
    """Create a queue. `actor=None` means the system (seed, tests); otherwise lead or staff."""
    if actor is not None and not can_manage_queues_of(actor, tenant):
        raise PermissionDenied(QUEUE_CREATE_FORBIDDEN)
    # Locked first, so the checks below (guarantees, run-time maximum) read the tenant as it
    # is and concurrent edits there apply one at a time.
    tenant = tenant_locked(tenant.pk)
    queue = Queue(
        tenant=tenant,
        name=name,
        weight=weight,
        guarantee_gpus=guarantee_gpus,
        guarantee_cpu_millis=guarantee_cpu_millis,
        guarantee_memory_bytes=guarantee_memory_bytes,
        capability_gpus=capability_gpus,
        capability_cpu_millis=capability_cpu_millis,
        capability_memory_bytes=capability_memory_bytes,
        borrowing_limit_gpus=borrowing_limit_gpus,
        borrowing_limit_cpu_millis=borrowing_limit_cpu_millis,
        borrowing_limit_memory_bytes=borrowing_limit_memory_bytes,
        reclaimable=reclaimable,
        priority=priority,
        state=state,
        max_runtime_seconds=max_runtime_seconds,
        min_runtime_seconds=min_runtime_seconds,
        preemption_notice_seconds=preemption_notice_seconds,
    )
    queue.full_clean()
    # Inside the tenant's quota (the tenants' guarantees are what is checked against the
    # cluster).
    check_queue_guarantees_fit_tenant(
        tenant=tenant,
        queue_name=name,
        proposed=_guarantees(queue),
        previous={},
    )
    queue.save()
    return queue


@transaction.atomic
def queue_update(*, queue: Queue, actor: AbstractBaseUser | None, **changes: Any) -> Queue:
    """Change a queue's weight, limits, priority, state or reclaimable flag.

    Each field that really changes gets a QueueChange row (old -> new, who, when).
    `actor=None` means the system; a user must be a lead of the tenant or staff.
    """
    _refuse_unknown(changes)
    # Locked before anything else is read, the tenant first (the order tenant_update takes):
    # see tenant_locked and _queue_locked.
    tenant = tenant_locked(queue.tenant_id)
    queue = _queue_locked(queue.pk)
    if actor is not None and not can_edit_queue(actor, queue):
        raise PermissionDenied(QUEUE_EDIT_FORBIDDEN)

    before = {field: getattr(queue, field) for field in EDITABLE_FIELDS}
    _queue_changes_apply(queue=queue, tenant=tenant, changes=changes)
    changed = [field for field in EDITABLE_FIELDS if getattr(queue, field) != before[field]]
    if not changed:
        return queue
    queue.save(update_fields=[*changed, "updated_at"])
    changes_record(
        model=QueueChange, owner="queue", row=queue, before=before, fields=changed, actor=actor
    )
    return queue


def queue_update_check(*, queue: Queue, **changes: Any) -> None:
    """Raise what queue_update would for ``changes``, saving and locking nothing: the edit
    page's preview shows the refusal under its field while the user types, not at Save."""
    _refuse_unknown(changes)
    _queue_changes_apply(queue=copy.copy(queue), tenant=queue.tenant, changes=changes)


def _queue_changes_apply(*, queue: Queue, tenant: Tenant, changes: dict[str, Any]) -> None:
    """Set ``changes`` on ``queue`` (unsaved) and check them: each field's range, then the
    tenant's guarantees."""
    previous = _guarantees(queue)
    for field, value in changes.items():
        setattr(queue, field, value)
    queue.full_clean()
    check_queue_guarantees_fit_tenant(
        tenant=tenant, queue_name=queue.name, proposed=_guarantees(queue), previous=previous
    )


def _refuse_unknown(changes: dict[str, Any]) -> None:
    refuse_unknown(changes, EDITABLE_FIELDS)


QUEUE_POLICY_FIELDS = ("allowed_tolerations", "allowed_priority_classes")


@transaction.atomic
def queue_policy_update(
    *, queue: Queue, actor: AbstractBaseUser | None, **changes: Any
) -> list[int]:
    """Change the taints and priority classes a queue's jobs may use besides its tenant's:
    site admins only (a lead splits the quota, not the cluster's trust). Audited; the queue's
    jobs the new policy refuses are quarantined (portal.jobs.services.jobs_policy_hold).
    Returns their ids."""
    from portal.jobs.services import jobs_policy_hold

    policy_change_check(changes, QUEUE_POLICY_FIELDS, actor)
    tenant_locked(queue.tenant_id)
    queue = _queue_locked(queue.pk)
    fields = QUEUE_POLICY_FIELDS
    if not audited_save(
        model=QueueChange, owner="queue", row=queue, fields=fields, changes=changes, actor=actor
    ):
        return []
    return jobs_policy_hold(queue_ids=[queue.pk])


def _queue_locked(pk: int) -> Queue:
    """The queue row, locked until the transaction ends, so concurrent edits apply one after
    another and each audit row's old value is the previous row's new value.

    SQLite ignores FOR UPDATE. Writing first takes its database-wide write lock at once,
    waiting out the busy timeout, where a transaction that reads and then writes fails with
    "database is locked" whenever another edit commits in between.
    """
    if connection.vendor == "sqlite":
        Queue.objects.filter(pk=pk).update(updated_at=F("updated_at"))
    return Queue.objects.select_for_update().get(pk=pk)


@transaction.atomic
def queue_delete(*, queue: Queue, actor: AbstractBaseUser | None) -> None:
    """Delete a queue that never ran a job. Queues with history are closed instead."""
    if actor is not None and not can_edit_queue(actor, queue):
        raise PermissionDenied(QUEUE_EDIT_FORBIDDEN)
    jobs = Job.objects.filter(queue=queue)
    active = jobs.exclude(status__in=Job.TERMINAL_STATUSES).count()
    if active:
        raise ValidationError({"queue": QUEUE_DELETE_ACTIVE_JOBS.format(count=active)})
    finished = jobs.count()
    if finished:
        raise ValidationError({"queue": QUEUE_DELETE_HAS_HISTORY.format(count=finished)})
    queue.delete()


@transaction.atomic
def queue_orders_record(*, orders: Mapping[int, Sequence[int]], at: datetime) -> int:
    """Store the lines the last cycle put the queues' waiting jobs in (queue id -> job ids,
    first first); a queue left out has nobody waiting. Only the lines that changed are written,
    one row per queue: a cycle that moves nothing writes nothing. Returns the rows written."""
    packed = {queue_id: QueueOrder.pack(ids) for queue_id, ids in orders.items() if ids}
    digests = {
        queue_id: hashlib.blake2b(data, digest_size=16).hexdigest()
        for queue_id, data in packed.items()
    }
    stored = dict(QueueOrder.objects.values_list("queue_id", "digest"))
    gone = [queue_id for queue_id in stored if queue_id not in packed]
    if gone:
        QueueOrder.objects.filter(queue_id__in=gone).delete()
    changed = [
        QueueOrder(queue_id=queue_id, job_ids=data, digest=digests[queue_id], recorded_at=at)
        for queue_id, data in sorted(packed.items())
        if stored.get(queue_id) != digests[queue_id]
    ]
    QueueOrder.objects.bulk_create(
        changed,
        update_conflicts=True,
        unique_fields=["queue"],
        update_fields=["job_ids", "digest", "recorded_at"],
    )
    return len(gone) + len(changed)


@transaction.atomic
def queue_default_set(
    *,
    tenant: Tenant,
    queue: str | None,
    actor: AbstractBaseUser | AnonymousUser | None,
    username: str | None = None,
) -> Queue | None:
    """Set (None: clear) the queue where a Volcano manifest without spec.queue goes: the
    tenant's, or with `username` that member's own (portal.queues.selectors.queue_default).
    `queue` is one of the tenant's queues, by name or id. A lead of the tenant or a site admin;
    `actor=None` is the system. Returns the queue set."""
    if actor is not None and not can_manage_queues_of(actor, tenant):
        raise PermissionDenied(QUEUE_DEFAULT_FORBIDDEN)
    found = None
    if queue is not None:
        lookup = {"pk": pk} if (pk := parse_id(queue)) is not None else {"name": queue}
        found = Queue.objects.filter(tenant=tenant, **lookup).first()
        if found is None:
            message = QUEUE_DEFAULT_OTHER_TENANT.format(queue=queue, tenant=tenant.name)
            raise ValidationError({"queue": [message]})
    if username is None:
        Tenant.objects.filter(pk=tenant.pk).update(default_queue=found)
        tenant.default_queue = found
        return found
    members = Membership.objects.filter(tenant=tenant, user__username=username)
    if not members.update(default_queue=found):
        message = QUEUE_DEFAULT_NOT_A_MEMBER.format(user=username, tenant=tenant.name)
        raise ValidationError({"user": [message]})
    return found
