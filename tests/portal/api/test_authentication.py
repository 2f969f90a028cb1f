"""ApiTokenAuthentication: DRF's header handling and answers, one statement per request, and
tokens that stop working when they expire, are revoked, or outlive their password."""

from datetime import timedelta
from http import HTTPStatus

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from portal.api.authentication import ApiTokenAuthentication
from portal.api.models import ApiToken
from portal.api.services import api_token_create, api_token_revoke

pytestmark = pytest.mark.django_db


def _client(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


@pytest.fixture
def issued(researcher):
    token, secret = api_token_create(user=researcher, name="laptop")
    return token, secret


def _refusal(secret: str) -> str:
    response = _client(secret).get("/api/v1/jobs/")
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    assert response["WWW-Authenticate"] == "Token"
    return response.json()["detail"]


def test_a_token_authenticates_its_user_with_one_statement(issued):
    _, secret = issued
    client = _client(secret)
    assert client.get("/api/v1/tenants/").status_code == HTTPStatus.OK  # records the first use
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/v1/tenants/")
    assert response.status_code == HTTPStatus.OK, response.content
    assert [tenant["name"] for tenant in response.json()["results"]] == ["nlp"]
    token_sql = [q["sql"] for q in queries.captured_queries if "api_apitoken" in q["sql"]]
    assert len(token_sql) == 1  # the read; no write within the minute
    assert token_sql[0].startswith("SELECT")
    assert "auth_user" in token_sql[0]


def test_only_a_digest_and_a_prefix_are_stored(issued):
    token, secret = issued
    row = ApiToken.objects.filter(pk=token.pk).values().get()
    assert all(secret not in str(value) for value in row.values())
    assert secret.startswith(row["prefix"])
    assert len(row["prefix"]) < len(secret) // 3


@pytest.mark.parametrize(
    ("header", "detail"),
    [
        ("Token not-a-real-key", "Invalid token."),
        ("Token", "Invalid token header. No credentials provided."),
        ("Token a b", "Invalid token header. Token string should not contain spaces."),
    ],
)
def test_bad_tokens_get_drfs_own_401(header, detail):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/jobs/")
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    assert response.json()["detail"] == detail
    assert response["WWW-Authenticate"] == "Token"


def test_an_expired_token_says_since_when(issued):
    token, secret = issued
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert _refusal(secret).startswith("Token expired on ")


def test_a_revoked_token_says_by_whom(issued, staff):
    token, secret = issued
    api_token_revoke(token=token, by=staff)
    assert _refusal(secret) == "Token revoked by an admin."


def test_a_password_change_revokes_every_token_of_the_user(researcher, issued):
    _, secret = issued
    _, other = api_token_create(user=researcher, name="ci")
    researcher.set_password("a-new-password-for-tests")
    researcher.save()
    for each in (secret, other):
        assert _refusal(each) == "Token revoked: the password was changed."
    assert set(ApiToken.objects.values_list("revoked_reason", flat=True)) == {"password"}


def test_a_password_changed_behind_save_revokes_at_the_next_use(researcher, issued):
    token, secret = issued
    get_user_model().objects.filter(pk=researcher.pk).update(password="md5$x$changed")
    assert _refusal(secret) == "Token revoked: the password was changed."
    token.refresh_from_db()
    assert token.state() == ApiToken.State.REVOKED
    assert token.revoker() == ApiToken.Revoker.PASSWORD


def test_deactivation_revokes_and_reactivation_does_not_revive(researcher, issued):
    _, secret = issued
    researcher.is_active = False
    researcher.save()
    assert _refusal(secret) == "User inactive or deleted."
    researcher.is_active = True
    researcher.save()
    assert _refusal(secret) == "Token revoked: the account was deactivated."


def test_saving_other_fields_revokes_nothing(researcher, issued):
    _, secret = issued
    researcher.first_name = "Ada"
    researcher.save()
    researcher.last_login = timezone.now()
    researcher.save(update_fields=["last_login"])
    assert _client(secret).get("/api/v1/jobs/").status_code == HTTPStatus.OK


def test_the_last_use_is_written_at_most_once_a_minute(monkeypatch, issued):
    token, secret = issued
    start = timezone.now()
    clock = [start]
    monkeypatch.setattr(timezone, "now", lambda: clock[0])
    client = _client(secret)
    assert client.get("/api/v1/jobs/").status_code == HTTPStatus.OK
    token.refresh_from_db()
    assert token.last_used_at == start
    clock[0] = start + timedelta(seconds=59)
    client.get("/api/v1/jobs/")
    token.refresh_from_db()
    assert token.last_used_at == start
    clock[0] = start + timedelta(seconds=61)
    client.get("/api/v1/jobs/")
    token.refresh_from_db()
    assert token.last_used_at == start + timedelta(seconds=61)


def test_the_authenticated_user_and_token_are_complete_rows(researcher, issued):
    token, secret = issued
    user, found = ApiTokenAuthentication().authenticate_credentials(secret)
    assert found == token
    assert found.created_at == token.created_at  # a datetime, also on SQLite (converters)
    assert user == researcher
    assert found.user is user
    assert user.is_active is True
    assert user.date_joined == researcher.date_joined


def test_a_request_answered_with_an_error_still_counts_as_a_use(issued, nlp_queue):
    """The view's transaction is rolled back on a 400; the last use is written after it."""
    token, secret = issued
    response = _client(secret).post("/api/v1/jobs/", {"queue": "nope"}, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    token.refresh_from_db()
    assert token.last_used_at is not None
