"""The last use of an API token, written after the view's transaction.

Views run inside a transaction (ATOMIC_REQUESTS) that an error answer rolls back; a
request that failed is still a use of its token, and the token page and the admin show
when a token was last used. ApiTokenAuthentication marks the request when a write is due
(at most once a minute per token); this writes it, outside that transaction.
"""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from .services import api_token_used


class ApiTokenUseMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        used = getattr(request, "api_token_used", None)
        if used is not None:
            api_token_used(token_id=used[0], now=used[1])
        return response
