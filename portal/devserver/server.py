"""Django's development servers with TCP_NODELAY on every accepted connection.

wsgiref writes a response in several small pieces (status line, Date, Server, headers, body).
With Nagle's algorithm on, each piece after the first waits until the client acknowledges
the one before, and Linux delays that acknowledgement up to 40 ms: answers that took a few
milliseconds of work reached the browser 40 ms or more later (cpython issue 108736 describes
the same for http.server). Schemathesis' run against the live server spent 85% of its time
waiting so; gunicorn, what production runs, is not affected.
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
