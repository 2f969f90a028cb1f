"""Which nodes a user sees (see portal.common.access)."""

from django.db.models import QuerySet

from portal.common.access import ROLE_MEMBER, AnyUser
from portal.tenants.access import has_role

from .models import Node


def visible_nodes(user: AnyUser) -> QuerySet[Node]:
    """Nodes are shared by every tenant: a member of any tenant sees them all, and so does a
    site admin; a signed-in user who belongs to no tenant sees none."""
    if has_role(user, ROLE_MEMBER):  # true for a site admin too
        return Node.objects.all()
    return Node.objects.none()
