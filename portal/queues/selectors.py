from array import array
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet
from django.shortcuts import get_object_or_404

from portal.common.ids import parse_id
from portal.tenants.models import Membership
from portal.tenants.selectors import tenant_get

from .access import can_manage_queues_of, editable_queues, visible_queue_get, visible_queues
from .models import Queue, QueueChange, QueueOrder

QUEUE_NOT_FOUND = "no queue {ref} that you can see"
# Volcano's webhook puts a job without a queue in this one (mutate_job.go DefaultQueue).
VOLCANO_DEFAULT_QUEUE = "default"
DEFAULT_OF_MEMBER = "your default queue in tenant {tenant}, set by its leads"
DEFAULT_OF_TENANT = "the default queue of tenant {tenant}"
DEFAULT_BY_NAME = "the queue named default, as Volcano would"
NO_DEFAULT_QUEUE = (
    "no queue given, and none to default to: name one (a lead of your tenant can set a "
    "default queue for the tenant or for you)"
)
DEFAULTS_AMBIGUOUS = "no queue given, and {what} ({queues}): name one"


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


@dataclass(frozen=True)
class DefaultQueue:
    """Where a job that names no queue goes (`queue`, and `why` in words), or `error`."""

    queue: Queue | None
    why: str = ""
    error: str = ""


def queue_default(*, user: AbstractBaseUser | AnonymousUser) -> DefaultQueue:
    """The queue a Volcano manifest without spec.queue goes to: the default a lead set for
    the submitter, else their tenant's default, else a queue of theirs named `default` (where
    upstream's webhook puts it). Defaults in two of the user's tenants are not guessed between."""
    rows: list[tuple[int | None, int | None]] = []
    if user.is_authenticated and user.is_active:
        rows = list(
            Membership.objects.filter(user_id=user.pk)
            .filter(Q(default_queue__isnull=False) | Q(tenant__default_queue__isnull=False))
            .values_list("default_queue_id", "tenant__default_queue_id")
        )
    own = {member for member, _ in rows if member is not None}
    if own:
        return _the_one(own, DEFAULT_OF_MEMBER, "you have a default queue in several tenants")
    if rows:
        return _the_one(
            {t for _, t in rows if t is not None},
            DEFAULT_OF_TENANT,
            "several of your tenants have a default queue",
        )
    queue = queue_lookup(user=user, ref=VOLCANO_DEFAULT_QUEUE)
    if queue is not None:
        return DefaultQueue(queue, DEFAULT_BY_NAME)
    return DefaultQueue(None, error=NO_DEFAULT_QUEUE)


def _the_one(queue_ids: set[int], why: str, what: str) -> DefaultQueue:
    queues = list(Queue.objects.filter(pk__in=queue_ids).select_related("tenant").order_by("name"))
    if len(queues) != 1:
        names = ", ".join(queue.name for queue in queues)
        return DefaultQueue(None, error=DEFAULTS_AMBIGUOUS.format(what=what, queues=names))
    return DefaultQueue(queues[0], why.format(tenant=queues[0].tenant.name))


@dataclass(frozen=True)
class TenantDefaults:
    """A tenant's default queue and its members' own, as `user` may see them: a lead or an
    admin sees every member's, a member their own."""

    tenant: str | None
    members: dict[str, str | None]


def tenant_defaults(*, user: AbstractBaseUser | AnonymousUser, tenant_id: int) -> TenantDefaults:
    tenant = tenant_get(user=user, tenant_id=tenant_id)
    default = Queue.objects.filter(pk__in=[tenant.default_queue_id]).values_list("name", flat=True)
    members = Membership.objects.filter(tenant=tenant).order_by("user__username")
    if not can_manage_queues_of(user, tenant):
        members = members.filter(user__pk__in=[user.pk])
    return TenantDefaults(
        tenant=default.first(),
        members=dict(members.values_list("user__username", "default_queue__name")),
    )
