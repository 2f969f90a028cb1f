"""The admin's tenant page: a tenant's cluster policy changes through tenant_policy_update
(audited, the jobs the new policy refuses quarantined and counted in a message), not by a
plain save."""

from http import HTTPStatus

import pytest
from django.test import Client

from portal.jobs.models import Job
from portal.tenants.models import TenantChange
from tests.factories import JobFactory, JobTaskFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(db):
    client = Client()
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    return client


def _body(tenant, **changes):
    body = {
        "name": tenant.name,
        "display_name": tenant.display_name,
        "security_level": tenant.security_level,
        "allowed_tolerations": "[]",
        "allowed_priority_classes": "[]",
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
        "_save": "Save",
    }
    return body | changes


def test_a_stricter_level_is_audited_and_quarantines_what_it_refuses(admin_client):
    tenant = TenantFactory(name="hpc", security_level="privileged")
    job = JobFactory(queue__tenant=tenant)
    privileged = {"privileged": True}
    container = {"name": "c", "image": "trainer:1", "securityContext": privileged}
    JobTaskFactory(job=job, pod_template={"spec": {"containers": [container]}})
    url = f"/admin/tenants/tenant/{tenant.pk}/change/"
    response = admin_client.post(url, _body(tenant, security_level="baseline"), follow=True)
    assert response.status_code == HTTPStatus.OK
    assert f"1 job(s) of {tenant} quarantined: the new policy refuses them (ids {job.pk})." in [
        str(message) for message in response.context["messages"]
    ]
    tenant.refresh_from_db()
    assert tenant.security_level == "baseline"
    change = TenantChange.objects.get(tenant=tenant)
    assert (change.field, change.old_value, change.new_value) == (
        "security_level",
        "privileged",
        "baseline",
    )
    job.refresh_from_db()
    assert job.status == Job.Status.QUARANTINED
    assert "may not be true at pod security level baseline" in job.pending_reason


def test_a_bad_list_is_refused_on_its_field(admin_client):
    tenant = TenantFactory(name="hpc")
    url = f"/admin/tenants/tenant/{tenant.pk}/change/"
    body = _body(tenant, allowed_tolerations='[{"operator": "Maybe"}]')
    response = admin_client.post(url, body)
    assert response.status_code == HTTPStatus.OK
    assert "allowed_tolerations" in response.context["adminform"].form.errors
    assert not TenantChange.objects.exists()
