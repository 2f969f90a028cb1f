"""Which queues a user sees, edits and submits to (see portal.common.access)."""

import functools

from django.db import connection
from django.db.models import QuerySet

from portal.common.access import AnyUser, is_site_admin
from portal.common.rows import column, fetch_related, select_list, table
from portal.tenants.access import is_lead, is_member, lead_tenants, member_of
from portal.tenants.models import Membership, Tenant

from .models import Queue


def visible_queues(user: AnyUser) -> QuerySet[Queue]:
    if is_site_admin(user):
        return Queue.objects.all()
    return Queue.objects.filter(member_of(user, tenant="tenant"))


def visible_queue_get(
    user: AnyUser, *, pk: int | None = None, name: str | None = None
) -> Queue | None:
    """The queue with this id or name that `user` may see, with its tenant loaded, or None.

    Same answer as `visible_queues(user).filter(...)`, by one hand-written statement (see
    portal/common/rows.py): job creation runs it on every request.
    """
    if (pk is None) == (name is None):
        raise TypeError("visible_queue_get() takes pk or name")
    admin = is_site_admin(user)
    if not admin and (not user.is_authenticated or not user.is_active):
        return None
    by = "pk" if pk is not None else "name"
    sql = _queue_lookup_sql(connection.vendor, by=by, through_membership=not admin)
    params = [] if admin else [user.pk]
    params.append(pk if pk is not None else name)
    found = fetch_related(sql, params, (Queue, None), (Tenant, "tenant"))
    if found is None:
        return None
    return found[0]


@functools.cache
def _queue_lookup_sql(vendor: str, *, by: str, through_membership: bool) -> str:
    queue_tenant = column(Queue, "tenant")
    sql = (
        f"SELECT {select_list(Queue)}, {select_list(Tenant)} FROM {table(Queue)}"  # noqa: S608 - quoted model names; values are bound parameters
        f" INNER JOIN {table(Tenant)} ON {queue_tenant} = {column(Tenant, 'id')}"
    )
    if through_membership:
        sql += (
            f" INNER JOIN {table(Membership)} ON {column(Membership, 'tenant')} = {queue_tenant}"
            f" AND {column(Membership, 'user')} = %s"
        )
    return f"{sql} WHERE {column(Queue, 'id' if by == 'pk' else by)} = %s"


def editable_queues(user: AnyUser) -> QuerySet[Queue]:
    if is_site_admin(user):
        return Queue.objects.all()
    return Queue.objects.filter(tenant__in=lead_tenants(user))


def visible_queue_names(user: AnyUser, *, tenant: Tenant | None = None) -> set[str] | None:
    """Names of the queues `user` sees by name (of `tenant` only, if given); None means every
    queue (a site admin over the whole cluster). Other queues' use shows only in totals."""
    if tenant is None and is_site_admin(user):
        return None
    queues = visible_queues(user)
    if tenant is not None:
        queues = queues.filter(tenant=tenant)
    return set(queues.values_list("name", flat=True))


def can_submit_to(user: AnyUser, queue: Queue) -> bool:
    if is_site_admin(user):
        return True
    return is_member(user, queue.tenant)


def can_manage_queues_of(user: AnyUser, tenant: Tenant) -> bool:
    """Create queues in `tenant` and edit them: a lead of that tenant or staff."""
    if is_site_admin(user):
        return True
    return is_lead(user, tenant)


def can_edit_queue(user: AnyUser, queue: Queue) -> bool:
    return can_manage_queues_of(user, queue.tenant)
