from http import HTTPStatus

import pytest
from django.urls import reverse

from tests.factories import JobFactory, PreemptionEventFactory

pytestmark = pytest.mark.django_db

URL = "/admin-area/preemptions/"


def test_url_name():
    assert reverse("scheduling:preemption_list") == URL


def test_staff_sees_all_preemptions(staff_client, nlp_queue, vision_queue):
    PreemptionEventFactory(victim_job=JobFactory(queue=nlp_queue, name="victim-a"))
    PreemptionEventFactory(
        victim_job=JobFactory(queue=vision_queue, name="victim-b"), action="preempt"
    )
    response = staff_client.get(URL)
    assert response.status_code == HTTPStatus.OK
    body = response.content.decode()
    assert "victim-a" in body
    assert "victim-b" in body
    response = staff_client.get(URL, {"action": "preempt"})
    assert [event.victim_job.name for event in response.context["events"]] == ["victim-b"]
    response = staff_client.get(URL, {"queue": str(nlp_queue.pk)})
    assert [event.victim_job.name for event in response.context["events"]] == ["victim-a"]


def test_staff_sees_empty_table(staff_client):
    assert "No preemptions recorded." in staff_client.get(URL).content.decode()


@pytest.mark.parametrize("who", ["researcher_client", "lead_client"])
def test_non_staff_gets_403(request, who, nlp_queue):
    PreemptionEventFactory(victim_job=JobFactory(queue=nlp_queue, name="secret-victim"))
    response = request.getfixturevalue(who).get(URL)
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert "secret-victim" not in response.content.decode()


def test_anonymous_redirected_to_login(client):
    response = client.get(URL)
    assert response.status_code == HTTPStatus.FOUND
    assert response.url.startswith(reverse("login"))
