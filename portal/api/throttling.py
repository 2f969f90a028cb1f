"""Per-user, per-scope rate limits: DRF's sliding window, kept in Redis in one atomic step.

DRF's SimpleRateThrottle keeps each user's request times as a list in the cache: it reads the
list, drops the expired times, and writes it back. That is two cache round trips per request
(each building a new Redis client in Django's backend) and, with several gunicorn workers,
a lost update whenever two requests of one user interleave, so more than the limit can pass.
When the default cache is Redis, the same window (at most N requests in any `duration`
seconds) lives in a sorted set updated by one Lua script: one round trip, no lost update.
Other caches (local memory in development and tests) keep DRF's own code.
"""

import os
from threading import Lock
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from rest_framework.throttling import ScopedRateThrottle

from portal.common.client_address import client_address

# Overridden (per scope) by settings.API_THROTTLE_RATES; `None` disables a scope.
DEFAULT_THROTTLE_RATES: dict[str, str | None] = {
    "job_create": "120/min",
    "token_create": "20/min",
}

# KEYS[1]: the sorted set of request times; ARGV: now, duration, limit, a unique member.
# Returns {1, 0} when the request is let through (and recorded), else {0, <oldest time>}.
SLIDING_WINDOW_LUA = """
local now = tonumber(ARGV[1])
local duration = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - duration)
local count = redis.call('ZCARD', KEYS[1])
if count >= tonumber(ARGV[3]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, tostring(count), oldest[2]}
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(duration))
return {1, tostring(count + 1), ARGV[1]}
"""

_scripts: dict[tuple[str, ...], Any] = {}
_scripts_lock = Lock()


def _window_script(cache: RedisCache) -> Any:
    """The Lua script registered on a client of `cache`'s Redis, made once per process and
    server (redis-py clients and their pools are safe to share between threads; Django's
    backend would build a new client for every call)."""
    servers = tuple(cache._servers)
    script = _scripts.get(servers)
    if script is None:
        with _scripts_lock:
            script = _scripts.get(servers)
            if script is None:
                client = cache._cache.get_client(write=True)
                script = _scripts[servers] = client.register_script(SLIDING_WINDOW_LUA)
    return script


class ApiScopedRateThrottle(ScopedRateThrottle):
    """ScopedRateThrottle whose rates come from API_THROTTLE_RATES with built-in defaults,
    counting anonymous clients by portal.common.client_address (DRF's get_ident trusts
    X-Forwarded-For whole when NUM_PROXIES is unset: a fresh budget per forged header)."""

    def get_ident(self, request: Any) -> str:
        return client_address(request)

    def get_rate(self) -> Any:
        rates = {**DEFAULT_THROTTLE_RATES, **getattr(settings, "API_THROTTLE_RATES", {})}
        return rates.get(self.scope)

    def allow_request(self, request: Any, view: Any) -> bool:
        cache = caches["default"]  # DRF's throttle cache (self.cache) is this one
        if not isinstance(cache, RedisCache):
            return super().allow_request(request, view)
        # ScopedRateThrottle.allow_request and SimpleRateThrottle.allow_request, with the
        # window kept by the script instead of a cached list.
        self.scope = getattr(view, self.scope_attr, None)
        if not self.scope:
            return True
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        allowed, count, oldest = _window_script(cache)(
            keys=[cache.make_and_validate_key(f"{self.key}:window")],
            args=[repr(self.now), self.duration, self.num_requests, os.urandom(8).hex()],
        )
        # `wait()` (Retry-After) reads the window as DRF's list: newest first, oldest last.
        self.history = [float(oldest)] * int(count)
        return bool(allowed)
