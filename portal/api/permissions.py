"""Tiny DRF permission classes; the decisions themselves live in the access modules (portal.common.access, portal.<app>.access)."""

from typing import Any

from rest_framework.permissions import BasePermission

from portal.common.access import is_site_admin

SITE_ADMIN_REQUIRED = "This endpoint is for site admins."


class IsSiteAdmin(BasePermission):
    message = SITE_ADMIN_REQUIRED

    def has_permission(self, request: Any, view: Any) -> bool:
        return is_site_admin(request.user)
