import gc
from http import HTTPStatus

import pytest
from django.urls import reverse

from portal.queues.models import QueueChange
from tests.factories import JobFactory, JobTaskFactory
from tests.portal.common.pages import queue_form_data

pytestmark = pytest.mark.django_db


def _form(queue, **overrides):
    """The queue's current values as the edit form posts them, with `overrides`."""
    return queue_form_data(queue, **{"weight": queue.weight, **overrides})


def test_queue_list_scoped_by_role(researcher_client, staff_client, nlp_queue, vision_queue):
    body = researcher_client.get(reverse("queues:queue_list")).content.decode()
    assert "nlp-train" in body
    assert "vision-train" not in body
    body = staff_client.get(reverse("queues:queue_list")).content.decode()
    assert "vision-train" in body


def test_queue_list_shows_edit_link_only_where_allowed(lead_client, nlp_queue, vision_queue):
    body = lead_client.get(reverse("queues:queue_list")).content.decode()
    assert reverse("queues:queue_edit", args=[nlp_queue.pk]) in body
    assert reverse("queues:queue_edit", args=[vision_queue.pk]) not in body


def test_researcher_cannot_edit_own_tenant_queue(researcher_client, nlp_queue):
    url = reverse("queues:queue_edit", args=[nlp_queue.pk])
    assert researcher_client.get(url).status_code == HTTPStatus.FORBIDDEN
    assert (
        researcher_client.post(url, _form(nlp_queue, weight=9)).status_code == HTTPStatus.FORBIDDEN
    )
    nlp_queue.refresh_from_db()
    assert nlp_queue.weight == 2


def test_another_tenants_queue_answers_404_like_the_api(researcher_client, vision_queue):
    url = reverse("queues:queue_edit", args=[vision_queue.pk])
    response = researcher_client.get(url)
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert "vision-train" not in response.content.decode()
    api = researcher_client.patch(
        reverse("api:queue_detail", args=[vision_queue.pk]), {}, content_type="application/json"
    )
    assert api.status_code == HTTPStatus.NOT_FOUND
    missing = reverse("queues:queue_edit", args=[999999])
    assert researcher_client.get(missing).status_code == HTTPStatus.NOT_FOUND


def test_lead_edits_own_tenant_queue(lead, lead_client, nlp_queue, cluster):
    nlp_queue.tenant.guarantee_gpus = 8
    nlp_queue.tenant.save()
    url = reverse("queues:queue_edit", args=[nlp_queue.pk])
    assert lead_client.get(url).status_code == HTTPStatus.OK
    response = lead_client.post(
        url, _form(nlp_queue, weight=7, guarantee_gpus=8, capability_gpus=16)
    )
    assert response.status_code == HTTPStatus.FOUND
    nlp_queue.refresh_from_db()
    assert (nlp_queue.weight, nlp_queue.guarantee_gpus, nlp_queue.capability_gpus) == (7, 8, 16)
    assert set(QueueChange.objects.values_list("field", flat=True)) == {
        "weight",
        "guarantee_gpus",
        "capability_gpus",
    }
    assert QueueChange.objects.filter(changed_by=lead).count() == 3


def test_lead_cannot_edit_queue_of_tenant_where_only_researcher(lead_client, vision_queue):
    url = reverse("queues:queue_edit", args=[vision_queue.pk])
    assert lead_client.get(url).status_code == HTTPStatus.FORBIDDEN
    assert lead_client.post(url, _form(vision_queue, weight=9)).status_code == HTTPStatus.FORBIDDEN


def test_lead_gets_404_for_queue_of_unrelated_tenant(lead_client, db):
    from tests.factories import QueueFactory

    queue = QueueFactory(name="platform-infra")
    url = reverse("queues:queue_edit", args=[queue.pk])
    assert lead_client.get(url).status_code == HTTPStatus.NOT_FOUND


def test_staff_edits_any_queue(staff_client, vision_queue):
    url = reverse("queues:queue_edit", args=[vision_queue.pk])
    response = staff_client.post(url, _form(vision_queue, priority=4))
    assert response.status_code == HTTPStatus.FOUND
    vision_queue.refresh_from_db()
    assert vision_queue.priority == 4


def test_service_errors_shown_on_the_field(lead_client, nlp_queue, cluster):
    url = reverse("queues:queue_edit", args=[nlp_queue.pk])
    response = lead_client.post(url, _form(nlp_queue, guarantee_gpus=40))
    assert response.status_code == HTTPStatus.OK
    assert response.context["form"].errors == {
        "guarantee_gpus": [
            # under the field that is named: no "guarantee_gpus: " before the sentence
            "nlp's queues would guarantee 40 GPUs (nlp-train 40 GPUs) but "
            "tenant nlp guarantees 0 GPUs"
        ]
    }
    assert "but tenant nlp guarantees 0" in response.content.decode()
    assert not QueueChange.objects.exists()


def test_form_shape_errors_shown(lead_client, nlp_queue):
    url = reverse("queues:queue_edit", args=[nlp_queue.pk])
    response = lead_client.post(url, _form(nlp_queue, weight=70000))
    assert response.status_code == HTTPStatus.OK
    assert "weight" in response.context["form"].errors


def test_a_lead_sets_the_preemption_notice_on_the_form(lead_client, nlp_queue):
    url = reverse("queues:queue_edit", args=[nlp_queue.pk])
    assert "Preemption notice (s)" in lead_client.get(url).content.decode()
    response = lead_client.post(url, _form(nlp_queue, preemption_notice_seconds=300))
    assert response.status_code == HTTPStatus.FOUND
    nlp_queue.refresh_from_db()
    assert nlp_queue.preemption_notice_seconds == 300
    # Empty is none (0), Volcano's behaviour.
    lead_client.post(url, _form(nlp_queue, preemption_notice_seconds=""))
    nlp_queue.refresh_from_db()
    assert nlp_queue.preemption_notice_seconds == 0


