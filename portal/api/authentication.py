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
from .services import api_token_use_due
from .tokens import secret_digest

TOKEN_EXPIRED = "Token expired on {date}; create a new one at /api/tokens/."  # noqa: S105 - a message, not a secret
TOKEN_REVOKED = "Token {reason}."  # noqa: S105 - a message, not a secret


class ApiTokenAuthentication(TokenAuthentication):
    model = ApiToken

    def authenticate(self, request: Any) -> tuple[Any, ApiToken] | None:
        found = super().authenticate(request)
        now = timezone.now()
        if found is not None and api_token_use_due(token=found[1], now=now):
            # Written by ApiTokenUseMiddleware once the view's transaction has ended: a
            # request answered with an error (rolled back) is a use too.
            request._request.api_token_used = (found[1].pk, now)
        return found

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
        if token.expires_at <= timezone.now():
            date = token.expires_at.strftime("%Y-%m-%d %H:%M UTC")
            raise exceptions.AuthenticationFailed(TOKEN_EXPIRED.format(date=date))
        return user, token


@functools.cache
def _token_sql(vendor: str, user_model: type) -> str:
    return (
        f"SELECT {select_list(ApiToken)}, {select_list(user_model)} FROM {table(ApiToken)}"  # noqa: S608 - quoted model names; values are bound parameters
        f" INNER JOIN {table(user_model)}"
        f" ON {column(ApiToken, 'user')} = {column(user_model, 'id')}"
        f" WHERE {column(ApiToken, 'digest')} = %s"
    )
