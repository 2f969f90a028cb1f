"""Who belongs to which tenant, in which role, and what that opens (see portal.common.access)."""

from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse

from portal.common.access import FORBIDDEN_ROLE, ROLE_LEAD, ROLE_MEMBER, AnyUser, is_site_admin

from .models import Membership, Tenant


def _memberships(user: AnyUser, **lookups: Any) -> QuerySet[Membership]:
    """The user's memberships (none for anonymous or inactive users), narrowed by `lookups` in
    the same filter call: each call compiles anew, and job creation asks on every request."""
    if not user.is_authenticated:
        return Membership.objects.none()
    if not user.is_active:
        return Membership.objects.none()
    return Membership.objects.filter(user_id=user.pk, **lookups)


def member_tenants(user: AnyUser) -> QuerySet[Tenant]:
    """Tenants the user belongs to in any role."""
    return Tenant.objects.filter(pk__in=_memberships(user).values("tenant_id"))


def member_of(user: AnyUser, *, tenant: str) -> Q:
    """The rows whose tenant (reached by the relation path `tenant`, e.g. "tenant") has `user`
    as a member, as one join on the memberships: the same rows as `tenant__in=
    member_tenants(user)`, without compiling two subqueries on every lookup. A user holds one
    membership per tenant, so no row comes twice."""
    if not user.is_authenticated or not user.is_active:
        return Q(pk__in=[])
    return Q(**{f"{tenant}__memberships__user": user})


def lead_tenants(user: AnyUser) -> QuerySet[Tenant]:
    """Tenants the user leads."""
    leads = _memberships(user).filter(role=Membership.Role.LEAD)
    return Tenant.objects.filter(pk__in=leads.values("tenant_id"))


def is_member(user: AnyUser, tenant: Tenant) -> bool:
    return _memberships(user, tenant_id=tenant.pk).exists()


def is_lead(user: AnyUser, tenant: Tenant) -> bool:
    return _memberships(user, tenant_id=tenant.pk, role=Membership.Role.LEAD).exists()


def visible_tenants(user: AnyUser) -> QuerySet[Tenant]:
    if is_site_admin(user):
        return Tenant.objects.all()
    return member_tenants(user)


def can_edit_tenant(user: AnyUser, tenant: Tenant) -> bool:
    """A tenant's quota is the site's to give: admins only (its leads split it)."""
    return is_site_admin(user)


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
