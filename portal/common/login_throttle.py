"""Login throttling: after too many failed logins for one username from one address, the
login page answers 429 without checking the password until the window has passed.

Counts live in the Django cache (Redis in production, so every gunicorn worker shares
them). The window is fixed: it starts at the first failure and is not extended by later
ones, so a locked-out user knows when they can try again. A successful login clears the
count. Keys hash the username, so any text a client sends is a valid cache key.

Settings (read at request time): LOGIN_FAILURE_LIMIT (failures allowed per window, 5),
LOGIN_FAILURE_WINDOW_SECONDS (900) and LOGIN_CLIENT_ADDRESS_HEADER: the META key of a header
that a trusted proxy sets to the client's address (e.g. "HTTP_X_REAL_IP"); empty means
REMOTE_ADDR. Never name a header that clients can set themselves: they would pick a fresh
address for every guess.
"""

import hashlib
import math
from typing import Any

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

DEFAULT_FAILURE_LIMIT = 5
DEFAULT_WINDOW_SECONDS = 15 * 60
CACHE_PREFIX = "login-failures:"
LOGIN_THROTTLED = (
    "Too many failed logins for this username from your address. "
    "Try again in at most {minutes} minutes."
)


def failure_limit() -> int:
    return int(getattr(settings, "LOGIN_FAILURE_LIMIT", DEFAULT_FAILURE_LIMIT))


def window_seconds() -> int:
    return int(getattr(settings, "LOGIN_FAILURE_WINDOW_SECONDS", DEFAULT_WINDOW_SECONDS))


def client_address(request: HttpRequest) -> str:
    header = getattr(settings, "LOGIN_CLIENT_ADDRESS_HEADER", "")
    if header and request.META.get(header):
        return str(request.META[header]).strip()
    return str(request.META.get("REMOTE_ADDR", ""))


def _key(*, username: str, address: str) -> str:
    # Usernames are matched case-insensitively so "Alice" and "alice" share one budget.
    raw = f"{username.strip().casefold()}\n{address}".encode("utf-8", "surrogatepass")
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
            minutes = math.ceil(window_seconds() / 60)
            context = self.get_context_data(
                form=form, throttled=LOGIN_THROTTLED.format(minutes=minutes)
            )
            return self.render_to_response(context, status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        login_failure_record(**self._who())
        return super().form_invalid(form)

    def form_valid(self, form: Any) -> HttpResponse:
        login_failures_clear(**self._who())
        return super().form_valid(form)
