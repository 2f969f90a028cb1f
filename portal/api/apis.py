"""Token endpoint: trade a username and password for your API token (for curl and the CLI)."""

from django.contrib.auth import authenticate
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from .base import ApiSerializer, ApiView, StrictSerializer, error_responses
from .throttling import ApiScopedRateThrottle

BAD_CREDENTIALS = "Unable to log in with the given username and password."


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
        user = authenticate(request=request._request, **serializer.validated_data)
        if user is None or not user.is_active:
            raise serializers.ValidationError({"non_field_errors": [BAD_CREDENTIALS]})
        token, _ = Token.objects.get_or_create(user=user)
        return Response(
            self.OutputSerializer({"token": token.key, "username": user.get_username()}).data
        )
