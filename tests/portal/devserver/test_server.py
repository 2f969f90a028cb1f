import socket
import threading

from django.core.management import get_commands, load_command_class
from django.core.servers.basehttp import WSGIRequestHandler
from django.test.testcases import LiveServerThread

from portal.devserver.server import NoDelayThreadedWSGIServer, NoDelayWSGIServer


def _accepted_socket_has_nodelay(server_class) -> int:
    server = server_class(("127.0.0.1", 0), WSGIRequestHandler)
    seen = {}

    def accept():
        connection, _ = server.get_request()
        seen["nodelay"] = connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        connection.close()

    thread = threading.Thread(target=accept)
    thread.start()
    with socket.create_connection(server.server_address, timeout=5):
        thread.join(timeout=5)
    server.server_close()
    return seen["nodelay"]


def test_both_servers_turn_nagle_off_on_each_connection():
    assert _accepted_socket_has_nodelay(NoDelayWSGIServer)
    assert _accepted_socket_has_nodelay(NoDelayThreadedWSGIServer)


def test_runserver_is_ours_and_still_serves_static_files():
    assert get_commands()["runserver"] == "portal.devserver"
    command = load_command_class("portal.devserver", "runserver")
    assert command.server_cls is NoDelayWSGIServer
    parser = command.create_parser("manage.py", "runserver")
    assert parser.parse_args(["--nostatic"]).use_static_handler is False


def test_the_suites_live_server_uses_it():
    assert LiveServerThread.server_class is NoDelayThreadedWSGIServer
