"""The run-time fields through the API: set and shown, bad values a 400 naming the field."""

from http import HTTPStatus

import pytest
from rest_framework.test import APIClient

from portal.tenants.runtime_limits import (
    ABOVE_QUEUE_MAXIMUM,
    NOTICE_MAX_SECONDS,
    RUNTIME_MAX_SECONDS,
)

pytestmark = pytest.mark.django_db


def _client(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_lead_sets_a_queues_timings_and_reads_them_back(lead, nlp_queue):
    body = {
        "max_runtime_seconds": 3600,
        "min_runtime_seconds": 600,
        "preemption_notice_seconds": 300,
    }
    response = _client(lead).patch(f"/api/v1/queues/{nlp_queue.pk}/", body, format="json")
    assert response.status_code == HTTPStatus.OK, response.json()
    assert {key: response.json()[key] for key in body} == body


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_runtime_seconds", RUNTIME_MAX_SECONDS + 1),
        ("min_runtime_seconds", -1),
        ("min_runtime_seconds", 10**30),
        ("preemption_notice_seconds", -1),
        ("preemption_notice_seconds", NOTICE_MAX_SECONDS + 1),
        ("preemption_notice_seconds", 10**30),
        ("preemption_notice_seconds", "soon"),
    ],
)
def test_a_bad_queue_value_is_a_400_naming_the_field(lead, nlp_queue, field, value):
    response = _client(lead).patch(f"/api/v1/queues/{nlp_queue.pk}/", {field: value}, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert list(response.json()["errors"]) == [field]


def test_only_site_admins_set_a_tenants_maximum(lead, staff, nlp):
    url = f"/api/v1/tenants/{nlp.pk}/"
    body = {"max_runtime_seconds": 7200}
    assert _client(lead).patch(url, body, format="json").status_code == HTTPStatus.FORBIDDEN
    response = _client(staff).patch(url, body, format="json")
    assert response.status_code == HTTPStatus.OK
    assert response.json()["max_runtime_seconds"] == 7200


def test_a_job_above_its_queues_limit_is_a_400_naming_the_field(researcher, lead, nlp_queue):
    _client(lead).patch(
        f"/api/v1/queues/{nlp_queue.pk}/", {"max_runtime_seconds": 60}, format="json"
    )
    task = {"name": "worker", "replicas": 1, "image": "t:1", "gpus": 1}
    body = {"queue": nlp_queue.name, "name": "j", "tasks": [task], "max_runtime_seconds": 61}
    api = _client(researcher)
    response = api.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["errors"] == {
        "max_runtime_seconds": [ABOVE_QUEUE_MAXIMUM.format(limit=60)]
    }
    response = api.post("/api/v1/jobs/", {**body, "max_runtime_seconds": 60}, format="json")
    assert response.status_code == HTTPStatus.CREATED
    assert response.json()["max_runtime_seconds"] == 60
