"""Template context every page gets. Project level (beside urls.py), not in ``portal.common``:
it reads the tenants' memberships, and ``portal.common`` stays below the apps."""

from typing import Any

from django.http import HttpRequest

from portal.common.access import ROLE_LEAD, ROLE_MEMBER, is_site_admin
from portal.tenants.access import has_role, lead_tenants


def roles(request: HttpRequest) -> dict[str, Any]:
    """What the navigation bar shows: the user's roles, and the pages open to them (decided by
    the same rule as the pages' own `RoleRequiredMixin`)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {
            "is_site_admin": False,
            "lead_tenants": [],
            "can_submit_jobs": False,
            "can_read_usage": False,
        }
    return {
        "is_site_admin": is_site_admin(user),
        "lead_tenants": list(lead_tenants(user).order_by("name")),
        "can_submit_jobs": has_role(user, ROLE_MEMBER),
        "can_read_usage": has_role(user, ROLE_LEAD),
    }
