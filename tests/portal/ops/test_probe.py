"""`python -m portal.ops.probe`: the compose file's health checks."""

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from portal.ops.probe import main, probe_url


def test_urls_come_from_the_same_variables_the_servers_bind_to():
    assert probe_url("web", {}) == "http://127.0.0.1:8000/readyz"
    assert probe_url("web", {"GUNICORN_BIND": "0.0.0.0:9000"}) == "http://127.0.0.1:9000/readyz"
    assert probe_url("worker", {"WORKER_METRICS_PORT": "9808"}) == "http://127.0.0.1:9808/healthz"
    with pytest.raises(ValueError, match="WORKER_METRICS_PORT"):
        probe_url("worker", {"WORKER_METRICS_PORT": "0"})
    with pytest.raises(ValueError, match="probe web or worker"):
        probe_url("beat", {})


@pytest.fixture
def server():
    answers = {"status": 200}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(answers["status"])
            self.end_headers()
            self.wfile.write(b'{"status": "unavailable"}')

        def log_message(self, *args):
            return None

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_port, answers
    finally:
        httpd.shutdown()


def test_exit_status_follows_the_answer(server, monkeypatch, capsys):
    port, answers = server
    monkeypatch.setenv("WORKER_METRICS_PORT", str(port))
    assert main(["worker"]) == 0
    answers["status"] = 503
    assert main(["worker"]) == 1
    assert "503" in capsys.readouterr().err
    assert main([]) == 2


def test_nothing_listening_is_unhealthy(monkeypatch):
    from tests.scheduler.conftest import free_port

    monkeypatch.setenv("GUNICORN_BIND", f"127.0.0.1:{free_port()}")
    assert main(["web"]) == 1
