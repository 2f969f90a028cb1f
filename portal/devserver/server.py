"""Django's development servers with TCP_NODELAY on every accepted connection.

wsgiref writes a response in several small pieces (status line, Date, Server, headers, body).
With Nagle's algorithm on, each piece after the first waits until the client acknowledges
the one before, and Linux delays that acknowledgement up to 40 ms (cpython issue 108736
describes the same for http.server). Python clients over keep-alive waited so on nearly every
answer: the login page took 48 ms against 3.3 ms without the stalls (requests, median of 20),
and Schemathesis' run against the suite's live server 100 s against 14.5 s. Chromium's page
loads measured the same either way. gunicorn, what production runs, is not affected.
"""

import socket
import socketserver
from typing import Any

from django.core.servers.basehttp import ThreadedWSGIServer, WSGIServer


class _NoDelay(socketserver.TCPServer):
    def get_request(self) -> tuple[Any, Any]:
        connection, address = super().get_request()
        if connection.family in (socket.AF_INET, socket.AF_INET6):
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address


class NoDelayWSGIServer(_NoDelay, WSGIServer):
    """`runserver`'s server class (its threaded variant is built from it)."""


class NoDelayThreadedWSGIServer(_NoDelay, ThreadedWSGIServer):
    """The live server's class in tests (Django's LiveServerThread.server_class)."""
