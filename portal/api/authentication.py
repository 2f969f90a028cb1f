"""Token authentication: the token and its user read by one hand-written statement, by the
digest of the secret sent (portal/api/tokens.py).

DRF's TokenAuthentication runs `Token.objects.select_related("user").get(key=key)` on every
request; compiling that queryset cost five times the statement (see portal/common/rows.py).
The header parsing and the 401 answers are DRF's; a known token that no longer works says
why (expired, revoked and by what), since only its holder can send it.
"""

import functools
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from portal.common.rows import column, fetch_related, select_list, table

from .models import ApiToken
from .services import api_token_used
from .tokens import secret_digest

TOKEN_EXPIRED = "Token expired on {date}; create a new one at /api/tokens/."
TOKEN_REVOKED = "Token {reason}."


class ApiTokenAuthentication(TokenAuthentication):
    model = ApiToken

    def authenticate_credentials(self, key: str) -> tuple[Any, ApiToken]:
        user_model = get_user_model()
        found = fetch_related(
            _token_sql(connection.vendor, user_model),
            [secret_digest(key)],
            (ApiToken, None),
            (user_model, "user"),
        )
        if found is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        token, user = found
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        revoker = token.revoker()
        if revoker is not None:
            raise exceptions.AuthenticationFailed(TOKEN_REVOKED.format(reason=revoker.label))
        now = timezone.now()
        if token.expires_at <= now:
            date = token.expires_at.strftime("%Y-%m-%d %H:%M UTC")
            raise exceptions.AuthenticationFailed(TOKEN_EXPIRED.format(date=date))
        api_token_used(token=token, now=now)
        return user, token


@functools.cache
def _token_sql(vendor: str, user_model: type) -> str:
    return (
        f"SELECT {select_list(ApiToken)}, {select_list(user_model)} FROM {table(ApiToken)}"
        f" INNER JOIN {table(user_model)}"
        f" ON {column(ApiToken, 'user')} = {column(user_model, 'id')}"
        f" WHERE {column(ApiToken, 'digest')} = %s"
    )
