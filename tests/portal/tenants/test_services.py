import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError

from portal.jobs.models import Job
from portal.tenants.models import Membership, TenantChange
from portal.tenants.services import (
    membership_delete,
    membership_set,
    tenant_create,
    tenant_get_or_create,
    tenant_policy_update,
    user_create,
    user_password_set,
)
from tests.factories import JobFactory, JobTaskFactory, TenantFactory, UserFactory

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


class TestTenantPolicyUpdate:
    """What a tenant's jobs may do on the cluster is a site admin's to change: audited, and
    the jobs the narrower policy refuses are quarantined."""

    def test_only_a_site_admin_changes_it(self, nlp, lead):
        with pytest.raises(PermissionDenied):
            tenant_policy_update(tenant=nlp, actor=lead, security_level="privileged")
        nlp.refresh_from_db()
        assert nlp.security_level == "baseline"

    def test_each_change_is_audited(self, nlp, staff):
        tenant_policy_update(
            tenant=nlp,
            actor=staff,
            security_level="restricted",
            allowed_priority_classes=["batch-low"],
        )
        nlp.refresh_from_db()
        assert (nlp.security_level, nlp.allowed_priority_classes) == ("restricted", ["batch-low"])
        rows = {
            (c.field, c.old_value, c.new_value) for c in TenantChange.objects.filter(tenant=nlp)
        }
        assert rows == {
            ("security_level", "baseline", "restricted"),
            ("allowed_priority_classes", "[]", '["batch-low"]'),
        }

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("security_level", "root"),
            ("allowed_priority_classes", ["Not A Name"]),
            ("allowed_tolerations", [{"operator": "Maybe"}]),
        ],
    )
    def test_a_bad_value_is_refused_naming_the_field(self, nlp, staff, field, value):
        with pytest.raises(ValidationError) as info:
            tenant_policy_update(tenant=nlp, actor=staff, **{field: value})
        assert field in info.value.message_dict
        assert not TenantChange.objects.exists()

    def test_the_quota_is_not_changed_here(self, nlp, staff):
        with pytest.raises(ValidationError) as info:
            tenant_policy_update(tenant=nlp, actor=staff, weight=9)
        assert "weight" in info.value.message_dict

    def test_a_stricter_level_quarantines_the_jobs_it_refuses(self, nlp, nlp_queue, staff):
        job = JobFactory(queue=nlp_queue)
        JobTaskFactory(
            job=job,
            pod_template={"spec": {"containers": [{"name": "c", "image": "trainer:1"}]}},
        )
        assert tenant_policy_update(tenant=nlp, actor=staff, security_level="baseline") == []
        held = tenant_policy_update(tenant=nlp, actor=staff, security_level="restricted")
        assert held == []  # the portal sets what restricted needs; nothing asked otherwise
        task = job.tasks.get()
        task.pod_template["spec"]["containers"][0]["securityContext"] = {"runAsUser": 0}
        task.save()
        tenant_policy_update(tenant=nlp, actor=staff, security_level="baseline")
        assert tenant_policy_update(tenant=nlp, actor=staff, security_level="restricted") == [
            job.pk
        ]
        job.refresh_from_db()
        assert job.status == Job.Status.QUARANTINED
        assert "runAsUser: may not be 0 (root) at pod security level restricted" in (
            job.pending_reason
        )
