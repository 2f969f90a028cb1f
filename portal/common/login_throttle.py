"""Login throttling: after too many failed logins for one username from one address, the
login page and the token endpoint (which share the count) answer 429 without checking the
password until the window has passed.

Counts live in the Django cache (Redis in production, so every gunicorn worker shares
them). The window is fixed: it starts at the first failure and is not extended by later
ones, so a locked-out user knows when they can try again. A successful login clears the
count. The username is keyed as Django matches it, NFKC-normalised (what the login form's
username field does), then case-folded, so look-alikes (`ｄowng`, `𝐝𝐨𝐰𝐧𝐠`) and case
variants share the budget of `downg`. Keys hash it, so any text a client sends is a valid
cache key. The address is portal.common.client_address: the socket's, or the one a
configured trusted proxy declares.

Settings (read at request time): LOGIN_FAILURE_LIMIT (failures allowed per window, 5),
LOGIN_FAILURE_WINDOW_SECONDS (900); the proxy settings in client_address.
"""

import hashlib
import math
import unicodedata
from typing import Any

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

from .client_address import client_address

DEFAULT_FAILURE_LIMIT = 5
DEFAULT_WINDOW_SECONDS = 15 * 60
CACHE_PREFIX = "login-failures:"
LOGIN_THROTTLED = (
    "Too many failed logins for this username from your address. "
    "Try again in at most {minutes} minutes."
)


def login_throttled_message() -> str:
    return LOGIN_THROTTLED.format(minutes=math.ceil(window_seconds() / 60))


def failure_limit() -> int:
    return int(getattr(settings, "LOGIN_FAILURE_LIMIT", DEFAULT_FAILURE_LIMIT))


def window_seconds() -> int:
    return int(getattr(settings, "LOGIN_FAILURE_WINDOW_SECONDS", DEFAULT_WINDOW_SECONDS))


def username_key(username: str) -> str:
    """`username` as the throttle counts it: stripped and NFKC-normalised like Django's login
    form does before it looks the user up, then case-folded (and normalised again, since
    folding can undo NFKC), so every spelling that can reach one account shares a budget."""
    folded = unicodedata.normalize("NFKC", username.strip()).casefold()
    return unicodedata.normalize("NFKC", folded)


def _key(*, username: str, address: str) -> str:
    raw = f"{username_key(username)}\n{address}".encode("utf-8", "surrogatepass")
    return CACHE_PREFIX + hashlib.sha256(raw).hexdigest()


def login_failure_count(*, username: str, address: str) -> int:
    return int(cache.get(_key(username=username, address=address), 0))


def login_blocked(*, username: str, address: str) -> bool:
    return login_failure_count(username=username, address=address) >= failure_limit()


def login_failure_record(*, username: str, address: str) -> int:
    """Count one failed login; the first failure opens the window. Returns the new count."""
    key = _key(username=username, address=address)
    if cache.add(key, 1, timeout=window_seconds()):
        return 1
    try:
        return cache.incr(key)
    except ValueError:  # expired between add() and incr(): this failure opens a new window
        cache.add(key, 1, timeout=window_seconds())
        return 1


def login_failures_clear(*, username: str, address: str) -> None:
    cache.delete(_key(username=username, address=address))


class ThrottledLoginView(LoginView):
    """Django's LoginView behind the failure budget above."""

    template_name = "registration/login.html"

    def _who(self) -> dict[str, str]:
        username = self.request.POST.get("username", "")
        return {"username": username, "address": client_address(self.request)}

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if login_blocked(**self._who()):
            # A fresh, unbound form: validating the posted one would check the password.
            form = self.form_class(request, initial={"username": self._who()["username"]})
            context = self.get_context_data(form=form, throttled=login_throttled_message())
            return self.render_to_response(context, status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        login_failure_record(**self._who())
        return super().form_invalid(form)

    def form_valid(self, form: Any) -> HttpResponse:
        login_failures_clear(**self._who())
        return super().form_valid(form)
