"""/api/v1/tenants/: quota with the queues' field names, use and share; admins change it."""

from http import HTTPStatus

import pytest

from portal.tenants.models import TenantChange, TenantUsageSample
from portal.tenants.quota import QUOTA_FIELDS
from tests.factories import PlacementFactory, QueueFactory

pytestmark = pytest.mark.django_db


def test_a_tenant_shows_its_quota_use_and_share(api_for, nlp, nlp_queue, cluster, staff):
    nlp_queue.guarantee_gpus = 4
    nlp_queue.save()
    api_for("staff").patch(f"/api/v1/tenants/{nlp.pk}/", {"guarantee_gpus": 8}, format="json")
    PlacementFactory(task__job__queue=nlp_queue, task__gpus=3, node=cluster[0])
    TenantUsageSample.objects.create(tenant=nlp, gpus_allocated=3, gpus_deserved=12.5)

    body = api_for("researcher").get(f"/api/v1/tenants/{nlp.pk}/").json()

    assert {field: body[field] for field in ("guarantee_gpus", "weight", "capability_gpus")} == {
        "guarantee_gpus": 8,
        "weight": 1,
        "capability_gpus": None,
    }
    assert set(QUOTA_FIELDS) <= set(body)
    assert (body["role"], body["queues"], body["queues_guarantee_gpus"]) == (
        "researcher",
        ["nlp-train"],
        4,
    )
    assert (body["gpus_allocated"], body["gpus_deserved"], body["can_edit"]) == (3, 12.5, False)
    assert body["links"]["changes"] == f"/api/v1/tenants/{nlp.pk}/changes/"


def test_admin_patches_with_the_queue_field_names_and_it_is_audited(api_for, nlp, cluster):
    client = api_for("staff")
    response = client.patch(
        f"/api/v1/tenants/{nlp.pk}/",
        {"guarantee_gpus": 12, "capability_gpus": 24, "borrowing_limit_gpus": 4},
        format="json",
    )
    assert response.status_code == HTTPStatus.OK, response.content
    assert (response.json()["guarantee_gpus"], response.json()["can_edit"]) == (12, True)
    changes = client.get(f"/api/v1/tenants/{nlp.pk}/changes/").json()["results"]
    assert {(c["field"], c["old_value"], c["new_value"]) for c in changes} == {
        ("guarantee_gpus", "0", "12"),
        ("capability_gpus", "", "24"),
        ("borrowing_limit_gpus", "", "4"),
    }
    assert {c["changed_by"] for c in changes} == {"siteadmin"}


def test_a_guarantee_below_the_queues_is_a_400_naming_the_numbers(api_for, nlp, cluster):
    client = api_for("staff")
    client.patch(f"/api/v1/tenants/{nlp.pk}/", {"guarantee_gpus": 48 - 16}, format="json")
    QueueFactory(tenant=nlp, name="nlp-train", guarantee_gpus=16)
    QueueFactory(tenant=nlp, name="nlp-dev", guarantee_gpus=16)
    before = TenantChange.objects.count()

    response = client.patch(f"/api/v1/tenants/{nlp.pk}/", {"guarantee_gpus": 20}, format="json")

    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["errors"] == {
        "guarantee_gpus": [
            "guarantee_gpus: 20 GPUs is below the sum of nlp's queue guarantees, "
            "32 GPUs (nlp-dev 16 GPUs + nlp-train 16 GPUs)"
        ]
    }
    nlp.refresh_from_db()
    assert nlp.guarantee_gpus == 32
    assert TenantChange.objects.count() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"guarantee_gpus": -1}, "guarantee_gpus"),
        ({"guarantee_gpus": 2**40}, "guarantee_gpus"),
        ({"weight": 0}, "weight"),
        ({"weight": 70000}, "weight"),
        ({"capability_cpu_millis": 2**70}, "capability_cpu_millis"),
        ({"guarantee_gpus": "lots"}, "guarantee_gpus"),
        ({"name": "renamed"}, "name"),
        ({"priority": 3}, "priority"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(api_for, nlp, cluster, body, field):
    response = api_for("staff").patch(f"/api/v1/tenants/{nlp.pk}/", body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert field in response.json()["errors"]
    assert not TenantChange.objects.exists()


def test_a_lead_cannot_raise_its_own_tenants_quota(api_for, nlp, cluster):
    response = api_for("lead").patch(
        f"/api/v1/tenants/{nlp.pk}/", {"guarantee_gpus": 32}, format="json"
    )
    assert response.status_code == HTTPStatus.FORBIDDEN
    nlp.refresh_from_db()
    assert nlp.guarantee_gpus == 0


def test_a_queue_patch_beyond_its_tenant_is_a_400(api_for, nlp, nlp_queue, cluster):
    api_for("staff").patch(f"/api/v1/tenants/{nlp.pk}/", {"guarantee_gpus": 8}, format="json")
    response = api_for("lead").patch(
        f"/api/v1/queues/{nlp_queue.pk}/", {"guarantee_gpus": 9}, format="json"
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["errors"] == {
        "guarantee_gpus": [
            "guarantee_gpus: nlp's queues would guarantee 9 GPUs (nlp-train 9 GPUs) but "
            "tenant nlp guarantees 8 GPUs"
        ]
    }
