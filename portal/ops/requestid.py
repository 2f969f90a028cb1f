"""Request ids: taken from X-Request-ID when the client or proxy sent a sane one, made up
otherwise, echoed in the response and attached to every log line of the request, and carried
into the Celery tasks the request queues (see portal.ops.worker)."""

from __future__ import annotations

import re
import uuid
from contextvars import ContextVar

HEADER = "X-Request-ID"
META_KEY = "HTTP_X_REQUEST_ID"
# What a proxy or client may set; anything else (too long, odd characters that would forge
# log fields) is replaced by our own id.
_ACCEPTED = re.compile(r"[A-Za-z0-9._:-]{1,128}")

_request_id: ContextVar[str | None] = ContextVar("request_id", default=None)


def current_request_id() -> str | None:
    return _request_id.get()


def set_request_id(value: str | None):
    """Returns the token to pass to `reset_request_id`."""
    return _request_id.set(value)


def reset_request_id(token) -> None:
    _request_id.reset(token)


def request_id_from(header_value: str | None) -> str:
    if header_value and _ACCEPTED.fullmatch(header_value):
        return header_value
    return uuid.uuid4().hex


class RequestIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request_id = request_id_from(request.META.get(META_KEY))
        request.request_id = request_id
        token = set_request_id(request_id)
        try:
            response = self.get_response(request)
        finally:
            reset_request_id(token)
        response[HEADER] = request_id
        return response
