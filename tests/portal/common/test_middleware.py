"""Headers on every answer: no-store for signed-in pages and the API, the production policies,
and pages that need no inline script (what the Content-Security-Policy forbids)."""

import re
from http import HTTPStatus

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from portal.settings.headers import STRICT_CONTENT_SECURITY_POLICY, STRICT_PERMISSIONS_POLICY
from tests.portal.common.pages import PAGES, build_world

pytestmark = pytest.mark.django_db


def _no_store(response) -> bool:
    return "no-store" in response.get("Cache-Control", "")


def test_signed_in_pages_are_never_stored(researcher_client, nlp_queue):
    for url in ("/", "/jobs/", "/queues/", "/api/tokens/", "/dashboards/"):
        response = researcher_client.get(url)
        assert response.status_code == HTTPStatus.OK, url
        assert _no_store(response), url
        assert "private" in response["Cache-Control"]


def test_every_api_answer_is_never_stored(researcher, password):
    anonymous = APIClient()
    assert _no_store(anonymous.get("/api/v1/jobs/"))  # 401
    created = anonymous.post(
        "/api/v1/auth/token/", {"username": "researcher", "password": password}, format="json"
    )
    assert created.status_code == HTTPStatus.CREATED
    assert _no_store(created)  # the secret itself
    assert _no_store(anonymous.get("/api/schema/"))


def test_policies_are_sent_when_configured(settings, researcher_client):
    response = researcher_client.get("/")
    assert "Content-Security-Policy" not in response  # the test settings send none
    settings.CONTENT_SECURITY_POLICY = STRICT_CONTENT_SECURITY_POLICY
    settings.PERMISSIONS_POLICY = STRICT_PERMISSIONS_POLICY
    for client, url in ((researcher_client, "/"), (Client(), reverse("login"))):
        response = client.get(url)
        assert response["Content-Security-Policy"] == STRICT_CONTENT_SECURITY_POLICY
        assert response["Permissions-Policy"] == STRICT_PERMISSIONS_POLICY


def test_the_policy_allows_no_inline_script_and_no_eval():
    directives = dict(
        part.strip().split(" ", 1) for part in STRICT_CONTENT_SECURITY_POLICY.split(";")
    )
    assert directives["script-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert "unsafe" not in directives["script-src"]
    assert "default-src" in directives


# An executable <script> element with a body, or an on...= handler attribute.
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/(?:ld\+)?json)[^>]*>")
INLINE_HANDLER = re.compile(r"<[a-z][^>]*\son[a-z]+\s*=", re.IGNORECASE)


@pytest.mark.parametrize("role", ["staff", "a_lead"])
def test_no_page_has_an_inline_script_or_handler(role):
    world = build_world()
    client = Client()
    client.force_login(world[role])
    seen = 0
    for page in PAGES:
        if page.get[role].status != HTTPStatus.OK:
            continue
        kwargs = {
            key: world[value].pk if value in world else value for key, value in page.kwargs.items()
        }
        response = client.get(reverse(page.name, kwargs=kwargs), page.query)
        if "html" not in response.get("Content-Type", ""):
            continue
        html = response.content.decode()
        assert not INLINE_SCRIPT.search(html), (page.id, INLINE_SCRIPT.search(html))
        assert not INLINE_HANDLER.search(html), (page.id, INLINE_HANDLER.search(html))
        seen += 1
    assert seen >= 10
