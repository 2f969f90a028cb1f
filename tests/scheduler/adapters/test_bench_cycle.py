"""bench_cycle's summary line, and a tiny run on each backend end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.adapters.bench_cycle import summary

ROOT = Path(__file__).resolve().parents[3]


def test_steady_figures_are_medians_of_the_cycles_after_the_first():
    lines = [
        {"total_ms": 9000.0, "list_nodes_ms": 4000.0, "list_pods_ms": 1000.0},
        {"total_ms": 300.0, "list_nodes_ms": 1.0, "list_pods_ms": 2.0},
        {"total_ms": 500.0, "list_nodes_ms": 3.0, "list_pods_ms": 4.0},
        {"total_ms": 400.0, "list_nodes_ms": 2.0, "list_pods_ms": 1.0},
    ]

    result = summary("kubernetes", lines, {"cache_rss_mb": 12.5})

    assert result == {
        "summary": True,
        "backend": "kubernetes",
        "cycles": 4,
        "first_cycle_seconds": 9.0,
        "steady_cycle_seconds": 0.4,
        "observe_seconds": 0.003,
        "cache_rss_mb": 12.5,
    }


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["simulated", "kubernetes"])
def test_a_tiny_run_prints_one_line_per_cycle_then_the_summary(backend, tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.local",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'bench.sqlite3'}",
        "PORTAL_VAR_DIR": str(tmp_path),
    }
    command = [sys.executable, "-m", "scheduler.adapters.bench_cycle", "--nodes", "3",
               "--jobs", "6", "--queues", "2", "--cycles", "3", "--backend", backend,
               "--foreign-pods", "12", "--churn", "2"]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip

    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [line.get("cycle") for line in lines[:-1]] == [1, 2, 3]
    assert all(not line["error"] for line in lines[:-1])
    assert lines[0]["binds"] > 0
    last = lines[-1]
    assert last["summary"] is True
    assert last["steady_cycle_seconds"] > 0
    if backend == "kubernetes":
        assert last["cache_nodes"] == 3
        assert last["cache_pods"] >= 12  # the other workloads' pods and the portal's own
        assert last["cache_rss_mb"] >= 0
