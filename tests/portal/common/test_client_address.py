"""The client address every throttle counts by: the socket's, or a declared trusted proxy's."""

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import RequestFactory

from portal.common.client_address import BOTH_PROXY_SETTINGS, client_address


@pytest.fixture(autouse=True)
def _no_proxy(settings):
    settings.NUM_PROXIES = None
    settings.LOGIN_CLIENT_ADDRESS_HEADER = ""


def _request(remote: str = "10.0.0.1", **meta: str):
    return RequestFactory().get("/", REMOTE_ADDR=remote, **meta)


def test_without_a_proxy_the_socket_address_counts_and_headers_are_ignored():
    request = _request(HTTP_X_FORWARDED_FOR="192.0.2.7", HTTP_X_REAL_IP="192.0.2.8")
    assert client_address(request) == "10.0.0.1"


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (1, "203.0.113.5", "203.0.113.5"),
        # What the client wrote comes first; the one trusted proxy appended the real address.
        (1, "192.0.2.1, 192.0.2.2, 203.0.113.5", "203.0.113.5"),
        (2, "192.0.2.1, 203.0.113.5, 198.51.100.1", "203.0.113.5"),
        (3, "203.0.113.5, 198.51.100.1", "203.0.113.5"),  # fewer hops than proxies
        (1, "not-an-address", "10.0.0.1"),
        (1, "", "10.0.0.1"),  # no header: the request did not come through the proxy
        (0, "203.0.113.5", "10.0.0.1"),
    ],
)
def test_num_proxies_counts_from_the_right(settings, proxies, forwarded, expected):
    settings.NUM_PROXIES = proxies
    request = _request(HTTP_X_FORWARDED_FOR=forwarded) if forwarded else _request()
    assert client_address(request) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("198.51.100.7", "198.51.100.7"), (" 198.51.100.7 ", "198.51.100.7"), ("junk", "10.0.0.1")],
)
def test_a_declared_header_names_the_client(settings, value, expected):
    settings.LOGIN_CLIENT_ADDRESS_HEADER = "HTTP_X_REAL_IP"
    assert client_address(_request(HTTP_X_REAL_IP=value, HTTP_X_FORWARDED_FOR="1.1.1.1")) == (
        expected
    )
    assert client_address(_request()) == "10.0.0.1"


def test_ipv6_clients_count_per_64_network_and_mapped_ipv4_as_ipv4():
    first = client_address(_request("2001:db8:1:2::1"))
    second = client_address(_request("2001:db8:1:2:ffff:ffff:ffff:ffff"))
    assert first == second == "2001:db8:1:2::/64"
    assert client_address(_request("2001:db8:1:3::1")) != first
    assert client_address(_request("::ffff:192.0.2.9")) == "192.0.2.9"


def test_both_proxy_settings_at_once_fail_the_system_check(settings):
    settings.NUM_PROXIES = 1
    settings.LOGIN_CLIENT_ADDRESS_HEADER = "HTTP_X_REAL_IP"
    with pytest.raises(SystemCheckError, match=BOTH_PROXY_SETTINGS[:40]):
        call_command("check")
