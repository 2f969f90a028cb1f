"""One JSON error shape for every 4xx: `{"detail": ..., "code": ..., "errors": {path: [..]}}`.

`errors` is keyed by field path (`name`, `tasks[0].gpus`, `spec.tasks[1].replicas`, `body`),
whether the problem was found by a serializer (DRF's nested error structures are flattened)
or by a service (Django's ValidationError.message_dict is already keyed by path).
"""

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

INVALID_INPUT = "Invalid input."
NON_FIELD_KEY = "non_field_errors"


def flatten_errors(detail: Any, path: str = "") -> dict[str, list[str]]:
    """Flatten DRF's nested error detail into `{"a.b[0].c": ["message", ...]}`."""
    flat: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            if isinstance(key, int):
                child = f"{path}[{key}]"
            elif key in (NON_FIELD_KEY, "__all__"):
                child = path or NON_FIELD_KEY
            else:
                child = f"{path}.{key}" if path else str(key)
            for sub, messages in flatten_errors(value, child).items():
                flat.setdefault(sub, []).extend(messages)
        return flat
    if isinstance(detail, list | tuple):
        if all(not isinstance(item, dict | list | tuple) for item in detail):
            return {path or NON_FIELD_KEY: [str(item) for item in detail]} if detail else {}
        for index, item in enumerate(detail):
            for sub, messages in flatten_errors(item, f"{path}[{index}]").items():
                flat.setdefault(sub, []).extend(messages)
        return flat
    return {path or NON_FIELD_KEY: [str(detail)]}


def django_validation_errors(error: DjangoValidationError) -> dict[str, list[str]]:
    if hasattr(error, "error_dict"):
        return {
            (NON_FIELD_KEY if field == "__all__" else field): list(messages)
            for field, messages in error.message_dict.items()
        }
    return {NON_FIELD_KEY: list(error.messages)}


def error_response(
    *, status_code: int, detail: str, code: str, errors: dict[str, list[str]] | None = None
) -> Response:
    body: dict[str, Any] = {"detail": detail, "code": code}
    if errors is not None:
        body["errors"] = errors
    return Response(body, status=status_code)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler: Django's ValidationError -> 400, PermissionDenied -> 403."""
    if isinstance(exc, DjangoValidationError):
        return error_response(
            status_code=status.HTTP_400_BAD_REQUEST,
            detail=INVALID_INPUT,
            code="invalid",
            errors=django_validation_errors(exc),
        )
    if isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or exceptions.PermissionDenied.default_detail)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    if isinstance(exc, exceptions.ValidationError):
        response = exception_handler(exc, context)
        assert response is not None  # noqa: S101 - narrows a type that DRF guarantees
        response.data = {
            "detail": INVALID_INPUT,
            "code": "invalid",
            "errors": flatten_errors(exc.detail),
        }
        return response
    if isinstance(exc, exceptions.ParseError):
        response = exception_handler(exc, context)
        assert response is not None  # noqa: S101 - narrows a type that DRF guarantees
        response.data = {
            "detail": str(exc.detail),
            "code": "parse_error",
            "errors": {"body": [str(exc.detail)]},
        }
        return response
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.APIException):
        detail = exc.detail
        codes = exc.get_codes()
        response.data = {
            "detail": str(detail) if not isinstance(detail, dict | list) else INVALID_INPUT,
            "code": codes if isinstance(codes, str) else "error",
        }
        if isinstance(exc, exceptions.UnsupportedMediaType | PayloadTooLarge):
            response.data["errors"] = {"body": [str(detail)]}
    return response


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "payload_too_large"


API_PREFIX = "/api/"
# The REST API proper. The other routes under /api/ are pages for browsers (the token pages,
# the docs) or the schema, whose errors stay what their views answer.
API_VERSION_PREFIX = "/api/v1/"
# What a client gets for an HTML error page under /api/: the API's own words for the status.
STATUS_ERRORS = {
    400: (exceptions.ParseError.default_detail, "parse_error"),
    401: (exceptions.NotAuthenticated.default_detail, "not_authenticated"),
    403: (exceptions.PermissionDenied.default_detail, "permission_denied"),
    404: (exceptions.NotFound.default_detail, "not_found"),
    405: ("Method not allowed.", "method_not_allowed"),
    413: (PayloadTooLarge.default_detail, "payload_too_large"),
    500: ("Internal server error.", "error"),
}


class ApiJsonErrorsMiddleware:
    """Every error under /api/ is JSON, whatever produced it and in every setting.

    DRF's handler covers its views; Django itself answers the rest with HTML pages: an
    unmatched URL (`/api/v1/jobs/-1/`), an exception outside DRF's reach, and, with DEBUG on,
    its technical 404 and 500 pages (which list the URL patterns and the settings). This
    replaces any such non-JSON error response by the API's error shape.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not request.path.startswith(API_PREFIX) or response.status_code < 400:
            return response
        matched = getattr(request, "resolver_match", None) is not None
        if matched and not request.path.startswith(API_VERSION_PREFIX):
            return response
        content_type = response.get("Content-Type", "")
        if "json" in content_type:
            return response
        from django.http import JsonResponse

        detail, code = STATUS_ERRORS.get(
            response.status_code, STATUS_ERRORS[500 if response.status_code >= 500 else 400]
        )
        replaced = JsonResponse({"detail": str(detail), "code": code}, status=response.status_code)
        for header in ("Allow", "Retry-After", "WWW-Authenticate"):
            if header in response:
                replaced[header] = response[header]
        return replaced
