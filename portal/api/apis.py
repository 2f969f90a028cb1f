"""Token endpoint: trade a username and password for a new API token (for curl and the CLI),
or revoke the token a request is made with."""

import unicodedata

from django.contrib.auth import authenticate
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from portal.common.client_address import client_address
from portal.common.login_throttle import (
    login_blocked,
    login_failure_record,
    login_failures_clear,
    login_throttled_message,
    window_seconds,
)

from .authentication import ApiTokenAuthentication
from .base import ApiSerializer, ApiView, StrictSerializer, error_responses
from .services import api_token_create, api_token_revoke, expiry_days_default
from .throttling import ApiScopedRateThrottle

BAD_CREDENTIALS = "Unable to log in with the given username and password."
ENDPOINT_TOKEN_NAME = "token endpoint"  # noqa: S105 - a message, not a secret


class LoginLocked(exceptions.Throttled):
    """429 with the login page's own sentence; Retry-After is the whole window (an upper
    bound: the cache does not say when the window opened)."""

    def __init__(self) -> None:
        super().__init__(detail=login_throttled_message())
        self.wait = window_seconds()


class TokenCreateApi(ApiView):
    """A new API token for your username and password, shown this once (only a digest is
    stored). Send it as `Authorization: Token <token>`; it expires after `expires_in_days`
    (default 90). Failed attempts count toward the login page's lock, and the other way
    round."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [ApiScopedRateThrottle]
    throttle_scope = "token_create"

    class InputSerializer(StrictSerializer):
        username = serializers.CharField(max_length=150)
        password = serializers.CharField(max_length=4096, trim_whitespace=False)
        name = serializers.CharField(
            max_length=100,
            required=False,
            help_text=f"What uses the token (default: '{ENDPOINT_TOKEN_NAME}').",
        )
        expires_in_days = serializers.IntegerField(
            required=False,
            min_value=1,
            max_value=100_000,
            help_text="Lifetime in days (default 90, at most API_TOKEN_MAX_DAYS, 365).",
        )

    class OutputSerializer(ApiSerializer):
        token = serializers.CharField()
        username = serializers.CharField()
        name = serializers.CharField()
        expires_at = serializers.DateTimeField()

    @extend_schema(
        operation_id="auth_token_create",
        tags=["auth"],
        auth=[],
        request=InputSerializer,
        responses={201: OutputSerializer, **error_responses(400, 413, 415, 429)},
        examples=[
            OpenApiExample(
                "Demo researcher",
                request_only=True,
                value={"username": "researcher", "password": "demo-password", "name": "laptop"},
            ),
            OpenApiExample(
                "Token",
                response_only=True,
                status_codes=["201"],
                value={
                    "token": "gpq_3q2lYk1m8sXn0bJc4T6vR9wZpA7eHfLdUoGiKyNtQxE",
                    "username": "researcher",
                    "name": "laptop",
                    "expires_at": "2025-04-01T12:00:00Z",
                },
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        # The login page's lock: failures here count there and the other way round.
        who = {"username": data["username"], "address": client_address(request)}
        if login_blocked(**who):
            raise LoginLocked()
        user = authenticate(
            request=request._request,
            # NFKC, as the login form's username field does: one spelling works on both.
            username=unicodedata.normalize("NFKC", who["username"]),
            password=data["password"],
        )
        if user is None or not user.is_active:
            login_failure_record(**who)
            raise serializers.ValidationError({"non_field_errors": [BAD_CREDENTIALS]})
        login_failures_clear(**who)
        token, secret = api_token_create(
            user=user,
            name=data.get("name", ENDPOINT_TOKEN_NAME),
            expires_in_days=data.get("expires_in_days", expiry_days_default()),
        )
        body = {
            "token": secret,
            "username": user.get_username(),
            "name": token.name,
            "expires_at": token.expires_at,
        }
        return Response(self.OutputSerializer(body).data, status=status.HTTP_201_CREATED)


class TokenRevokeApi(ApiView):
    """Revoke the token this request is authenticated with (a script's "log out"). Other
    tokens are listed and revoked on the token page, `/api/tokens/`."""

    authentication_classes = [ApiTokenAuthentication]
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="auth_token_revoke",
        tags=["auth"],
        request=None,
        responses={204: None, **error_responses(401)},
    )
    def delete(self, request: Request) -> Response:
        # Token authentication only: request.auth is the ApiToken sent.
        api_token_revoke(token=request.auth, by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
