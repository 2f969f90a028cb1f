"""Login throttling: N failures per username and address, then 429 without a password check."""

import os
import subprocess
import sys
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


LOOK_ALIKES = ["ｒesearcher", "𝐫𝐞𝐬𝐞𝐚𝐫𝐜𝐡𝐞𝐫", "ＲＥＳＥＡＲＣＨＥＲ", " Researcher\t"]


@pytest.mark.parametrize("alike", LOOK_ALIKES)
def test_unicode_look_alikes_share_the_budget_of_the_account_they_reach(
    researcher, password, password_checks, alike
):
    client = Client()
    _fail(client, "researcher", LIMIT)
    checks = len(password_checks)
    assert _login(client, alike, "wrong-password").status_code == HTTPStatus.TOO_MANY_REQUESTS
    response = _login(client, alike, password)
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert "_auth_user_id" not in client.session
    assert len(password_checks) == checks


def test_look_alike_failures_count_for_the_plain_name(researcher, password):
    client = Client()
    for alike in LOOK_ALIKES[: LIMIT - 1]:
        _fail(client, alike, 1)
    _fail(client, "RESEARCHER", 1)
    assert _login(client, "researcher", password).status_code == HTTPStatus.TOO_MANY_REQUESTS


def test_a_look_alike_with_the_right_password_logs_in_under_the_limit(researcher, password):
    """The normalisation is Django's own: what the form accepts, the throttle counts alike."""
    client = Client()
    assert _login(client, "𝐫𝐞𝐬𝐞𝐚𝐫𝐜𝐡𝐞𝐫", password).status_code == HTTPStatus.FOUND
    assert client.session["_auth_user_id"] == str(researcher.pk)


def test_with_one_trusted_proxy_a_rotating_forwarded_for_buys_nothing(
    settings, researcher, password
):
    settings.NUM_PROXIES = 1
    client = Client()
    for index in range(LIMIT):
        forged = f"192.0.2.{index}, 203.0.113.5"  # the proxy appended the real address
        _fail(client, "researcher", 1, HTTP_X_FORWARDED_FOR=forged)
    response = _login(
        client, "researcher", password, HTTP_X_FORWARDED_FOR="192.0.2.99, 203.0.113.5"
    )
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    other = _login(client, "researcher", password, HTTP_X_FORWARDED_FOR="203.0.113.6")
    assert other.status_code == HTTPStatus.FOUND


WORKER = """
import django
django.setup()
from django.conf import settings
from portal.common.login_throttle import login_failure_record
print(settings.CACHES["default"]["BACKEND"])
for _ in range(3):
    print(login_failure_record(username="researcher", address="10.0.0.1"))
"""


def test_processes_on_production_settings_without_redis_share_one_count(tmp_path):
    """Two gunicorn workers are two processes: local memory (Django's default cache) gave
    each its own count, so N workers let N times the limit through."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "CACHE_"))}
    env |= {
        "DJANGO_SETTINGS_MODULE": "portal.settings.production",
        "SECRET_KEY": "x" * 60,
        "PORTAL_VAR_DIR": str(tmp_path),
    }
    outputs = [
        subprocess.run(  # noqa: S603 (our own interpreter and script)
            [sys.executable, "-c", WORKER], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    assert outputs[0][0] == "django.core.cache.backends.filebased.FileBasedCache"
    assert [line for out in outputs for line in out[1:]] == ["1", "2", "3", "4", "5", "6"]


def _redis_url() -> str | None:
    url = os.environ.get("REDIS_URL")
    if not url:
        return None
    try:
        import redis

        redis.Redis.from_url(url, socket_timeout=2).ping()
    except Exception:  # noqa: BLE001 - any failure means "skip"
        return None
    return url


@pytest.mark.redis
@pytest.mark.skipif(_redis_url() is None, reason="REDIS_URL unset or unreachable")
def test_on_redis_the_count_is_shared_and_the_window_is_fixed(researcher):
    """Production's cache: INCR keeps the expiry set by the first failure."""
    from django.core.cache import caches
    from django.test import override_settings

    prefix = f"login-test-{os.getpid()}-{os.urandom(4).hex()}"
    backend = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": _redis_url(),
        "KEY_PREFIX": prefix,
    }
    with override_settings(CACHES={"default": backend}):
        who = {"username": "Researcher", "address": "10.0.0.1"}
        counts = [login_throttle.login_failure_record(**who) for _ in range(LIMIT)]
        assert counts == list(range(1, LIMIT + 1))
        assert login_throttle.login_blocked(username="ｒesearcher", address="10.0.0.1")
        cache = caches["default"]
        client = cache._cache.get_client(write=True)
        key = cache.make_and_validate_key(login_throttle._key(**who))
        assert 590 <= client.ttl(key) <= 600
        login_throttle.login_failures_clear(**who)
        assert not login_throttle.login_blocked(**who)
