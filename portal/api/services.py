"""API tokens: created by their owner (page or token endpoint), revoked by the owner, an
admin, a password change or a deactivation. Only the digest of a secret is stored: the
secret is returned once, by `api_token_create`."""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from portal.common.access import AnyUser

from .access import can_revoke_token
from .models import ApiToken
from .tokens import password_fingerprint, secret_digest, secret_new, secret_prefix

DEFAULT_EXPIRY_DAYS = 90
DEFAULT_MAX_EXPIRY_DAYS = 365
DEFAULT_MAX_ACTIVE = 50
# A token's last use is written at most this often (not on every request).
LAST_USE_RESOLUTION = timedelta(minutes=1)

NAME_REQUIRED = "give the token a name (what uses it, e.g. 'laptop CLI')"
NAME_CONTROL = "must not contain control characters (line breaks, tabs)"
EXPIRY_RANGE = "must be between 1 and {max_days} days"
TOO_MANY_ACTIVE = (
    "you have {count} active tokens, the most allowed; revoke one on the token page first"
)
NOT_YOURS = "This token is not yours."


def expiry_days_default() -> int:
    return int(getattr(settings, "API_TOKEN_DEFAULT_DAYS", DEFAULT_EXPIRY_DAYS))


def expiry_days_max() -> int:
    return int(getattr(settings, "API_TOKEN_MAX_DAYS", DEFAULT_MAX_EXPIRY_DAYS))


def active_tokens_max() -> int:
    return int(getattr(settings, "API_TOKEN_MAX_PER_USER", DEFAULT_MAX_ACTIVE))


def _active(user: AbstractBaseUser):
    fingerprint = password_fingerprint(user.password or "")
    return ApiToken.objects.filter(
        user=user,
        revoked_at__isnull=True,
        expires_at__gt=timezone.now(),
        password_fingerprint=fingerprint,
    )


def _check(*, name: str, expires_in_days: int) -> None:
    errors: dict[str, list[str]] = {}
    if not name.strip():
        errors["name"] = [NAME_REQUIRED]
    elif any(ord(char) < 32 or ord(char) == 127 for char in name):
        errors["name"] = [NAME_CONTROL]
    if not 1 <= expires_in_days <= expiry_days_max():
        errors["expires_in_days"] = [EXPIRY_RANGE.format(max_days=expiry_days_max())]
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def api_token_create(
    *, user: AbstractBaseUser, name: str, expires_in_days: int | None = None
) -> tuple[ApiToken, str]:
    """A new token for `user` and its secret (shown once; only its digest is kept)."""
    days = expiry_days_default() if expires_in_days is None else expires_in_days
    _check(name=name, expires_in_days=days)
    # Counted under a lock on the user's row: two requests cannot both take the last place.
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    count = _active(user).count()
    if count >= active_tokens_max():
        raise ValidationError(TOO_MANY_ACTIVE.format(count=count), code="too_many_tokens")
    secret = secret_new()
    now = timezone.now()
    token = ApiToken(
        user=user,
        name=name.strip(),
        prefix=secret_prefix(secret),
        digest=secret_digest(secret),
        password_fingerprint=password_fingerprint(user.password or ""),
        created_at=now,
        expires_at=now + timedelta(days=days),
    )
    token.full_clean()
    token.save()
    return token, secret


def _revoke(tokens, reason: str) -> int:
    return tokens.filter(revoked_at__isnull=True).update(
        revoked_at=timezone.now(), revoked_reason=reason
    )


@transaction.atomic
def api_token_revoke(*, token: ApiToken, by: AnyUser) -> bool:
    """Revoke one token (who may: `can_revoke_token`). False if it was already revoked."""
    if not can_revoke_token(by, token):
        raise PermissionDenied(NOT_YOURS)
    reason = ApiToken.Revoker.OWNER if token.user_id == by.pk else ApiToken.Revoker.ADMIN
    return bool(_revoke(ApiToken.objects.filter(pk=token.pk), reason))


def api_tokens_revoke_for_user(*, user: AbstractBaseUser, reason: str) -> int:
    """Every live token of `user` (a password change or a deactivation); returns how many."""
    return _revoke(ApiToken.objects.filter(user=user), reason)


def api_token_use_due(*, token: ApiToken, now) -> bool:
    """Whether this use should be written: at most once per LAST_USE_RESOLUTION."""
    return token.last_used_at is None or now - token.last_used_at >= LAST_USE_RESOLUTION


def api_token_used(*, token_id: int, now) -> None:
    """Record a use (one UPDATE, no read)."""
    ApiToken.objects.filter(pk=token_id).update(last_used_at=now)
