"""Token authentication: the token and its user found by the digest of the secret sent
(portal/api/tokens.py), not by the secret itself as DRF's TokenAuthentication does.

The header parsing and the 401 answers are DRF's; a known token that no longer works says
why (expired, revoked and by what), since only its holder can send it.
"""

from typing import Any

from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

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
        token = ApiToken.objects.select_related("user").filter(digest=secret_digest(key)).first()
        if token is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        user = token.user
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        revoker = token.revoker()
        if revoker is not None:
            raise exceptions.AuthenticationFailed(TOKEN_REVOKED.format(reason=revoker.label))
        if token.expires_at <= timezone.now():
            date = token.expires_at.strftime("%Y-%m-%d %H:%M UTC")
            raise exceptions.AuthenticationFailed(TOKEN_EXPIRED.format(date=date))
        return user, token
