"""The token endpoint: a new named token with an expiry per call, revocation of the token in
use; it shares the login page's lock, counts clients by the trusted proxy only, and matches
usernames as the login form does."""

from datetime import datetime, timedelta
from http import HTTPStatus

import pytest
from django.contrib.auth import forms as auth_forms
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from portal.api import apis as token_apis
from portal.api.apis import ENDPOINT_TOKEN_NAME
from portal.api.models import ApiToken
from portal.common.login_throttle import login_throttled_message

pytestmark = pytest.mark.django_db

LIMIT = 3
URL = "/api/v1/auth/token/"


@pytest.fixture(autouse=True)
def _small_budget(settings):
    settings.LOGIN_FAILURE_LIMIT = LIMIT
    settings.LOGIN_FAILURE_WINDOW_SECONDS = 600
    settings.LOGIN_CLIENT_ADDRESS_HEADER = ""
    settings.NUM_PROXIES = None


@pytest.fixture
def password_checks(monkeypatch):
    """Counts the password checks of both paths (the endpoint and the login form)."""
    calls = []

    def counting(real):
        def wrapper(*args, **kwargs):
            calls.append(kwargs.get("username"))
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(token_apis, "authenticate", counting(token_apis.authenticate))
    monkeypatch.setattr(auth_forms, "authenticate", counting(auth_forms.authenticate))
    return calls


def _token(username: str, password: str, address: str = "10.0.0.1", **extra):
    return APIClient().post(
        URL,
        {"username": username, "password": password},
        format="json",
        REMOTE_ADDR=address,
        **extra,
    )


def _page_login(username: str, password: str, address: str = "10.0.0.1"):
    return Client().post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )


def test_failures_at_the_endpoint_lock_it_and_the_login_page(researcher, password, password_checks):
    for _ in range(LIMIT):
        assert _token("researcher", "wrong").status_code == HTTPStatus.BAD_REQUEST
    refused = _token("researcher", password)
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert refused.json() == {"detail": login_throttled_message(), "code": "throttled"}
    assert refused["Retry-After"] == "600"
    assert "token" not in refused.json()
    assert _page_login("researcher", password).status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert len(password_checks) == LIMIT  # neither lock checked the password


def test_failures_on_the_login_page_lock_the_endpoint(researcher, password):
    for _ in range(LIMIT):
        assert _page_login("researcher", "wrong").status_code == HTTPStatus.OK
    assert _token("researcher", password).status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert _token("researcher", password, "10.0.0.2").status_code == HTTPStatus.CREATED


def test_a_forged_forwarded_for_header_buys_no_fresh_budget(researcher, password):
    """Without a declared proxy, X-Forwarded-For is ignored: all these come from 10.0.0.1."""
    for index in range(LIMIT):
        response = _token("researcher", "wrong", HTTP_X_FORWARDED_FOR=f"192.0.2.{index}")
        assert response.status_code == HTTPStatus.BAD_REQUEST
    response = _token("researcher", password, HTTP_X_FORWARDED_FOR="192.0.2.99")
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS


@pytest.mark.parametrize("alike", ["ｒesearcher", "𝐫𝐞𝐬𝐞𝐚𝐫𝐜𝐡𝐞𝐫", "RESEARCHER"])
def test_look_alikes_share_the_budget(researcher, password, alike):
    for _ in range(LIMIT):
        _token(alike, "wrong")
    assert _token("researcher", password).status_code == HTTPStatus.TOO_MANY_REQUESTS


def test_the_login_forms_spelling_of_a_username_works_here_too(researcher, password):
    response = _token("𝐫𝐞𝐬𝐞𝐚𝐫𝐜𝐡𝐞𝐫", password)
    assert response.status_code == HTTPStatus.CREATED
    assert response.json()["username"] == "researcher"


def test_a_success_clears_the_count(researcher, password):
    for _ in range(LIMIT - 1):
        _token("researcher", "wrong")
    assert _token("researcher", password).status_code == HTTPStatus.CREATED
    for _ in range(LIMIT - 1):
        _token("researcher", "wrong")
    assert _token("researcher", password).status_code == HTTPStatus.CREATED


def test_the_rate_limit_counts_clients_by_the_socket_not_a_forged_header(settings, researcher):
    settings.API_THROTTLE_RATES = {"token_create": "4/min"}
    settings.LOGIN_FAILURE_LIMIT = 100
    answers = [
        _token(f"nobody-{index}", "x", HTTP_X_FORWARDED_FOR=f"192.0.2.{index}").status_code
        for index in range(5)
    ]
    assert answers == [HTTPStatus.BAD_REQUEST] * 4 + [HTTPStatus.TOO_MANY_REQUESTS]
    assert _token("nobody", "x", "10.0.0.2").status_code == HTTPStatus.BAD_REQUEST


def test_with_a_trusted_proxy_the_rate_limit_counts_the_address_it_appended(settings):
    settings.API_THROTTLE_RATES = {"token_create": "2/min"}
    settings.NUM_PROXIES = 1
    proxy = "172.16.0.1"  # every request reaches the portal from the proxy's socket
    first = [
        _token("nobody", "x", proxy, HTTP_X_FORWARDED_FOR=f"192.0.2.{i}, 203.0.113.5")
        for i in range(3)
    ]
    assert [r.status_code for r in first][-1] == HTTPStatus.TOO_MANY_REQUESTS
    other = _token("nobody", "x", proxy, HTTP_X_FORWARDED_FOR="203.0.113.6")
    assert other.status_code == HTTPStatus.BAD_REQUEST


def test_every_call_makes_a_new_named_token_with_an_expiry(researcher, password):
    first = APIClient().post(
        URL,
        {"username": "researcher", "password": password, "name": "ci", "expires_in_days": 7},
        format="json",
    )
    assert first.status_code == HTTPStatus.CREATED
    body = first.json()
    assert body["name"] == "ci"
    expires = datetime.fromisoformat(body["expires_at"])
    assert timedelta(days=6, hours=23) < expires - timezone.now() <= timedelta(days=7)
    second = _token("researcher", password)
    assert second.json()["name"] == ENDPOINT_TOKEN_NAME
    assert second.json()["token"] != body["token"]
    for secret in (body["token"], second.json()["token"]):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
        assert client.get("/api/v1/jobs/").status_code == HTTPStatus.OK


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"expires_in_days": 366}, "expires_in_days"),
        ({"expires_in_days": 0}, "expires_in_days"),
        ({"name": "a\nb"}, "name"),
        ({"name": "x" * 101}, "name"),
    ],
)
def test_bad_token_options_are_400_naming_the_field(researcher, password, extra, field):
    body = {"username": "researcher", "password": password, **extra}
    response = APIClient().post(URL, body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert field in response.json()["errors"]
    assert not ApiToken.objects.exists()


def test_delete_revokes_the_token_the_request_is_made_with(researcher, password):
    secret = _token("researcher", password).json()["token"]
    other = _token("researcher", password).json()["token"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert client.delete(URL).status_code == HTTPStatus.NO_CONTENT
    assert client.get("/api/v1/jobs/").json()["detail"] == "Token revoked by its owner."
    still = APIClient()
    still.credentials(HTTP_AUTHORIZATION=f"Token {other}")
    assert still.get("/api/v1/jobs/").status_code == HTTPStatus.OK
    assert APIClient().delete(URL).status_code == HTTPStatus.UNAUTHORIZED
