"""What every API view shares: JSON in and out, the error handler, strict serializers."""

import threading
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.functional import cached_property
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.serializer_helpers import BindingDict
from rest_framework.views import APIView

from portal.common.validators import validate_time_in_range

from .authentication import ApiTokenAuthentication
from .errors import api_exception_handler
from .parsers import LimitedJSONParser

UNKNOWN_FIELD = "unknown field; expected one of: {expected}"
NOT_AN_OBJECT = "expected a JSON object"

# Bounds that keep every number well inside PostgreSQL's integer columns.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class ApiView(APIView):
    """Base of every `<Entity><Action>Api`: JSON only, our error shape."""

    # Token first: anonymous requests get 401 with `WWW-Authenticate: Token`, not 403.
    authentication_classes = [ApiTokenAuthentication, SessionAuthentication]
    parser_classes = [LimitedJSONParser]
    renderer_classes = [JSONRenderer]

    def get_exception_handler(self) -> Callable[..., Any]:
        return api_exception_handler


def component_name(qualname: str) -> str:
    """`JobListApi.OutputSerializer` -> `JobListOutput` (unique OpenAPI component names)."""
    parts = [part.removesuffix("Serializer").removesuffix("Api") for part in qualname.split(".")]
    return "".join(parts)


class ApiSerializer(serializers.Serializer):
    """Plain serializer; nested ones get their OpenAPI name from their outer classes."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "." in cls.__qualname__ and "<locals>" not in cls.__qualname__:
            cls.Meta = type("Meta", (), {"ref_name": component_name(cls.__qualname__)})


class StrictSerializer(ApiSerializer):
    """A serializer that rejects keys it does not know (named in the error)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": [NOT_AN_OBJECT]})
        errors: dict[str, Any] = {}
        value = None
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as error:
            detail = error.detail
            errors.update(detail if isinstance(detail, dict) else {"non_field_errors": detail})
        expected = ", ".join(self.fields)
        for key in data:
            if key not in self.fields:
                errors[str(key)] = [UNKNOWN_FIELD.format(expected=expected)]
        if errors:
            raise serializers.ValidationError(errors)
        return value


_reused_fields = threading.local()


class ReusedFieldsSerializer(StrictSerializer):
    """A strict serializer that builds its fields once per thread instead of once per instance.

    DRF gives every serializer instance deep copies of its declared fields (and of a nested
    serializer's fields), so that one instance may change its own; validating the job-creation
    body rebuilt about 45 field objects per request, the largest share of its input validation
    (`python -m bench.api_profile`, docs/load.md). Validation keeps no state in the fields, so
    a serializer that never changes them reuses the last instance's, handed over to the new
    instance (`parent`, which the fields ask for the root's context and `partial`). One set per
    thread: two requests in parallel never share a field. A subclass must not change its
    fields after creation, nor validate another instance of itself while one is validating.
    """

    @cached_property
    def fields(self) -> BindingDict:  # type: ignore[override]
        reused = _reused_fields.__dict__.setdefault("by_class", {})
        fields = reused.get(type(self))
        if fields is None:
            fields = BindingDict(self)
            for name, field in self.get_fields().items():
                fields[name] = field  # binds the field to this instance
            reused[type(self)] = fields
            return fields
        # bind() may be called once per field: hand the bound fields over instead.
        fields.serializer = self
        for field in fields.values():
            field.parent = self
        return fields


class TimeParameterField(serializers.DateTimeField):
    """An ISO 8601 time in a query (`since`, `until`) within the range every filter accepts."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("validators", []).append(validate_time_in_range)
        super().__init__(**kwargs)


def by_method(name: str, **views: type[APIView]) -> Callable[..., HttpResponse]:
    """One URL served by one APIView per HTTP method (`by_method("Jobs", get=A, post=B)`).

    Each operation keeps its own view class (HackSoftware style); this only routes. The
    `cls` attribute (a class combining them) lets drf-spectacular document every method.
    """
    handlers = {method.upper(): view.as_view() for method, view in views.items()}
    first = next(iter(handlers.values()))

    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        method = request.method or "GET"
        if method == "HEAD" and "GET" in handlers:
            method = "GET"
        return handlers.get(method, first)(request, *args, **kwargs)

    view.csrf_exempt = True  # type: ignore[attr-defined]  # DRF enforces CSRF itself
    view.cls = type(name, tuple(views.values()), {"__doc__": first.cls.__doc__})  # type: ignore[attr-defined]
    view.initkwargs = {}  # type: ignore[attr-defined]
    return view


class ErrorSerializer(ApiSerializer):
    detail = serializers.CharField()
    code = serializers.CharField()
    errors = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Messages keyed by field path, e.g. `tasks[0].gpus` or `body`.",
    )


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    descriptions = {
        400: "Invalid input: `errors` names each field at fault.",
        401: "Not authenticated.",
        403: "Authenticated but not allowed.",
        404: "Not found (or not visible to you).",
        413: "Request body too large.",
        415: "Unsupported Content-Type.",
        429: "Rate limited.",
        503: "The cluster could not be asked; `detail` says why.",
    }
    return {
        code: OpenApiResponse(response=ErrorSerializer, description=descriptions[code])
        for code in codes
    }
