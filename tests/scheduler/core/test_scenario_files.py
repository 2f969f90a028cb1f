"""Every scenario file (shared examples and our own) passes tools/check_scenarios.py."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared"
OURS = ROOT / "scheduler" / "scenarios"


def _check(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            str(SHARED / "tools" / "check_scenarios.py"),
            "--python",
            sys.executable,
            str(folder),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )


@pytest.mark.parametrize(
    "folder", [pytest.param(SHARED / "scenarios", id="shared"), pytest.param(OURS, id="ours")]
)
def test_scenarios_pass(folder):
    if not (SHARED / "tools" / "check_scenarios.py").exists():
        pytest.skip(f"{SHARED} (the shared contract folder with check_scenarios.py) does not exist")
    run = _check(folder)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().endswith("0 failed")
