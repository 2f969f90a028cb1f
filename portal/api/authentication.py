"""Token authentication with the token and its user read by one hand-written statement.

DRF's TokenAuthentication runs `Token.objects.select_related("user").get(key=key)` on every
request; compiling that queryset cost five times the statement (see portal/common/rows.py).
Answers and errors are DRF's own.
"""

import functools
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

from portal.common.rows import column, fetch_related, select_list, table


class ApiTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        user_model = get_user_model()
        found = fetch_related(
            _token_sql(connection.vendor, user_model), [key], (Token, None), (user_model, "user")
        )
        if found is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        token, user = found
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return user, token


@functools.cache
def _token_sql(vendor: str, user_model: type) -> str:
    return (
        f"SELECT {select_list(Token)}, {select_list(user_model)} FROM {table(Token)}"
        f" INNER JOIN {table(user_model)} ON {column(Token, 'user')} = {column(user_model, 'id')}"
        f" WHERE {column(Token, 'key')} = %s"
    )
