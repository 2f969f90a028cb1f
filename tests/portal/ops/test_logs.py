"""Log lines: one per 4xx answer without its traceback, JSON lines on request, request ids."""

import json
import logging

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils.log import configure_logging

from portal.ops.logs import JsonFormatter, logging_config
from portal.ops.requestid import set_request_id

pytestmark = pytest.mark.django_db


@pytest.fixture
def use_logging():
    """Configure logging the way Django does at startup (its defaults, then LOGGING), and put
    the test settings' configuration back afterwards."""

    def configure(log_format: str) -> None:
        configure_logging(
            settings.LOGGING_CONFIG, logging_config(log_format=log_format, level="INFO")
        )

    yield configure
    configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)


def lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


@override_settings(DEBUG=True)  # Django's own console handler is active only with DEBUG
def test_a_403_and_a_404_log_one_line_each_without_traceback(
    use_logging, capsys, researcher_client
):
    use_logging("plain")
    capsys.readouterr()
    assert researcher_client.get("/admin-area/config/").status_code == 403
    assert researcher_client.get("/jobs/999999/").status_code == 404
    logged = lines(capsys)
    assert len(logged) == 2, logged
    assert "Forbidden" in logged[0]
    assert "Not Found: /jobs/999999/" in logged[1]
    assert not any("Traceback" in line for line in logged)


def test_json_lines_carry_the_request_id_and_the_status(use_logging, capsys, researcher_client):
    use_logging("json")
    capsys.readouterr()
    response = researcher_client.get("/jobs/999999/", HTTP_X_REQUEST_ID="req-42")
    assert response["X-Request-ID"] == "req-42"
    (line,) = lines(capsys)
    entry = json.loads(line)
    assert entry["request_id"] == "req-42"
    assert entry["status_code"] == 404
    assert entry["level"] == "WARNING"
    assert entry["logger"] == "django.request"
    assert entry["message"] == "Not Found: /jobs/999999/"
    assert "request" not in entry


def test_a_forged_or_missing_request_id_is_replaced(client):
    forged = client.get("/accounts/login/", HTTP_X_REQUEST_ID='x" level="ERROR').get("X-Request-ID")
    made_up = client.get("/accounts/login/").get("X-Request-ID")
    for value in (forged, made_up):
        assert len(value) == 32
        assert value.isalnum()
    assert forged != made_up


def test_json_formatter_writes_extras_and_the_exception_on_one_line():
    record = logging.LogRecord(
        "scheduler.cycle", logging.ERROR, __file__, 1, "cycle %s", (7,), None
    )
    record.binds = 3
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys

        record.exc_info = sys.exc_info()
    token = set_request_id("abc")
    try:
        text = JsonFormatter().format(record)
    finally:
        from portal.ops.requestid import reset_request_id

        reset_request_id(token)
    assert "\n" not in text
    entry = json.loads(text)
    assert entry["message"] == "cycle 7"
    assert entry["binds"] == 3
    assert entry["request_id"] == "abc"
    assert entry["exception"].startswith("Traceback")
    assert "RuntimeError: boom" in entry["exception"]


def test_an_unknown_log_format_is_refused():
    with pytest.raises(ValueError, match="LOG_FORMAT must be 'plain' or 'json'"):
        logging_config(log_format="xml", level="INFO")
