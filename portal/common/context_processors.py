from typing import Any

from django.http import HttpRequest

from portal.common.access import is_site_admin, lead_tenants, member_tenants


def roles(request: HttpRequest) -> dict[str, Any]:
    """Role flags for the navigation bar."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"is_site_admin": False, "lead_tenants": [], "member_tenants": []}
    return {
        "is_site_admin": is_site_admin(user),
        "lead_tenants": list(lead_tenants(user).order_by("name")),
        "member_tenants": list(member_tenants(user).order_by("name")),
    }
