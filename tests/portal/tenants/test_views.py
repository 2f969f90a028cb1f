"""Tenant pages: members see their tenants' quota and use; admins edit it, with the preview
of every tenant's and queue's share and the audit trail."""

from http import HTTPStatus

import pytest
from django.test import override_settings
from django.urls import reverse

from portal.tenants.models import TenantChange
from tests.factories import JobFactory, JobTaskFactory, PlacementFactory, QueueFactory
from tests.portal.common.pages import tenant_form_data

pytestmark = pytest.mark.django_db


def _quota(tenant, **values):
    for field, value in values.items():
        setattr(tenant, field, value)
    tenant.save()


def test_a_researcher_sees_their_tenants_quota_and_use(researcher_client, nlp, vision, nlp_queue):
    _quota(nlp, guarantee_gpus=12, capability_gpus=24)
    nlp_queue.guarantee_gpus = 8
    nlp_queue.save()
    PlacementFactory(task__job__queue=nlp_queue, task__gpus=3)

    listing = researcher_client.get(reverse("tenants:tenant_list"))
    rows = {quota.tenant.name: quota for quota in listing.context["quotas"]}
    assert list(rows) == ["nlp"]
    assert (rows["nlp"].queues_guarantee_gpus, rows["nlp"].gpus_allocated) == (8, 3)
    assert reverse("tenants:tenant_edit", args=[nlp.pk]) not in listing.content.decode()

    detail = researcher_client.get(reverse("tenants:tenant_detail", args=[nlp.pk]))
    body = detail.content.decode()
    assert detail.status_code == HTTPStatus.OK
    assert "12 GPUs · its queues guarantee 8, 4 unassigned" in body
    assert "24 GPUs" in body
    assert "nlp-train" in body
    queues = body[body.index('id="queues"') :]
    assert "<th>Tenant</th>" not in queues  # every row is this tenant's
    missing = researcher_client.get(reverse("tenants:tenant_detail", args=[vision.pk]))
    assert missing.status_code == HTTPStatus.NOT_FOUND


def test_a_deserved_share_reads_as_the_queue_pages_write_it(researcher_client, nlp, nlp_queue):
    from portal.tenants.models import TenantUsageSample

    PlacementFactory(task__job__queue=nlp_queue, task__gpus=1)
    TenantUsageSample.objects.create(tenant=nlp, gpus_allocated=3, gpus_deserved=16.0)
    listing = researcher_client.get(reverse("tenants:tenant_list")).content.decode()
    assert '<td data-label="Deserves" class="num">16 GPUs</td>' in listing  # not "16.0 GPUs"
    assert '<td data-label="Using now" class="num">1 GPU</td>' in listing  # not "1 GPUs"
    TenantUsageSample.objects.create(tenant=nlp, gpus_allocated=1, gpus_deserved=12.5)
    detail = researcher_client.get(reverse("tenants:tenant_detail", args=[nlp.pk]))
    assert "<dt>Deserves now</dt><dd>12.5 GPUs</dd>" in detail.content.decode()
    assert "<dt>Using now</dt><dd>1 GPU</dd>" in detail.content.decode()  # not "1 GPUs"


@pytest.mark.parametrize("client", ["researcher_client", "lead_client"])
def test_only_admins_reach_the_edit_page(request, client, nlp, vision):
    client = request.getfixturevalue(client)
    url = reverse("tenants:tenant_edit", args=[nlp.pk])
    assert client.get(url).status_code == HTTPStatus.FORBIDDEN
    assert client.post(url, tenant_form_data(nlp, weight=9)).status_code == HTTPStatus.FORBIDDEN
    nlp.refresh_from_db()
    assert nlp.weight == 1
    if client is request.getfixturevalue("researcher_client"):  # not a member of vision
        url = reverse("tenants:tenant_edit", args=[vision.pk])
        assert client.get(url).status_code == HTTPStatus.NOT_FOUND


def test_admin_edits_a_quota_and_the_change_is_listed(staff_client, staff, nlp, cluster):
    url = reverse("tenants:tenant_edit", args=[nlp.pk])
    response = staff_client.post(url, tenant_form_data(nlp, guarantee_gpus=12, weight=2))
    assert response.status_code == HTTPStatus.FOUND
    nlp.refresh_from_db()
    assert (nlp.guarantee_gpus, nlp.weight) == (12, 2)
    assert set(TenantChange.objects.values_list("field", "changed_by")) == {
        ("guarantee_gpus", staff.pk),
        ("weight", staff.pk),
    }
    page = staff_client.get(url).content.decode()
    assert 'id="tenant-changes"' in page
    # the history names the field as the form does, not by its stored name
    assert '<td data-label="Field">Guarantee (GPUs)</td>' in page
    assert '<td data-label="Field">Weight</td>' in page


def test_a_refused_quota_is_shown_on_the_field_and_nothing_is_saved(staff_client, nlp, cluster):
    _quota(nlp, guarantee_gpus=16)
    QueueFactory(tenant=nlp, name="nlp-train", guarantee_gpus=10)
    url = reverse("tenants:tenant_edit", args=[nlp.pk])
    response = staff_client.post(url, tenant_form_data(nlp, guarantee_gpus=6))
    assert response.status_code == HTTPStatus.OK
    assert response.context["form"].errors == {
        "guarantee_gpus": [
            "6 GPUs is below the sum of nlp's queue guarantees, 10 GPUs (nlp-train 10 GPUs)"
        ]
    }
    nlp.refresh_from_db()
    assert nlp.guarantee_gpus == 16
    assert not TenantChange.objects.exists()


