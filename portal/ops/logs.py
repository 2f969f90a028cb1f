"""Log formatting shared by Django, Celery and gunicorn (no Django imports: gunicorn.conf.py
loads this before any settings exist).

`LOG_FORMAT=json` turns every record into one JSON object per line: time, level, logger,
message, the request id of the request or task that logged it, any `extra={...}` fields, and
the traceback as one string. The plain format stays the default for people reading a console.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from portal.ops.requestid import current_request_id

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "request_id",
    "taskName",
}
# Objects Django passes in `extra` that are no use in a log line (and do not serialise).
_DROPPED = frozenset({"request", "server_time"})
PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"


class RequestIdFilter(logging.Filter):
    """Adds `record.request_id` (or "-") so both formats can print it. Django logs a 4xx
    response after the middleware returned (the request id is no longer current), but it
    passes the request along."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", None):
            request = getattr(record, "request", None)
            record.request_id = getattr(request, "request_id", None) or current_request_id() or "-"
        return True


class ClientErrorWithoutTraceback(logging.Filter):
    """A 4xx answer is the client's mistake, not the server's: Django logs PermissionDenied
    and Http404 with their tracebacks (django.utils.log.log_response); keep the one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or current_request_id(),
        }
        if record.name == "gunicorn.access" and isinstance(record.args, dict):
            entry.update(_access_fields(record.args))
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in _DROPPED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


# gunicorn's access log atoms (https://docs.gunicorn.org/en/stable/settings.html#access-log-format)
_ACCESS_ATOMS = {
    "remote_addr": "h",
    "method": "m",
    "path": "U",
    "status": "s",
    "bytes": "B",
    "user_agent": "a",
    "request_id": "{x-request-id}o",
}


def _access_fields(atoms: dict) -> dict[str, Any]:
    fields: dict[str, Any] = {
        name: atoms[atom]
        for name, atom in _ACCESS_ATOMS.items()
        if atoms.get(atom) not in (None, "-")
    }
    if "D" in atoms:
        fields["duration_ms"] = round(int(atoms["D"]) / 1000, 1)
    return fields


def gunicorn_logconfig() -> dict[str, Any]:
    """gunicorn's `logconfig_dict` for LOG_FORMAT=json: its error and access loggers on stdout
    and stderr as JSON lines (the access line carries the X-Request-ID the app answered)."""
    handler = {"class": "logging.StreamHandler", "formatter": "json"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "portal.ops.logs.JsonFormatter"}},
        "handlers": {
            "error_console": {**handler, "stream": "ext://sys.stderr"},
            "console": {**handler, "stream": "ext://sys.stdout"},
        },
        "loggers": {
            "gunicorn.error": {"level": "INFO", "handlers": ["error_console"], "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["console"], "propagate": False},
        },
        "root": {"level": "INFO", "handlers": ["error_console"]},
    }


def logging_config(*, log_format: str, level: str) -> dict[str, Any]:
    """The LOGGING setting: one console handler on the root logger. Django's own `django`
    logger gets no handler of its own (its default console handler printed every line a
    second time when DEBUG was on); its records reach the root once."""
    if log_format not in ("plain", "json"):
        raise ValueError(f"LOG_FORMAT must be 'plain' or 'json', not {log_format!r}")
    formatter = (
        {"()": "portal.ops.logs.JsonFormatter"}
        if log_format == "json"
        else {"format": PLAIN_FORMAT}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "request_id": {"()": "portal.ops.logs.RequestIdFilter"},
            "client_errors": {"()": "portal.ops.logs.ClientErrorWithoutTraceback"},
        },
        "formatters": {"default": formatter},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "default",
                "filters": ["request_id", "client_errors"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "django": {"handlers": [], "level": level, "propagate": True},
            # Celery's worker logs through the root logger (CELERY_WORKER_HIJACK_ROOT_LOGGER
            # is off), so its lines get the same format.
            "celery": {"handlers": [], "level": level, "propagate": True},
        },
    }
