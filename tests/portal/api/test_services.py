"""API token services: creation rules (name, lifetime, how many), revocation rights."""

import hashlib
from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from portal.api.models import ApiToken
from portal.api.services import (
    EXPIRY_RANGE,
    NAME_CONTROL,
    NAME_REQUIRED,
    NOT_YOURS,
    api_token_create,
    api_token_revoke,
    api_tokens_revoke_for_user,
)

pytestmark = pytest.mark.django_db


def test_a_new_token_keeps_only_the_digest_and_expires_after_the_default(researcher):
    before = timezone.now()
    token, secret = api_token_create(user=researcher, name="  laptop CLI ")
    assert secret.startswith("gpq_")
    assert len(secret) >= 40
    assert token.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert token.prefix == secret[:12]
    assert token.name == "laptop CLI"
    assert before + timedelta(days=90) <= token.expires_at <= timezone.now() + timedelta(days=90)
    assert token.state() == ApiToken.State.ACTIVE


def test_secrets_are_never_repeated(researcher):
    secrets = {api_token_create(user=researcher, name=f"t{i}")[1] for i in range(20)}
    assert len(secrets) == 20


@pytest.mark.parametrize(
    ("name", "days", "field", "message"),
    [
        ("", 30, "name", NAME_REQUIRED),
        ("   ", 30, "name", NAME_REQUIRED),
        ("ci\nbot", 30, "name", NAME_CONTROL),
        ("ok", 0, "expires_in_days", EXPIRY_RANGE.format(max_days=365)),
        ("ok", 366, "expires_in_days", EXPIRY_RANGE.format(max_days=365)),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(researcher, name, days, field, message):
    with pytest.raises(ValidationError) as error:
        api_token_create(user=researcher, name=name, expires_in_days=days)
    assert error.value.message_dict[field] == [message]
    assert not ApiToken.objects.exists()


def test_the_longest_lifetime_is_a_setting(settings, researcher):
    settings.API_TOKEN_MAX_DAYS = 7
    api_token_create(user=researcher, name="week", expires_in_days=7)
    with pytest.raises(ValidationError):
        api_token_create(user=researcher, name="fortnight", expires_in_days=14)


def test_a_user_holds_at_most_the_allowed_live_tokens(settings, researcher, staff):
    settings.API_TOKEN_MAX_PER_USER = 2
    first, _ = api_token_create(user=researcher, name="a")
    api_token_create(user=researcher, name="b")
    with pytest.raises(ValidationError, match="2 active tokens"):
        api_token_create(user=researcher, name="c")
    api_token_revoke(token=first, by=researcher)  # revoked (or expired) ones do not count
    api_token_create(user=researcher, name="c")
    api_token_create(user=staff, name="others have their own count")


def test_revoking_is_for_the_owner_and_site_admins(researcher, outsider, staff):
    token, _ = api_token_create(user=researcher, name="a")
    with pytest.raises(PermissionDenied, match=NOT_YOURS):
        api_token_revoke(token=token, by=outsider)
    assert api_token_revoke(token=token, by=researcher) is True
    assert api_token_revoke(token=token, by=researcher) is False
    token.refresh_from_db()
    assert token.revoked_reason == ApiToken.Revoker.OWNER
    other, _ = api_token_create(user=researcher, name="b")
    assert api_token_revoke(token=other, by=staff) is True
    other.refresh_from_db()
    assert other.revoked_reason == ApiToken.Revoker.ADMIN


def test_revoking_all_of_a_users_tokens_keeps_the_first_reason(researcher, lead):
    one, _ = api_token_create(user=researcher, name="a")
    api_token_create(user=researcher, name="b")
    kept, _ = api_token_create(user=lead, name="lead's")
    api_token_revoke(token=one, by=researcher)
    assert api_tokens_revoke_for_user(user=researcher, reason=ApiToken.Revoker.PASSWORD) == 1
    one.refresh_from_db()
    assert one.revoked_reason == ApiToken.Revoker.OWNER
    kept.refresh_from_db()
    assert kept.revoked_at is None
