"""bench.load_mixed in a 5-second, 20-client run: accounting, not throughput.

Gunicorn, PostgreSQL, Redis and a real Celery worker and beat: every acknowledged submission
is stored exactly once, nothing answers 5xx, and the scheduler gives every job a decision
after the load stops. Needs wrk, PostgreSQL on 127.0.0.1:5432 (user postgres) and Redis
(LOAD_TEST_REDIS_URL, else REDIS_URL, else redis://127.0.0.1:6379/15; its Celery keys are
deleted, so give it a database no running worker uses).
"""

import os

import pytest

from bench import load_mixed
from tests.bench.test_api_load import NEEDS_WRK_AND_POSTGRES

REDIS_URL = os.environ.get(
    "LOAD_TEST_REDIS_URL", os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/15"
)


def _redis_reachable() -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=2).ping())
    except Exception:  # noqa: BLE001 - any failure means "skip"
        return False


pytestmark = [
    pytest.mark.redis,
    *NEEDS_WRK_AND_POSTGRES,
    pytest.mark.skipif(not _redis_reachable(), reason=f"no Redis at {REDIS_URL}"),
]


def test_short_mixed_load_loses_nothing_and_the_scheduler_catches_up() -> None:
    summary = load_mixed.run(
        [
            "--clients",
            "20",
            "--duration",
            "5",
            "--users",
            "6",
            "--tenants",
            "3",
            "--workers",
            "2",
            "--celery-concurrency",
            "1",
            "--cycle-seconds",
            "1",
            "--catch-up-timeout",
            "90",
            "--db",
            f"portal_load_mixed_test_{os.getpid()}",
            "--redis-url",
            REDIS_URL,
        ]
    )
    created = summary["created"]
    assert created > 0
    assert summary["list"]["requests"] > 0
    assert set(summary["submit"]["status"]) == {"201"}
    assert set(summary["list"]["status"]) == {"200"}
    assert summary["server_errors"] == 0
    assert summary["duplicates"] == 0
    assert summary["ok_missing_in_db"] == 0
    assert summary["ok_without_name"] == 0
    assert summary["rows"] >= created
    assert summary["accounting_ok"]
    assert summary["caught_up"], summary
    assert sum(summary["jobs_by_status"].values()) == summary["rows"]
