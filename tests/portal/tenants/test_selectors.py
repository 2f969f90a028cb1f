import pytest
from django.contrib.auth.models import AnonymousUser

from portal.tenants.selectors import membership_list, tenant_list

pytestmark = pytest.mark.django_db


def test_tenant_list_scoped(researcher, lead, staff, nlp, vision):
    assert list(tenant_list(user=researcher)) == [nlp]
    assert list(tenant_list(user=lead)) == [nlp, vision]
    assert list(tenant_list(user=staff)) == [nlp, vision]
    assert list(tenant_list(user=AnonymousUser())) == []


def test_membership_list(lead, nlp, vision):
    assert [(m.tenant.name, m.role) for m in membership_list(user=lead)] == [
        ("nlp", "lead"),
        ("vision", "researcher"),
    ]
    assert list(membership_list(user=AnonymousUser())) == []