@pytest.mark.parametrize("value", [-1, 24 * 3600 + 1])
def test_a_bad_preemption_notice_is_shown_on_its_field(lead_client, nlp_queue, value):
    url = reverse("queues:queue_edit", args=[nlp_queue.pk])
    response = lead_client.post(url, _form(nlp_queue, preemption_notice_seconds=value))
    assert response.status_code == HTTPStatus.OK
    assert list(response.context["form"].errors) == ["preemption_notice_seconds"]
    nlp_queue.refresh_from_db()
    assert nlp_queue.preemption_notice_seconds == 0


def test_anonymous_redirected_to_login(client, nlp_queue):
    response = client.get(reverse("queues:queue_edit", args=[nlp_queue.pk]))
    assert response.status_code == HTTPStatus.FOUND
    assert response.url.startswith(reverse("login"))


# --- live preview -----------------------------------------------------------------------


def test_edit_page_shows_preview_of_every_queue(lead_client, nlp_queue, vision_queue, cluster):
    response = lead_client.get(reverse("queues:queue_edit", args=[nlp_queue.pk]))
    names = [(row["kind"], row["name"]) for row in response.context["preview"]]
    # the lead is a member of both tenants: every tenant, each followed by its queues
    assert names == [
        ("tenant", "nlp"),
        ("queue", "nlp-train"),
        ("tenant", "vision"),
        ("queue", "vision-train"),
    ]


def test_preview_json_reflects_proposed_weight(lead_client, nlp, nlp_queue, vision_queue, cluster):
    from tests.factories import JobFactory, JobTaskFactory, QueueFactory

    dev = QueueFactory(tenant=nlp, name="nlp-dev", weight=1)
    for queue in (nlp_queue, dev, vision_queue):
        JobTaskFactory(job=JobFactory(queue=queue), replicas=4, gpus=8)
    url = reverse("queues:queue_preview", args=[nlp_queue.pk])
    data = _form(nlp_queue, weight="3")
    response = lead_client.get(url, data)
    assert response.status_code == HTTPStatus.OK
    rows = {row["name"]: row for row in response.json()["queues"]}
    # The tenants split the 32 GPUs 16/16; inside nlp, weights 2:1 become 3:1.
    assert rows["nlp"]["deserved_now"] == rows["nlp"]["deserved_after"] == pytest.approx(16)
    assert rows["nlp-train"]["deserved_now"] == pytest.approx(16 * 2 / 3, abs=0.01)
    assert rows["nlp-train"]["deserved_after"] == pytest.approx(12.0)
    assert rows["nlp-dev"]["deserved_after"] == pytest.approx(4.0)
    assert rows["vision-train"]["deserved_after"] == pytest.approx(16.0)
    assert rows["nlp-train"]["edited"] is True
    nlp_queue.refresh_from_db()
    assert nlp_queue.weight == 2


def test_a_preview_request_never_pauses_the_collector(
    lead_client, nlp_queue, vision_queue, cluster, monkeypatch
):
    # The preview runs the core inside a web request: gc is the whole process's, so pausing
    # it there would stop collection for every other request the process serves meanwhile.
    JobTaskFactory(job=JobFactory(queue=nlp_queue), replicas=2, gpus=8)
    calls = []
    monkeypatch.setattr(gc, "disable", lambda: calls.append("disable"))
    url = reverse("queues:queue_preview", args=[nlp_queue.pk])
    response = lead_client.get(url, _form(nlp_queue, weight="3"))
    assert response.status_code == HTTPStatus.OK
    assert response.json()["queues"]
    assert calls == []
    assert gc.isenabled()


def test_preview_json_invalid_input_is_400(lead_client, nlp_queue, cluster):
    url = reverse("queues:queue_preview", args=[nlp_queue.pk])
    response = lead_client.get(url, _form(nlp_queue, weight="0"))
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "weight" in response.json()["errors"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        # Above its own capability, and (the nlp tenant guarantees 0) above its tenant's.
        ({"guarantee_gpus": "30", "capability_gpus": "24"}, "may not exceed capability (24"),
        ({"guarantee_gpus": "6"}, "nlp's queues would guarantee 6 GPUs"),
    ],
)
def test_the_preview_shows_what_save_would_refuse_and_no_shares(
    lead_client, nlp_queue, cluster, overrides, message
):
    url = reverse("queues:queue_preview", args=[nlp_queue.pk])
    response = lead_client.get(url, _form(nlp_queue, **overrides))
    assert response.status_code == HTTPStatus.BAD_REQUEST
    body = response.json()
    assert "queues" not in body
    (error,) = body["errors"]["guarantee_gpus"]
    assert message in error["message"]
    # The same words as Save's, under the same field.
    saved = lead_client.post(
        reverse("queues:queue_edit", args=[nlp_queue.pk]), _form(nlp_queue, **overrides)
    )
    assert saved.context["form"].errors["guarantee_gpus"] == [error["message"]]
    nlp_queue.refresh_from_db()
    assert nlp_queue.guarantee_gpus == 0


def test_preview_json_refused_like_the_edit_page(
    researcher_client, lead_client, nlp_queue, vision_queue
):
    url = reverse("queues:queue_preview", args=[nlp_queue.pk])
    assert researcher_client.get(url).status_code == HTTPStatus.FORBIDDEN
    url = reverse("queues:queue_preview", args=[vision_queue.pk])
    assert lead_client.get(url).status_code == HTTPStatus.FORBIDDEN