def test_preview_shows_every_tenant_and_queue_under_the_proposed_quota(
    staff_client, nlp, vision, nlp_queue, vision_queue, cluster
):
    for queue in (nlp_queue, vision_queue):
        JobTaskFactory(job=JobFactory(queue=queue), replicas=4, gpus=8)
    url = reverse("tenants:tenant_preview", args=[nlp.pk])
    response = staff_client.get(url, tenant_form_data(nlp, weight=3))
    assert response.status_code == HTTPStatus.OK
    rows = {(row["kind"], row["name"]): row for row in response.json()["queues"]}
    # Both want the whole cluster: weights 1:1 split it 16/16, 3:1 into 24/8, and each
    # tenant's only queue follows its tenant.
    assert rows[("tenant", "nlp")]["deserved_now"] == pytest.approx(16)
    assert rows[("tenant", "nlp")]["deserved_after"] == pytest.approx(24)
    assert rows[("queue", "nlp-train")]["deserved_after"] == pytest.approx(24)
    assert rows[("tenant", "vision")]["deserved_after"] == pytest.approx(8)
    assert rows[("tenant", "nlp")]["edited"] is True
    nlp.refresh_from_db()
    assert nlp.weight == 1


def test_preview_refuses_a_bad_value_with_400(staff_client, nlp):
    url = reverse("tenants:tenant_preview", args=[nlp.pk])
    response = staff_client.get(url, tenant_form_data(nlp, weight="0"))
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "weight" in response.json()["errors"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"guarantee_gpus": 6, "capability_gpus": 2}, "may not exceed capability (2"),
        # Its queue guarantees 4: the tenant may not guarantee less.
        ({"guarantee_gpus": 3}, "is below the sum of nlp's queue guarantees"),
        # The cluster has 32 GPUs and vision guarantees 16.
        ({"guarantee_gpus": 20}, "the tenants' guarantees would be 36 GPUs"),
    ],
)
def test_the_preview_shows_what_save_would_refuse_and_no_shares(
    staff_client, nlp, vision, nlp_queue, cluster, overrides, message
):
    _quota(nlp, guarantee_gpus=8)
    _quota(vision, guarantee_gpus=16)
    nlp_queue.guarantee_gpus = 4
    nlp_queue.save()
    url = reverse("tenants:tenant_preview", args=[nlp.pk])
    response = staff_client.get(url, tenant_form_data(nlp, **overrides))
    assert response.status_code == HTTPStatus.BAD_REQUEST
    body = response.json()
    assert "queues" not in body
    (error,) = body["errors"]["guarantee_gpus"]
    assert message in error["message"]
    saved = staff_client.post(
        reverse("tenants:tenant_edit", args=[nlp.pk]), tenant_form_data(nlp, **overrides)
    )
    assert saved.context["form"].errors["guarantee_gpus"] == [error["message"]]
    nlp.refresh_from_db()
    assert nlp.guarantee_gpus == 8


def test_queue_edit_page_shows_the_tenants_quota(lead_client, nlp, nlp_queue, cluster):
    _quota(nlp, guarantee_gpus=12, capability_gpus=20)
    page = lead_client.get(reverse("queues:queue_edit", args=[nlp_queue.pk])).content.decode()
    assert "guarantees 12 GPUs, of which its queues guarantee 0" in page
    assert "all its queues together are capped at 20" in page


def test_the_tenant_page_says_what_its_jobs_may_do_on_the_cluster(
    researcher_client, nlp, nlp_queue
):
    _quota(nlp, security_level="restricted", allowed_priority_classes=["batch-low"])
    nlp_queue.allowed_tolerations = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    nlp_queue.save()
    body = researcher_client.get(reverse("tenants:tenant_detail", args=[nlp.pk])).content.decode()
    section = body[body.index('id="cluster-policy"') :]
    assert "<strong>restricted</strong>" in section
    assert "fail to start under it: vLLM, many NGC containers, sshd" in section
    assert "nvidia.com/gpu:NoSchedule" in section
    assert "batch-low" in section
    assert "Queue nlp-train adds: dedicated=ml:NoSchedule" in section
    assert "/admin/" not in section  # a researcher is not told where to change it


@override_settings(CLUSTER_BACKEND="kubernetes")
def test_a_site_admin_is_warned_of_a_shared_namespace_on_a_real_cluster(
    staff_client, researcher_client, nlp
):
    url = reverse("tenants:tenant_detail", args=[nlp.pk])
    page = staff_client.get(url).content.decode()
    assert 'id="shared-namespace-warning"' in page
    assert "tenants are not isolated on the cluster" in page
    assert reverse("admin:tenants_tenant_change", args=[nlp.pk]) in page
    assert "shared-namespace-warning" not in researcher_client.get(url).content.decode()
    with override_settings(KUBERNETES_NAMESPACE_PER_TENANT=True):
        assert "shared-namespace-warning" not in staff_client.get(url).content.decode()
