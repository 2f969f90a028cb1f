"""`python -m scheduler soak`: the real cycle on a simulated clock meets the loop and reason
targets, and runs on a database of its own."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_a_short_soak_meets_the_targets_without_touching_the_portal_database(tmp_path):
    var = tmp_path / "var"
    var.mkdir()
    env = {
        **os.environ,
        # Where the portal's own data would be: the soak must leave both alone.
        "PORTAL_VAR_DIR": str(var),
        "DATABASE_URL": f"sqlite:///{var / 'portal.sqlite3'}",
    }
    run = subprocess.run(
        [sys.executable, "-m", "scheduler", "soak", "--hours", "3", "--seed", "7", "--step", "60"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["targets_met"], report["targets"]
    assert report["max_rescheduling_evictions_per_job_per_hour"] <= 1
    assert report["never_runnable_without_never_reason"] == 0
    assert report["placed_back_on_the_same_node_within_interval"] == 0
    assert report["never_reason_but_runnable"] == 0
    # The workload really ran: jobs arrived, some ran to the end, some can never run.
    assert report["cycles"] == 181
    assert report["jobs"]["submitted"] > 10
    assert report["jobs"].get("succeeded", 0) > 0
    assert report["never_runnable_waiting"] > 0
    # Plan ahead ran on the same clock: jobs were estimated, and the share that started within
    # their first estimate's range is reported.
    estimated = report["estimated_start"]
    assert estimated["jobs_estimated"] > 0
    assert estimated["started_with_a_range"] > 0
    assert 0 <= estimated["started_within_estimated_range_share"] <= 1
    assert list(var.iterdir()) == []


def test_bad_arguments_name_the_option():
    run = subprocess.run(
        [sys.executable, "-m", "scheduler", "soak", "--hours", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (run.returncode, run.stderr.strip()) == (2, "--hours and --step must be positive")


def test_a_soak_under_cluster_faults_backs_off_within_the_bound_and_never_leaves_a_reason_blank(
    tmp_path,
):
    env = {**os.environ, "PORTAL_VAR_DIR": str(tmp_path)}
    command = ["soak", "--hours", "2", "--seed", "3", "--step", "30", "--cluster-faults"]
    run = subprocess.run(
        [sys.executable, "-m", "scheduler", *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    faults = report["cluster_faults"]
    assert report["targets_met"], report["targets"]
    assert report["targets"]["max_start_attempts_per_job_per_hour <= backoff_bound_per_hour"]
    assert report["targets"]["blank_reasons_while_waiting == 0"]
    assert faults["blank_reasons_while_waiting"] == 0
    assert faults["gpus_held_while_backing_off"] == 0
    assert 0 < faults["max_start_attempts_per_job_per_hour"] <= faults["backoff_bound_per_hour"]
    # Faults were injected, and the jobs kept them as failed start attempts.
    assert sum(faults["faults_injected"].values()) > 0
    assert sum(faults["start_failures"].values()) > 0


def test_a_negative_plan_interval_is_refused():
    run = subprocess.run(
        [sys.executable, "-m", "scheduler", "soak", "--plan-every", "-1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (run.returncode, run.stderr.strip()) == (2, "--plan-every must be >= 0")


def test_switches_off_sets_upstreams_values_and_leaves_the_rest():
    from bench.soak import switches_off
    from scheduler.core.config import DEFAULT_CONF_TEXT, parse_conf_text

    seed, before = (
        parse_conf_text(DEFAULT_CONF_TEXT),
        parse_conf_text(switches_off(DEFAULT_CONF_TEXT)),
    )
    proportion = before.plugin("proportion")
    assert proportion.arguments == {"lendIdle": False, "excludeNeverRunnable": False}
    assert proportion.enabled("enableHierarchy")
    assert before.plugin("rescheduling") == seed.plugin("rescheduling")
    assert before.actions == seed.actions
    capacity = "actions: allocate\ntiers:\n- plugins:\n  - name: capacity\n"
    assert parse_conf_text(switches_off(capacity)).plugin("capacity").arguments == {
        "excludeNeverRunnable": False
    }


def _leg(idle, utilisation, evictions, met=True):
    return {
        "idle_gpu_seconds_while_fitting_job_waits": idle,
        "gpu_utilisation": utilisation,
        "evictions_per_hour": evictions,
        "mean_wait_seconds": 100.0,
        "jobs_fitting_idle_gpus_longer_than_two_cycles": 0,
        "of_which_reason_names_the_rule": 0,
        "targets_met": met,
    }


def test_the_comparison_holds_the_after_run_to_the_issues_targets():
    from bench.soak import compare

    good = compare(_leg(10_000, 0.5, 2.0), _leg(500, 0.5, 2.0))
    assert good["targets_met"]
    assert good["idle_after_over_before"] == 0.05
    assert good["gpu_utilisation"] == {"before": 0.5, "after": 0.5}
    for after in (_leg(501, 0.5, 2.0), _leg(0, 0.49, 2.0), _leg(0, 0.5, 2.1)):
        assert not compare(_leg(10_000, 0.5, 2.0), after)["targets_met"]
    assert not compare(_leg(10_000, 0.5, 2.0), _leg(0, 0.6, 1.0, met=False))["targets_met"]
    assert compare(_leg(0, 0.5, 2.0), _leg(0, 0.5, 2.0))["idle_after_over_before"] is None


def test_before_after_runs_both_days_and_compares_them():
    run = subprocess.run(
        [sys.executable, "-m", "scheduler", "soak", "--before-after", "--hours", "1",
         "--seed", "7", "--step", "300"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert run.returncode in (0, 1), run.stderr
    out = json.loads(run.stdout)
    assert (out["before"]["cycles"], out["after"]["cycles"]) == (13, 13)
    assert (out["before"]["conf"], out["after"]["conf"]) == ("file", "seed")
    idle = out["comparison"]["idle_gpu_seconds_while_fitting_job_waits"]
    assert idle == {
        "before": out["before"]["idle_gpu_seconds_while_fitting_job_waits"],
        "after": out["after"]["idle_gpu_seconds_while_fitting_job_waits"],
    }
    assert run.returncode == (0 if out["comparison"]["targets_met"] else 1)
