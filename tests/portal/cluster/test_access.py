"""portal.cluster.access: which nodes a user sees."""

import pytest
from django.contrib.auth.models import AnonymousUser

from portal.cluster import access as node_access

pytestmark = pytest.mark.django_db


def test_nodes_are_seen_by_members_of_any_tenant_and_admins_only(
    researcher, outsider, staff, user, cluster
):
    for member in (researcher, outsider, staff):
        assert node_access.visible_nodes(member).count() == 4
    assert not node_access.visible_nodes(user).exists()  # signed in, in no tenant
    assert not node_access.visible_nodes(AnonymousUser()).exists()
    researcher.is_active = False
    assert not node_access.visible_nodes(researcher).exists()
