"""DRF permission classes over the access rules; the decisions themselves live in the access
modules (portal.common.access, portal.<app>.access)."""

from collections.abc import Callable
from typing import Any

from rest_framework.permissions import BasePermission

from portal.common.access import AnyUser

SITE_ADMIN_REQUIRED = "This endpoint is for site admins."


def allowed_by(rule: Callable[[AnyUser], bool], message: str) -> type[BasePermission]:
    """A permission class that lets through the users `rule` allows; 403 with `message`."""

    class Allowed(BasePermission):
        def has_permission(self, request: Any, view: Any) -> bool:
            return rule(request.user)

    Allowed.message = message
    Allowed.__name__ = Allowed.__qualname__ = f"Allowed_{rule.__name__}"
    return Allowed
