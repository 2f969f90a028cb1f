from array import array

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from portal.common.ids import parse_id

from .access import editable_queues, visible_queue_get, visible_queues
from .models import Queue, QueueChange, QueueOrder

QUEUE_NOT_FOUND = "no queue {ref} that you can see"


def queue_list(
    *, user: AbstractBaseUser | AnonymousUser, tenant_id: int | None = None
) -> QuerySet[Queue]:
    queues = visible_queues(user).select_related("tenant")
    if tenant_id is not None:
        queues = queues.filter(tenant_id=tenant_id)
    return queues.order_by("tenant__name", "name")


def queue_lookup(*, user: AbstractBaseUser | AnonymousUser, ref: str) -> Queue | None:
    """The queue `user` may see, by id (digits) or by name (names are unique), with its tenant
    loaded; None when there is none: how a job names its queue in the API and a manifest."""
    lookup = {"pk": pk} if (pk := parse_id(ref)) is not None else {"name": ref}
    return visible_queue_get(user, **lookup)


def queue_list_editable(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Queue]:
    return editable_queues(user).select_related("tenant").order_by("tenant__name", "name")


def queue_get(*, user: AbstractBaseUser | AnonymousUser, queue_id: int) -> Queue:
    """The queue if the user may see it; Http404 otherwise (never another tenant's data)."""
    return get_object_or_404(visible_queues(user).select_related("tenant"), pk=queue_id)


def queue_change_list(*, queue: Queue, limit: int = 50) -> QuerySet[QueueChange]:
    return queue.changes.select_related("changed_by").order_by("-changed_at", "-id")[:limit]


def queue_order_job_ids(*, queue_id: int) -> "array[int]":
    """The ids of the queue's waiting jobs in the order the last cycle put them, first first
    (empty when nobody waited)."""
    data = QueueOrder.objects.filter(queue_id=queue_id).values_list("job_ids", flat=True).first()
    return QueueOrder.unpack(data) if data is not None else array("q")
