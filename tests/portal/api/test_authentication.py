"""ApiTokenAuthentication answers as DRF's TokenAuthentication, by one statement."""

from http import HTTPStatus

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from portal.api.authentication import ApiTokenAuthentication
from tests.portal.api.conftest import token_client

pytestmark = pytest.mark.django_db


def test_a_token_authenticates_its_user_with_one_statement(researcher):
    client = token_client(researcher)
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/v1/tenants/")
    assert response.status_code == HTTPStatus.OK, response.content
    assert [tenant["name"] for tenant in response.json()["results"]] == ["nlp"]
    token_reads = [q["sql"] for q in queries.captured_queries if "authtoken_token" in q["sql"]]
    assert len(token_reads) == 1
    assert "auth_user" in token_reads[0]


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


def test_an_inactive_users_token_is_refused(researcher):
    client = token_client(researcher)
    researcher.is_active = False
    researcher.save()
    response = client.get("/api/v1/jobs/")
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    assert response.json()["detail"] == "User inactive or deleted."


def test_the_authenticated_user_and_token_are_complete_rows(researcher):
    token = Token.objects.create(user=researcher)
    user, found = ApiTokenAuthentication().authenticate_credentials(token.key)
    assert found == token
    assert found.created == token.created  # a datetime, also on SQLite (converters applied)
    assert user == researcher
    assert found.user is user
    assert user.is_active is True
    assert user.date_joined == researcher.date_joined
