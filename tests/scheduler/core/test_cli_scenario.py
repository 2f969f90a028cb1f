import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _run(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scheduler", "scenario", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_invalid_scenario_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "jobs": [
                    {"name": "j", "queue": "q", "tasks": [{"name": "t", "requests": {"gpu": "x"}}]}
                ]
            }
        )
    )
    run = _run(bad)
    assert run.returncode == 2
    assert run.stderr.strip() == (
        "jobs[0].tasks[0].requests.gpu: expected whole GPUs or a share of one GPU in steps of 0.001"
    )


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_json_and_yaml_scenarios_run(tmp_path, suffix):
    case = {
        "nodes": [{"name": "n1", "allocatable": {"gpu": 8, "cpu": 8000, "memory": 10**10}}],
        "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "tasks": [{"name": "t", "requests": {"gpu": 1}}]}],
    }
    path = tmp_path / f"case{suffix}"
    path.write_text(json.dumps(case))  # JSON is valid YAML
    run = _run(path)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["bind"] == {"t": "n1"}
