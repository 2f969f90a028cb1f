"""Who is asking: the client address every throttle counts by (the login lock and the API's
rate limits), taken from the socket or from a proxy the operator declared trusted, never
from a header any client can set.

Two settings, at most one of them set (a system check refuses both):

- NUM_PROXIES: how many proxies in front of the portal append to `X-Forwarded-For`. The
  client is the entry that many places from the right (the leftmost entries are whatever the
  client sent). DRF's own meaning of the setting; unset, the header is ignored, where DRF
  would have trusted it whole.
- LOGIN_CLIENT_ADDRESS_HEADER: the META key of a header the proxy overwrites with the
  client's address (e.g. `HTTP_X_REAL_IP`).

A value that is not an IP address (a proxy misconfigured, or a request that bypassed it)
counts as the socket's address. IPv6 clients are counted per /64 network: one host usually
holds a whole /64 and could otherwise take a fresh address for every guess.
"""

import ipaddress

from django.conf import settings
from django.core.checks import Error, register
from django.http import HttpRequest

IPV6_PREFIX = 64
BOTH_PROXY_SETTINGS = (
    "Set NUM_PROXIES or LOGIN_CLIENT_ADDRESS_HEADER, not both: they are two ways of naming "
    "the trusted proxy."
)


def _proxy_count() -> int | None:
    value = getattr(settings, "NUM_PROXIES", None)
    return None if value in (None, "") else int(value)


def _normalised(value: str) -> str | None:
    try:
        address = ipaddress.ip_address(value.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{address}/{IPV6_PREFIX}", strict=False))
    return str(address)


def _declared(request: HttpRequest) -> str | None:
    """The address the trusted proxy declared, or None (no proxy, or nothing usable)."""
    header = getattr(settings, "LOGIN_CLIENT_ADDRESS_HEADER", "")
    if header:
        return _normalised(str(request.META.get(header, "")))
    count = _proxy_count()
    if not count:
        return None
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if not forwarded:
        return None
    hops = forwarded.split(",")
    return _normalised(hops[-min(count, len(hops))])


def client_address(request: HttpRequest) -> str:
    """The client's address as the throttles count it (IPv6: its /64 network)."""
    declared = _declared(request)
    if declared is not None:
        return declared
    remote = str(request.META.get("REMOTE_ADDR", ""))
    return _normalised(remote) or remote


@register()
def check_one_proxy_setting(app_configs, **kwargs):
    if getattr(settings, "LOGIN_CLIENT_ADDRESS_HEADER", "") and _proxy_count() is not None:
        return [Error(BOTH_PROXY_SETTINGS, id="portal.E001")]
    return []
