"""The queue a Volcano manifest without spec.queue goes to (upstream's webhook puts it in
`default`, mutate_job.go patchDefaultQueue): the member's own default a lead set, else the
tenant's, else a queue of theirs named `default`; a lead sets them on the tenant's page or
through the API, nobody else."""

from http import HTTPStatus

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse
from rest_framework.test import APIClient

from portal.queues.selectors import (
    DEFAULT_BY_NAME,
    NO_DEFAULT_QUEUE,
    queue_default,
)
from portal.queues.services import QUEUE_DEFAULT_FORBIDDEN, queue_default_set
from portal.tenants.models import Membership
from tests.factories import QueueFactory

pytestmark = pytest.mark.django_db


def test_without_any_default_there_is_none_to_go_to(researcher, nlp_queue):
    assert queue_default(user=researcher).error == NO_DEFAULT_QUEUE


def test_a_queue_of_theirs_named_default_is_the_last_resort(researcher, nlp, vision):
    theirs = QueueFactory(tenant=vision, name="default")
    assert queue_default(user=researcher).error == NO_DEFAULT_QUEUE  # not the researcher's
    theirs.delete()  # queue names are unique
    mine = QueueFactory(tenant=nlp, name="default")
    found = queue_default(user=researcher)
    assert (found.queue, found.why) == (mine, DEFAULT_BY_NAME)


def test_the_tenants_default_then_the_members_own(researcher, nlp, nlp_queue):
    QueueFactory(tenant=nlp, name="default")
    dev = QueueFactory(tenant=nlp, name="nlp-dev")
    queue_default_set(tenant=nlp, queue="nlp-train", actor=None)
    found = queue_default(user=researcher)
    assert (found.queue, found.why) == (nlp_queue, "the default queue of tenant nlp")
    queue_default_set(tenant=nlp, queue=str(dev.pk), actor=None, username="researcher")
    found = queue_default(user=researcher)
    assert (found.queue, found.why) == (dev, "your default queue in tenant nlp, set by its leads")


def test_defaults_in_two_tenants_are_not_guessed_between(lead, nlp, vision, nlp_queue):
    QueueFactory(tenant=vision, name="vision-train")
    queue_default_set(tenant=nlp, queue="nlp-train", actor=None)
    queue_default_set(tenant=vision, queue="vision-train", actor=None)
    found = queue_default(user=lead)
    assert found.queue is None
    assert found.error == (
        "no queue given, and several of your tenants have a default queue "
        "(nlp-train, vision-train): name one"
    )


def test_only_a_lead_or_an_admin_sets_them_and_only_to_the_tenants_queues(
    researcher, lead, staff, nlp, vision, nlp_queue, vision_queue
):
    with pytest.raises(PermissionDenied, match=QUEUE_DEFAULT_FORBIDDEN):
        queue_default_set(tenant=nlp, queue="nlp-train", actor=researcher)
    with pytest.raises(PermissionDenied):
        queue_default_set(tenant=vision, queue="vision-train", actor=lead)  # a researcher there
    with pytest.raises(ValidationError) as raised:
        queue_default_set(tenant=nlp, queue="vision-train", actor=lead)
    assert raised.value.message_dict == {"queue": ["tenant nlp has no queue vision-train"]}
    with pytest.raises(ValidationError) as raised:
        queue_default_set(tenant=nlp, queue="nlp-train", actor=staff, username="outsider")
    assert raised.value.message_dict == {"user": ["outsider is not a member of tenant nlp"]}
    assert queue_default_set(tenant=nlp, queue="nlp-train", actor=lead) == nlp_queue
    assert queue_default_set(tenant=nlp, queue=None, actor=staff) is None
    nlp.refresh_from_db()
    assert nlp.default_queue is None


def test_the_api_shows_a_member_their_own_and_a_lead_everyones(researcher, lead, nlp, nlp_queue):
    url = f"/api/v1/tenants/{nlp.pk}/default-queue/"
    api = APIClient()
    api.force_authenticate(lead)
    response = api.put(url, {"queue": "nlp-train", "user": "researcher"}, format="json")
    assert response.status_code == HTTPStatus.OK, response.content
    response = api.put(url, {"queue": "nlp-train"}, format="json")
    assert response.json() == {
        "default_queue": "nlp-train",
        "members": {"lead": None, "researcher": "nlp-train"},
    }
    api.force_authenticate(researcher)
    assert api.get(url).json() == {
        "default_queue": "nlp-train",
        "members": {"researcher": "nlp-train"},
    }
    response = api.put(url, {"queue": None}, format="json")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert Membership.objects.get(user=researcher).default_queue == nlp_queue


def test_the_api_answers_bad_input_with_the_field(lead, nlp, nlp_queue):
    api = APIClient()
    api.force_authenticate(lead)
    url = f"/api/v1/tenants/{nlp.pk}/default-queue/"
    response = api.put(url, {"queue": "nope"}, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["errors"] == {"queue": ["tenant nlp has no queue nope"]}
    response = api.put(url, {"queue": "nlp-train", "colour": "red"}, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST


def test_a_lead_sets_them_on_the_tenants_page(lead_client, researcher_client, nlp, nlp_queue):
    page = reverse("tenants:tenant_detail", args=[nlp.pk])
    assert "Set default" in lead_client.get(page).content.decode()
    assert "Set default" not in researcher_client.get(page).content.decode()
    url = reverse("tenants:tenant_default_queue", args=[nlp.pk])
    response = lead_client.post(url, {"user": "", "queue": "nlp-train"}, follow=True)
    assert "Default queue of tenant nlp: nlp-train." in response.content.decode()
    nlp.refresh_from_db()
    assert nlp.default_queue == nlp_queue
    response = lead_client.post(url, {"user": "", "queue": "vision-train"}, follow=True)
    assert "tenant nlp has no queue vision-train" in response.content.decode()
    assert researcher_client.post(url, {"queue": ""}).status_code == HTTPStatus.FORBIDDEN
