"""API tokens as their owner sees them."""

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from .models import ApiToken


def api_token_list(*, user: AbstractBaseUser) -> QuerySet[ApiToken]:
    """The user's own tokens, newest first (revoked and expired ones too: they say why)."""
    return ApiToken.objects.filter(user=user).select_related("user").order_by("-created_at", "-id")


def api_token_get(*, user: AbstractBaseUser, token_id: int) -> ApiToken | None:
    """One of the user's own tokens, or None (another user's id finds nothing)."""
    return api_token_list(user=user).filter(pk=token_id).first()
