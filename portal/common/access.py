"""Who may see and do what: the rules that need nothing but the user, and the names every
app's rules share.

Roles: site admin (`is_staff`), tenant lead, tenant researcher (see tenants.Membership). The
rules over an app's objects live in that app's `access.py` (tenants, queues, jobs, cluster,
scheduling), one condition per line so tests can cover every branch. Views, services and
templates never test roles themselves: they call those functions (templates get the answer
as a flag from the view), and they fetch objects through the scoped querysets so another
tenant's ids give 404, never data.
"""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

AnyUser = AbstractBaseUser | AnonymousUser

ROLE_MEMBER = "member"
ROLE_LEAD = "lead"
ROLE_STAFF = "staff"

FORBIDDEN_ROLE = "This page needs the {role} role."
# What pages show in place of the queues and jobs of tenants the user is not a member of.
OTHER_TENANTS = "other tenants"
# What they show for GPUs held by pods the portal did not start (other teams, other schedulers).
OTHER_WORKLOADS = "other workloads"


def is_site_admin(user: AnyUser) -> bool:
    if not user.is_authenticated:
        return False
    if not user.is_active:
        return False
    return bool(user.is_staff)


def rule_required(
    rule: Callable[[AnyUser], bool], role: str
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Function-view decorator over one access rule (a `can_*` of an app's access.py): login
    page for anonymous users, 403 naming `role` for users the rule refuses."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not rule(request.user):
                raise PermissionDenied(FORBIDDEN_ROLE.format(role=role))
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


staff_required = rule_required(is_site_admin, ROLE_STAFF)
