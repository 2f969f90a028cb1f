"""bench.api_load in a 3-second, 5-connection run: every 201 is stored exactly once."""

import os
import shutil
import subprocess

import pytest

from bench import api_load


def postgres_reachable() -> bool:
    if not shutil.which("psql"):
        return False
    probe = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-At", "-c", "SELECT 1"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    return probe.returncode == 0


# The load scripts' own needs (the mixed-load test adds Redis).
NEEDS_WRK_AND_POSTGRES = [
    pytest.mark.skipif(
        shutil.which("wrk") is None, reason="wrk is not installed (apt-get install wrk)"
    ),
    pytest.mark.skipif(
        not postgres_reachable(), reason="no PostgreSQL on 127.0.0.1:5432 (user postgres)"
    ),
]
pytestmark = NEEDS_WRK_AND_POSTGRES


def test_short_load_run_accounts_for_every_created_job() -> None:
    summary = api_load.run(
        [
            "--duration",
            "3",
            "--warmup",
            "1",
            "--connections",
            "5",
            "--threads",
            "1",
            "--workers",
            "2",
            "--db",
            f"portal_load_test_{os.getpid()}",  # several test runs may share the server
            "--redis-url",
            os.environ.get(
                "LOAD_TEST_REDIS_URL", os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/15"
            ),
        ]
    )
    created = summary["status"].get("201", 0)
    assert created > 0
    assert set(summary["status"]) == {"201"}
    assert summary["duplicates"] == 0
    assert summary["ok_missing_in_db"] == 0
    assert summary["ok_without_name"] == 0
    assert summary["rows"] >= created
    assert summary["tasks"] == summary["rows"]
    assert summary["accounting_ok"]
