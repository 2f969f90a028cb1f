"""Who may see and do what: the only place roles are decided.

Roles: site admin (`is_staff`), tenant lead, tenant researcher (see tenants.Membership).
Each helper checks one condition per line so tests can cover every branch. Views and
services never test roles themselves; they call these helpers, and they fetch objects
through the scoped querysets so another tenant's ids give 404, never data.
"""

import functools
from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from portal.cluster.models import Node
from portal.jobs.models import Job
from portal.queues.models import Queue
from portal.scheduling.models import PreemptionEvent
from portal.tenants.models import Membership, Tenant

from .rows import column, fetch_related, select_list, table

AnyUser = AbstractBaseUser | AnonymousUser

ROLE_MEMBER = "member"
ROLE_LEAD = "lead"
ROLE_STAFF = "staff"

FORBIDDEN_ROLE = "This page needs the {role} role."
# What pages show in place of the queues and jobs of tenants the user is not a member of.
OTHER_TENANTS = "other tenants"


def is_site_admin(user: AnyUser) -> bool:
    if not user.is_authenticated:
        return False
    if not user.is_active:
        return False
    return bool(user.is_staff)


def _memberships(user: AnyUser) -> QuerySet[Membership]:
    if not user.is_authenticated:
        return Membership.objects.none()
    if not user.is_active:
        return Membership.objects.none()
    return Membership.objects.filter(user=user)


def member_tenants(user: AnyUser) -> QuerySet[Tenant]:
    """Tenants the user belongs to in any role."""
    return Tenant.objects.filter(pk__in=_memberships(user).values("tenant_id"))


def lead_tenants(user: AnyUser) -> QuerySet[Tenant]:
    """Tenants the user leads."""
    leads = _memberships(user).filter(role=Membership.Role.LEAD)
    return Tenant.objects.filter(pk__in=leads.values("tenant_id"))


def is_member(user: AnyUser, tenant: Tenant) -> bool:
    return _memberships(user).filter(tenant=tenant).exists()


def is_lead(user: AnyUser, tenant: Tenant) -> bool:
    return _memberships(user).filter(tenant=tenant, role=Membership.Role.LEAD).exists()


def visible_tenants(user: AnyUser) -> QuerySet[Tenant]:
    if is_site_admin(user):
        return Tenant.objects.all()
    return member_tenants(user)


def visible_queues(user: AnyUser) -> QuerySet[Queue]:
    if is_site_admin(user):
        return Queue.objects.all()
    return Queue.objects.filter(tenant__in=member_tenants(user))


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


def visible_jobs(user: AnyUser) -> QuerySet[Job]:
    if is_site_admin(user):
        return Job.objects.all()
    return Job.objects.filter(tenant__in=member_tenants(user))


def visible_nodes(user: AnyUser) -> QuerySet[Node]:
    """Nodes are shared by every tenant: a member of any tenant sees them all, and so does a
    site admin; a signed-in user who belongs to no tenant sees none."""
    if is_site_admin(user):
        return Node.objects.all()
    if _memberships(user).exists():
        return Node.objects.all()
    return Node.objects.none()


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


def can_edit_tenant(user: AnyUser, tenant: Tenant) -> bool:
    """A tenant's quota is the site's to give: admins only (its leads split it)."""
    return is_site_admin(user)


def can_cancel_job(user: AnyUser, job: Job) -> bool:
    if is_site_admin(user):
        return True
    if not user.is_authenticated:
        return False
    if job.submitter_id == user.pk:
        return True
    return is_lead(user, job.tenant)


def can_release_job(user: AnyUser, job: Job) -> bool:
    """Send a quarantined job back to pending: site admins only (the job's cause is theirs to
    judge). Whether the job is quarantined is the state machine's question, not this one."""
    return is_site_admin(user)


def can_see_evictions(user: AnyUser) -> bool:
    """Who evicted whom, over the whole cluster, is admin information."""
    return is_site_admin(user)


def readable_preemptions(user: AnyUser, events: Iterable[PreemptionEvent]) -> set[int]:
    """Ids of the preemption events whose sentence (both jobs by name) `user` may read: every
    one for a site admin; otherwise those whose victim and preemptor (if any) the user sees."""
    events = list(events)
    if is_site_admin(user):
        return {event.pk for event in events}
    involved = {event.victim_job_id for event in events}
    involved |= {event.preemptor_job_id for event in events if event.preemptor_job_id}
    seen = set(visible_jobs(user).filter(pk__in=involved).values_list("pk", flat=True))
    return {event.pk for event in events if _both_seen(event, seen)}


def _both_seen(event: PreemptionEvent, seen: set[int]) -> bool:
    if event.victim_job_id not in seen:
        return False
    if event.preemptor_job_id is None:
        return True
    return event.preemptor_job_id in seen


def visible_queue_names(user: AnyUser, *, tenant: Tenant | None = None) -> set[str] | None:
    """Names of the queues `user` sees by name (of `tenant` only, if given); None means every
    queue (a site admin over the whole cluster). Other queues' use shows only in totals."""
    if tenant is None and is_site_admin(user):
        return None
    queues = visible_queues(user)
    if tenant is not None:
        queues = queues.filter(tenant=tenant)
    return set(queues.values_list("name", flat=True))


def has_role(user: AnyUser, role: str) -> bool:
    """`member`: belongs to a tenant; `lead`: leads one; `staff`: site admin. Staff has all."""
    if is_site_admin(user):
        return True
    if role == ROLE_MEMBER:
        return _memberships(user).exists()
    if role == ROLE_LEAD:
        return _memberships(user).filter(role=Membership.Role.LEAD).exists()
    return False


class RoleRequiredMixin(LoginRequiredMixin):
    """Anonymous users go to the login page; users without `required_role` get 403."""

    required_role: str = ROLE_MEMBER

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return self.handle_no_permission()
        if not has_role(request.user, self.required_role):
            raise PermissionDenied(FORBIDDEN_ROLE.format(role=self.required_role))
        return super().dispatch(request, *args, **kwargs)


def staff_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Function-view decorator: login page for anonymous users, 403 for non-staff."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not is_site_admin(request.user):
            raise PermissionDenied(FORBIDDEN_ROLE.format(role=ROLE_STAFF))
        return view(request, *args, **kwargs)

    return wrapper
