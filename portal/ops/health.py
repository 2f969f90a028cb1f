"""What the probes ask. Each check returns None when healthy, else a short reason.

The web's readiness depends on what a request needs: the database and the broker (a submit
queues a cycle). The scheduling cycle's age is not part of it: a stalled worker must not take
the pages down with it. The cycle worker has its own probe (portal.ops.worker), and the age is
a metric (`gpuportal_cycle_age_seconds`); `/readyz?check=cycle` adds it for a monitor that
only speaks HTTP.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import connection

from portal.ops.selectors import cycle_latest_finished

BROKER_TIMEOUT_SECONDS = 2.0


def database_check() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


def broker_check() -> str | None:
    from portal.celery import app

    url = app.conf.broker_url or ""
    if url.startswith("filesystem"):
        # The embedded broker is a folder: ready when the worker and the web can both write it.
        folder = Path(app.conf.broker_transport_options.get("data_folder_in", ""))
        return None if folder.is_dir() else f"broker folder {folder} is missing"
    try:
        with app.connection_for_write(connect_timeout=BROKER_TIMEOUT_SECONDS) as conn:
            conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_SECONDS)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


def cycle_check(*, now: datetime) -> str | None:
    """Stale when no cycle finished in the last CYCLE_MAX_AGE_SECONDS (an errored cycle still
    counts: it ran; its error is a metric and a log line of its own)."""
    limit = settings.CYCLE_MAX_AGE_SECONDS
    last = cycle_latest_finished()
    if last is None or last.finished_at is None:
        return "no scheduling cycle has finished yet"
    age = (now - last.finished_at).total_seconds()
    if age > limit:
        return f"the last scheduling cycle finished {age:.0f} s ago (limit {limit:g} s)"
    return None
