"""bench_cycle's summary line, and a tiny run on each backend end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cycle import comparison, others_usage, summary
from tests.scheduler.adapters import conftest as emulator

# The emulated Kubernetes API server of the adapters' tests, as fixtures of this module (its
# `cluster` shadows the suite's simulated one).
cluster, backend, sleeps = emulator.cluster, emulator.backend, emulator.sleeps

ROOT = Path(__file__).resolve().parents[2]


def test_steady_figures_are_medians_of_the_cycles_after_the_first():
    lines = [
        {"total_ms": 9000.0, "cpu_ms": 8000.0, "list_nodes_ms": 4000.0, "list_pods_ms": 1000.0},
        {"total_ms": 300.0, "cpu_ms": 200.0, "list_nodes_ms": 1.0, "list_pods_ms": 2.0},
        {"total_ms": 500.0, "cpu_ms": 400.0, "list_nodes_ms": 3.0, "list_pods_ms": 4.0},
        {"total_ms": 400.0, "cpu_ms": 300.0, "list_nodes_ms": 2.0, "list_pods_ms": 1.0},
    ]

    result = summary("kubernetes", lines, {"cache_rss_mb": 12.5})

    assert result == {
        "summary": True,
        "backend": "kubernetes",
        "cycles": 4,
        "first_cycle_seconds": 9.0,
        "steady_cycle_seconds": 0.4,
        "steady_cycle_cpu_seconds": 0.3,
        "observe_seconds": 0.003,
        "cache_rss_mb": 12.5,
    }


def test_the_comparison_divides_kubernetes_by_simulated():
    simulated = {"steady_cycle_seconds": 2.0, "steady_cycle_cpu_seconds": 1.0}
    kubernetes = {"steady_cycle_seconds": 2.5, "steady_cycle_cpu_seconds": 1.2}

    assert comparison(simulated, kubernetes) == {
        "comparison": True,
        "steady_cycle_ratio": 1.25,
        "steady_cycle_cpu_ratio": 1.2,
    }


def test_the_simulated_nodes_carry_what_the_emulators_other_pods_request():
    usage = others_usage(nodes=3, foreign_pods=7)

    # Round robin: 3, 2, 2 pods of 100m CPU and 128Mi each.
    assert usage == [
        {"pods": 3, "cpu": 300, "memory": 3 * 128 * 1024**2},
        {"pods": 2, "cpu": 200, "memory": 2 * 128 * 1024**2},
        {"pods": 2, "cpu": 200, "memory": 2 * 128 * 1024**2},
    ]
    assert others_usage(nodes=2, foreign_pods=0) == [{}, {}]


@pytest.mark.slow
def bench_lines(tmp_path: Path, *args: str) -> list[dict]:
    """bench_cycle's JSON lines, run on a SQLite file of its own."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.local",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'bench.sqlite3'}",
        "PORTAL_VAR_DIR": str(tmp_path),
    }
    command = [sys.executable, "-m", "scheduler.adapters.bench_cycle", *args]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_a_tiny_run_of_both_backends_prints_cycles_summaries_and_the_comparison(tmp_path):
    lines = bench_lines(tmp_path, "--nodes", "3", "--jobs", "6", "--queues", "2", "--cycles",
                        "3", "--backend", "both", "--foreign-pods", "12", "--churn", "2")  # fmt: skip
    simulated, kubernetes, compared = lines[3], lines[7], lines[8]
    for cycles in (lines[0:3], lines[4:7]):
        assert [line["cycle"] for line in cycles] == [1, 2, 3]
        assert all(not line["error"] for line in cycles)
        assert cycles[0]["binds"] > 0
    assert (simulated["backend"], kubernetes["backend"]) == ("simulated", "kubernetes")
    assert simulated["summary"] is kubernetes["summary"] is True
    assert kubernetes["steady_cycle_seconds"] > 0
    assert kubernetes["cache_nodes"] == 3
    assert kubernetes["cache_pods"] >= 12  # the other workloads' pods and the portal's own
    assert kubernetes["cache_relists"] == 0
    assert compared["comparison"] is True
    assert compared["steady_cycle_ratio"] > 0


def test_plan_busy_alternates_cycles_beside_a_planning_worker(tmp_path):
    lines = bench_lines(tmp_path, "--nodes", "2", "--jobs", "12", "--queues", "2", "--cycles",
                        "2", "--plan-busy")  # fmt: skip
    cycles, figures = lines[:-1], lines[-1]["plan_busy"]
    assert [line["cycle"] for line in cycles] == [1, 2, 3, 4, 5, 6]
    assert [line.get("plan_busy") for line in cycles[2:]] == [True, False, True, False]
    assert all(not line["error"] for line in cycles)
    assert figures["cycles_each"] == 2
    assert figures["plan_runs"] >= 1  # the worker planned while the cycles ran
    assert figures["cpu_ratio"] > 0


def test_the_simulated_usage_is_what_the_watch_cache_sums_on_the_emulator(cluster, backend):
    from scheduler.adapters.cluster.testing.emulator import seed as emulator_seed

    cluster.on_loop(lambda: emulator_seed(cluster.store, nodes=3, gpus=8, foreign_pods=7))

    observed = {node.name: node.used_by_others for node in backend.list_nodes()}
    assert [observed[f"node-{i:05d}"] for i in range(3)] == others_usage(nodes=3, foreign_pods=7)
