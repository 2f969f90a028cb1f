"""The token page: create (the secret shown in that answer only), list with last use,
revoke your own."""

from http import HTTPStatus

import pytest
from django.urls import reverse

from portal.api.models import ApiToken
from portal.api.services import api_token_create, api_token_revoke
from tests.portal.conftest import token_client

pytestmark = pytest.mark.django_db

URL = "/api/tokens/"


def test_url_names():
    assert reverse("api:tokens") == URL
    assert reverse("api:token_revoke", args=[7]) == "/api/tokens/7/revoke/"


def test_the_page_needs_login(client):
    response = client.get(URL)
    assert response.status_code == HTTPStatus.FOUND
    assert "/accounts/login/" in response["Location"]


def test_a_created_secret_is_shown_once(researcher_client, researcher):
    page = researcher_client.get(URL).content.decode()
    assert "You have no tokens yet." in page
    assert 'value="90"' in page  # the default lifetime
    response = researcher_client.post(URL, {"name": "laptop", "expires_in_days": "30"})
    assert response.status_code == HTTPStatus.OK
    secret = response.context["secret"]
    assert secret in response.content.decode()
    token = ApiToken.objects.get(user=researcher)
    assert token.name == "laptop"
    again = researcher_client.get(URL).content.decode()
    assert secret not in again
    assert token.prefix in again
    assert "laptop" in again
    assert "never" in again  # not used yet


def test_the_list_shows_the_last_use_and_why_a_token_stopped(researcher_client, researcher):
    used, secret = api_token_create(user=researcher, name="used")
    revoked, _ = api_token_create(user=researcher, name="gone")
    api_token_revoke(token=revoked, by=researcher)
    client = token_client(researcher)
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert client.get("/api/v1/jobs/").status_code == HTTPStatus.OK
    rows = {token.name: state for token, state in researcher_client.get(URL).context["tokens"]}
    assert rows["used"] == ApiToken.State.ACTIVE
    assert rows["gone"] == ApiToken.State.REVOKED
    page = researcher_client.get(URL).content.decode()
    assert "revoked by its owner" in page
    used.refresh_from_db()
    assert used.last_used_at is not None
    assert used.last_used_at.strftime("%Y-%m-%d %H:%M") in page


def test_bad_input_is_a_form_error_and_creates_nothing(researcher_client):
    response = researcher_client.post(URL, {"name": "x", "expires_in_days": "9999"})
    assert response.status_code == HTTPStatus.OK
    assert response.context["form"].errors["expires_in_days"] == ["must be between 1 and 365 days"]
    # 0 gets the same one rule, and the field's hint says the limit
    response = researcher_client.post(URL, {"name": "x", "expires_in_days": "0"})
    assert response.context["form"].errors["expires_in_days"] == ["must be between 1 and 365 days"]
    assert "At most 365 days." in response.content.decode()
    response = researcher_client.post(URL, {"name": "", "expires_in_days": "5"})
    assert response.context["form"].errors["name"]
    assert not ApiToken.objects.exists()


def test_the_owner_revokes_a_token(researcher_client, researcher):
    token, secret = api_token_create(user=researcher, name="ci")
    response = researcher_client.post(reverse("api:token_revoke", args=[token.pk]))
    assert response.status_code == HTTPStatus.FOUND
    token.refresh_from_db()
    assert token.revoked_reason == ApiToken.Revoker.OWNER
    client = token_client(researcher)
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert client.get("/api/v1/jobs/").status_code == HTTPStatus.UNAUTHORIZED


def test_another_users_token_is_not_found_even_for_staff(staff_client, researcher, lead_client):
    token, _ = api_token_create(user=researcher, name="ci")
    for client in (staff_client, lead_client):
        response = client.post(reverse("api:token_revoke", args=[token.pk]))
        assert response.status_code == HTTPStatus.NOT_FOUND
    token.refresh_from_db()
    assert token.revoked_at is None
