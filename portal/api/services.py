"""API tokens: one per user, created or replaced by its owner."""

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from rest_framework.authtoken.models import Token


@transaction.atomic
def api_token_create(*, user: AbstractBaseUser) -> Token:
    """A fresh token for `user`; any previous one stops working."""
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user)


@transaction.atomic
def api_token_revoke(*, user: AbstractBaseUser) -> int:
    deleted, _ = Token.objects.filter(user=user).delete()
    return deleted
