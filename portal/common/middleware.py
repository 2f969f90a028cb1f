"""Response headers every answer gets, decided in one place.

- Signed-in pages and every `/api/` answer: `Cache-Control: no-store` (Django's never-cache
  set), so a shared or back-button cache never keeps a user's data or a token page.
- CONTENT_SECURITY_POLICY and PERMISSIONS_POLICY, when the settings give them (production
  and the local default do; see portal/settings/headers.py). A header a view set itself is
  left alone.
"""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers

API_PREFIX = "/api/"


def _signed_in(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated)


class SecurityHeadersMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path.startswith(API_PREFIX) or _signed_in(request):
            add_never_cache_headers(response)
        for header, setting in (
            ("Content-Security-Policy", "CONTENT_SECURITY_POLICY"),
            ("Permissions-Policy", "PERMISSIONS_POLICY"),
        ):
            value = getattr(settings, setting, "")
            if value and header not in response:
                response[header] = value
        return response
