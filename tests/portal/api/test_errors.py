"""Every error under /api/ is JSON, with DEBUG on as well as off."""

from http import HTTPStatus

import pytest
from django.test import Client, override_settings

from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


def _json_error(response, status):
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = response.json()
    assert set(body) >= {"detail", "code"}
    return body


@pytest.mark.parametrize("debug", [False, True])
def test_unmatched_api_urls_answer_json_404(api_for, debug):
    with override_settings(DEBUG=debug):
        for path in ("/api/v1/jobs/-1/", "/api/v1/jobs/abc/", "/api/v1/nothing-here/", "/api/x"):
            body = _json_error(api_for("researcher").get(path), HTTPStatus.NOT_FOUND)
            assert body["code"] == "not_found"
            assert "urlpatterns" not in str(body)


@pytest.mark.parametrize("debug", [False, True])
def test_another_tenants_job_answers_json_404(api_for, vision_queue, debug):
    theirs = JobFactory(queue=vision_queue)
    with override_settings(DEBUG=debug):
        for suffix in ("", "why/"):
            response = api_for("researcher").get(f"/api/v1/jobs/{theirs.pk}/{suffix}")
            assert _json_error(response, HTTPStatus.NOT_FOUND)["code"] == "not_found"


@pytest.mark.parametrize("debug", [False, True])
def test_an_unexpected_failure_answers_json_500_without_details(
    api_for, nlp_queue, monkeypatch, debug
):
    def broken(**kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr("portal.queues.apis.queue_list", broken)
    client = api_for("researcher")
    client.raise_request_exception = False
    with override_settings(DEBUG=debug):
        response = client.get("/api/v1/queues/")
    body = _json_error(response, HTTPStatus.INTERNAL_SERVER_ERROR)
    assert body == {"detail": "Internal server error.", "code": "error"}


def test_a_wrong_method_keeps_its_allow_header(api_for):
    with override_settings(DEBUG=True):
        response = api_for("researcher").delete("/api/v1/queues/")
    assert _json_error(response, HTTPStatus.METHOD_NOT_ALLOWED)
    assert "GET" in response["Allow"]


def test_pages_outside_the_api_keep_their_html_errors(researcher_client):
    response = researcher_client.get("/jobs/999999/")
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response["Content-Type"].startswith("text/html")
    assert Client().get("/api/schema/").status_code == HTTPStatus.OK


def test_the_token_page_under_api_keeps_html_errors(researcher):
    client = Client(enforce_csrf_checks=True)
    client.force_login(researcher)
    response = client.post("/api/tokens/", {"action": "create"})
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response["Content-Type"].startswith("text/html")
