"""portal.tenants.access: memberships and roles."""

import pytest

from portal.common import access
from portal.queues import access as queue_access
from portal.tenants import access as tenant_access

pytestmark = pytest.mark.django_db


def test_lead_and_member_tenants(lead, nlp, vision):
    assert list(tenant_access.lead_tenants(lead)) == [nlp]
    assert set(tenant_access.member_tenants(lead)) == {nlp, vision}


@pytest.mark.parametrize(
    ("who", "role", "expected"),
    [
        ("researcher", access.ROLE_MEMBER, True),
        ("researcher", access.ROLE_LEAD, False),
        ("researcher", access.ROLE_STAFF, False),
        ("lead", access.ROLE_LEAD, True),
        ("lead", access.ROLE_STAFF, False),
        ("staff", access.ROLE_STAFF, True),
        ("staff", access.ROLE_LEAD, True),
    ],
)
def test_has_role(request, who, role, expected):
    assert tenant_access.has_role(request.getfixturevalue(who), role) is expected


def test_user_without_tenant_has_no_member_role(user):
    assert tenant_access.has_role(user, access.ROLE_MEMBER) is False
    assert not queue_access.visible_queues(user).exists()


@pytest.mark.parametrize(
    "who", ["researcher", "lead", "outsider", "staff", "inactive", "anonymous"]
)
def test_member_of_selects_the_rows_of_member_tenants(request, who, nlp_queue, vision_queue):
    from django.contrib.auth.models import AnonymousUser

    from portal.queues.models import Queue

    if who == "anonymous":
        user = AnonymousUser()
    elif who == "inactive":
        user = request.getfixturevalue("lead")
        user.is_active = False
    else:
        user = request.getfixturevalue(who)
    joined = Queue.objects.filter(tenant_access.member_of(user, tenant="tenant"))
    nested = Queue.objects.filter(tenant__in=tenant_access.member_tenants(user))
    assert sorted(joined.values_list("pk", flat=True)) == sorted(
        nested.values_list("pk", flat=True)
    )
