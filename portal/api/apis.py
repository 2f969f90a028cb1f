"""Token endpoint: trade a username and password for your API token (for curl and the CLI)."""

import unicodedata

from django.contrib.auth import authenticate
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.authtoken.models import Token
from rest_framework.permissions import AllowAny
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

from .base import ApiSerializer, ApiView, StrictSerializer, error_responses
from .throttling import ApiScopedRateThrottle

BAD_CREDENTIALS = "Unable to log in with the given username and password."


class LoginLocked(exceptions.Throttled):
    """429 with the login page's own sentence; Retry-After is the whole window (an upper
    bound: the cache does not say when the window opened)."""

    def __init__(self) -> None:
        super().__init__(detail=login_throttled_message())
        self.wait = window_seconds()


class TokenCreateApi(ApiView):
    """Your API token (created on first use). Send it as `Authorization: Token <key>`."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [ApiScopedRateThrottle]
    throttle_scope = "token_create"

    class InputSerializer(StrictSerializer):
        username = serializers.CharField(max_length=150)
        password = serializers.CharField(max_length=4096, trim_whitespace=False)

    class OutputSerializer(ApiSerializer):
        token = serializers.CharField()
        username = serializers.CharField()

    @extend_schema(
        operation_id="auth_token_create",
        tags=["auth"],
        auth=[],
        request=InputSerializer,
        responses={200: OutputSerializer, **error_responses(400, 413, 415, 429)},
        examples=[
            OpenApiExample(
                "Demo researcher",
                request_only=True,
                value={"username": "researcher", "password": "demo-password"},
            ),
            OpenApiExample(
                "Token",
                response_only=True,
                value={
                    "token": "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b",
                    "username": "researcher",
                },
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        # The login page's lock: failures here count there and the other way round.
        who = {
            "username": serializer.validated_data["username"],
            "address": client_address(request),
        }
        if login_blocked(**who):
            raise LoginLocked()
        user = authenticate(
            request=request._request,
            # NFKC, as the login form's username field does: one spelling works on both.
            username=unicodedata.normalize("NFKC", who["username"]),
            password=serializer.validated_data["password"],
        )
        if user is None or not user.is_active:
            login_failure_record(**who)
            raise serializers.ValidationError({"non_field_errors": [BAD_CREDENTIALS]})
        login_failures_clear(**who)
        token, _ = Token.objects.get_or_create(user=user)
        return Response(
            self.OutputSerializer({"token": token.key, "username": user.get_username()}).data
        )
