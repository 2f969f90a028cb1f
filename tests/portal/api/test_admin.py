"""Tokens in the Django admin: every user's listed with their last use, no secret or digest,
revocable in bulk, never added or deleted there."""

from http import HTTPStatus

import pytest
from django.test import Client
from django.urls import reverse

from portal.api.models import ApiToken
from portal.api.services import api_token_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:api_apitoken_changelist"


@pytest.fixture
def superuser_client():
    client = Client()
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def issued(researcher, lead):
    return [api_token_create(user=user, name=f"{user.username}-cli") for user in (researcher, lead)]


def test_the_list_shows_every_users_tokens_and_no_secret(superuser_client, issued):
    response = superuser_client.get(reverse(CHANGELIST))
    assert response.status_code == HTTPStatus.OK
    page = response.content.decode()
    for token, secret in issued:
        assert token.name in page
        assert token.prefix in page
        assert secret not in page
        assert token.digest not in page
    change = superuser_client.get(reverse("admin:api_apitoken_change", args=[issued[0][0].pk]))
    assert change.status_code == HTTPStatus.OK
    assert issued[0][0].digest not in change.content.decode()
    assert superuser_client.get(reverse(CHANGELIST), {"q": "lead"}).status_code == HTTPStatus.OK


def test_admins_revoke_selected_tokens(superuser_client, issued):
    chosen = issued[0][0]
    response = superuser_client.post(
        reverse(CHANGELIST), {"action": "revoke", "_selected_action": [chosen.pk]}
    )
    assert response.status_code == HTTPStatus.FOUND
    chosen.refresh_from_db()
    assert chosen.revoked_reason == ApiToken.Revoker.ADMIN
    other = issued[1][0]
    other.refresh_from_db()
    assert other.revoked_at is None


def test_tokens_are_not_added_or_deleted_in_the_admin(superuser_client, issued):
    assert superuser_client.get(reverse("admin:api_apitoken_add")).status_code == (
        HTTPStatus.FORBIDDEN
    )
    token = issued[0][0]
    delete = reverse("admin:api_apitoken_delete", args=[token.pk])
    assert superuser_client.post(delete, {"post": "yes"}).status_code == HTTPStatus.FORBIDDEN
    assert ApiToken.objects.filter(pk=token.pk).exists()
