"""Login throttling: N failures per username and address, then 429 without a password check."""

from http import HTTPStatus

import pytest
from django.contrib.auth import forms as auth_forms
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from portal.common import login_throttle
from portal.common.login_throttle import LOGIN_THROTTLED

pytestmark = pytest.mark.django_db

LIMIT = 3


@pytest.fixture(autouse=True)
def _small_budget(settings):
    settings.LOGIN_FAILURE_LIMIT = LIMIT
    settings.LOGIN_FAILURE_WINDOW_SECONDS = 600
    settings.LOGIN_CLIENT_ADDRESS_HEADER = ""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def password_checks(monkeypatch):
    """Counts calls of the authentication the login form makes."""
    calls = []
    real = auth_forms.authenticate

    def counting(*args, **kwargs):
        calls.append(kwargs.get("username"))
        return real(*args, **kwargs)

    monkeypatch.setattr(auth_forms, "authenticate", counting)
    return calls


def _login(client: Client, username: str, password: str, address: str = "10.0.0.1", **extra):
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address, **extra
    )


def _fail(client: Client, username: str, times: int, address: str = "10.0.0.1", **extra):
    for _ in range(times):
        response = _login(client, username, "wrong-password", address, **extra)
        assert response.status_code == HTTPStatus.OK


def test_failures_under_the_limit_still_let_the_right_password_in(researcher, password):
    client = Client()
    _fail(client, "researcher", LIMIT - 1)
    response = _login(client, "researcher", password)
    assert response.status_code == HTTPStatus.FOUND
    assert "_auth_user_id" in client.session


def test_after_the_limit_even_the_right_password_gets_429_unchecked(
    researcher, password, password_checks
):
    client = Client()
    _fail(client, "researcher", LIMIT)
    assert len(password_checks) == LIMIT
    response = _login(client, "researcher", password)
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert len(password_checks) == LIMIT  # refused before any password check
    assert "_auth_user_id" not in client.session
    minutes = 600 // 60
    assert LOGIN_THROTTLED.format(minutes=minutes) in response.content.decode()
    assert 'value="researcher"' in response.content.decode()


def test_the_budget_is_per_username_and_address(researcher, lead, password):
    client = Client()
    _fail(client, "researcher", LIMIT, address="10.0.0.1")
    assert _login(client, "researcher", password, "10.0.0.2").status_code == HTTPStatus.FOUND
    assert _login(Client(), "lead", password, "10.0.0.1").status_code == HTTPStatus.FOUND


def test_usernames_differing_in_case_share_a_budget(researcher, password):
    client = Client()
    _fail(client, "Researcher", LIMIT - 1)
    _fail(client, "RESEARCHER ", 1)
    response = _login(client, "researcher", password)
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS


def test_unknown_usernames_are_throttled_too():
    client = Client()
    _fail(client, "nobody-here", LIMIT)
    assert _login(client, "nobody-here", "x").status_code == HTTPStatus.TOO_MANY_REQUESTS


def test_a_success_resets_the_count(researcher, password):
    client = Client()
    _fail(client, "researcher", LIMIT - 1)
    assert _login(client, "researcher", password).status_code == HTTPStatus.FOUND
    other = Client()
    _fail(other, "researcher", LIMIT - 1)
    assert _login(other, "researcher", password).status_code == HTTPStatus.FOUND


def test_forwarded_for_headers_cannot_buy_fresh_budgets(researcher, password):
    client = Client()
    for index in range(LIMIT):
        _fail(client, "researcher", 1, HTTP_X_FORWARDED_FOR=f"192.0.2.{index}")
    response = _login(client, "researcher", password, HTTP_X_FORWARDED_FOR="192.0.2.99")
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS


def test_a_trusted_proxy_header_names_the_client(settings, researcher, password):
    settings.LOGIN_CLIENT_ADDRESS_HEADER = "HTTP_X_REAL_IP"
    client = Client()
    _fail(client, "researcher", LIMIT, HTTP_X_REAL_IP="198.51.100.7")
    blocked = _login(client, "researcher", password, HTTP_X_REAL_IP="198.51.100.7")
    assert blocked.status_code == HTTPStatus.TOO_MANY_REQUESTS
    other = _login(client, "researcher", password, HTTP_X_REAL_IP="198.51.100.8")
    assert other.status_code == HTTPStatus.FOUND


def test_the_window_ends_and_a_new_one_starts(monkeypatch, researcher, password):
    from django.core.cache import caches
    from django.core.cache.backends import locmem

    if not isinstance(caches["default"], locmem.LocMemCache):
        pytest.skip("moves the clock of the in-memory cache")
    now = [1_000_000.0]
    monkeypatch.setattr(locmem.time, "time", lambda: now[0])
    client = Client()
    _fail(client, "researcher", 1)
    now[0] += 300
    _fail(client, "researcher", LIMIT - 1)
    now[0] += 299
    assert _login(client, "researcher", password).status_code == HTTPStatus.TOO_MANY_REQUESTS
    now[0] += 2  # 601 s after the first failure: the later ones did not extend the window
    assert _login(client, "researcher", password).status_code == HTTPStatus.FOUND


def test_record_recovers_when_the_key_expires_between_add_and_incr(monkeypatch):
    monkeypatch.setattr(login_throttle.cache, "add", lambda *args, **kwargs: False)

    def expired(key):
        raise ValueError(key)

    monkeypatch.setattr(login_throttle.cache, "incr", expired)
    assert login_throttle.login_failure_record(username="x", address="1.2.3.4") == 1


def test_admin_login_goes_through_the_throttled_page(researcher, password):
    client = Client()
    response = client.post(
        "/admin/login/?next=/admin/", {"username": "researcher", "password": password}
    )
    assert response.status_code == HTTPStatus.FOUND
    assert response.url == f"{reverse('login')}?next=/admin/"
    assert "_auth_user_id" not in client.session
