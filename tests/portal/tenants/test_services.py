import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from portal.tenants.models import Membership
from portal.tenants.services import (
    membership_delete,
    membership_set,
    tenant_create,
    tenant_get_or_create,
    user_create,
    user_password_set,
)
from tests.factories import TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_tenant_create_validates_name():
    with pytest.raises(ValidationError) as info:
        tenant_create(name="Not Valid")
    assert set(info.value.message_dict) == {"name"}
    assert tenant_create(name="nlp", display_name="NLP").name == "nlp"


def test_tenant_name_unique():
    tenant_create(name="nlp")
    with pytest.raises(ValidationError) as info:
        tenant_create(name="nlp")
    assert set(info.value.message_dict) == {"name"}


def test_tenant_get_or_create():
    tenant, created = tenant_get_or_create(name="nlp")
    again, created_again = tenant_get_or_create(name="nlp")
    assert (created, created_again, again) == (True, False, tenant)


def test_membership_set_creates_then_updates_role():
    user, tenant = UserFactory(), TenantFactory()
    membership_set(user=user, tenant=tenant, role=Membership.Role.RESEARCHER)
    membership_set(user=user, tenant=tenant, role=Membership.Role.LEAD)
    assert Membership.objects.get().role == Membership.Role.LEAD


def test_membership_invalid_role():
    with pytest.raises(ValidationError) as info:
        membership_set(user=UserFactory(), tenant=TenantFactory(), role="owner")
    assert set(info.value.message_dict) == {"role"}


def test_user_in_several_tenants():
    user = UserFactory()
    for name in ("a", "b"):
        membership_set(user=user, tenant=TenantFactory(name=name), role="researcher")
    assert user.memberships.count() == 2
    membership_delete(user=user, tenant=TenantFactory(name="a"))
    assert user.memberships.count() == 1


def test_user_create():
    user = user_create(username="alice", password="s3cret-pass")
    assert user.check_password("s3cret-pass")
    assert user_create(username="bot", password=None).has_usable_password() is False


@pytest.mark.parametrize("weak", ["short1", "password123", "12345678901", "alice-smith"])
def test_user_create_refuses_a_weak_password_on_the_password_field(weak):
    with pytest.raises(ValidationError) as error:
        user_create(username="alice-smith", password=weak)
    assert list(error.value.message_dict) == ["password"]
    assert not get_user_model().objects.filter(username="alice-smith").exists()


def test_user_password_set_refuses_a_weak_password_and_keeps_the_old_one():
    user = user_create(username="alice", password="s3cret-pass")
    with pytest.raises(ValidationError) as error:
        user_password_set(user=user, password="1234")
    assert list(error.value.message_dict) == ["password"]
    user.refresh_from_db()
    assert user.check_password("s3cret-pass")
