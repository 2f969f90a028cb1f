"""deploy/smoke.sh, as a user runs it against their cluster, here against the emulated API
server served as a process on the wall clock (KUBECONFIG pointing at it): a 2-pod gang
placed, evicted and cleaned up, exit status 0; and a clear failure when nothing fits."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scheduler.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "kubeconfig"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "scheduler.adapters.cluster.testing.emulator",
            "--port",
            str(free_port()),
            "--kubeconfig",
            str(path),
            "--nodes",
            "2",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while not path.exists():
            assert server.poll() is None, server.stdout.read().decode()
            assert time.monotonic() < deadline, "the emulator did not start"
            time.sleep(0.2)
        yield path
    finally:
        server.terminate()
        server.wait(timeout=10)


def smoke(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHON": sys.executable}
    return subprocess.run(
        [str(ROOT / "deploy" / "smoke.sh"), "--timeout", "30", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_smoke_script_places_evicts_and_cleans_up_a_gang(kubeconfig):
    result = smoke(kubeconfig)

    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "smoke: nodes: 2 usable, gang placed on node-00000, node-00001"
    assert lines[1] == "smoke: created: 2 pods in gpu-jobs, unbound, schedulerName gpuportal"
    assert lines[2] == "smoke: placed: 2 pods bound through pods/binding and Running"
    assert lines[3].startswith("smoke: evicted: ")
    assert lines[3].endswith("deleted gracefully and gone")
    # The gang's owner object goes too.
    assert re.fullmatch(
        r"smoke: cleaned up: no test pod left, ConfigMap gpu-jobs/gp-[a-z][0-9a-z]{5}-smoke-[0-9a-f]{6} deleted",
        lines[4],
    )
    assert lines[5:] == [
        "smoke: watched: the portal's ConfigMaps, Services, NetworkPolicies in gpu-jobs",
        "smoke: OK",
    ]


def test_the_smoke_script_checks_a_tenants_namespace_as_the_portal_names_it(kubeconfig):
    result = smoke(kubeconfig, "--tenant", "vision", "--namespace-prefix", "team-")

    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "smoke: created: 2 pods in team-vision, unbound, schedulerName gpuportal"
    assert re.fullmatch(
        r"smoke: cleaned up: no test pod left, ConfigMap team-vision/gp-[a-z][0-9a-z]{5}-smoke-[0-9a-f]{6} deleted",
        lines[4],
    )


def test_the_smoke_script_fails_clearly_when_nothing_fits(kubeconfig):
    result = smoke(kubeconfig, "--gpus", "64")

    assert result.returncode == 1
    assert result.stdout.strip() == (
        "smoke: FAILED: no Ready, schedulable, untainted node with room for the test pods"
    )
