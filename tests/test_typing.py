"""mypy over the runtime code (pyproject.toml's [tool.mypy]): the pure core strict and clean,
the Django side at mypy's default level, with what it still finds listed per module in
tests/mypy_baseline.txt. The total may only go down: a change that adds a finding fails here,
and so does one that removes some until the baseline is lowered to match:

    .venv/bin/python -m tests.test_typing --write
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "tests" / "mypy_baseline.txt"
CORE = "scheduler/core/"
_FINDING = re.compile(r"^(?P<path>[\w/.-]+\.py):\d+: error: ")
HEADER = """\
# mypy's findings on the Django side not fixed yet, per module, and their total.
# tests/test_typing.py fails when the total goes up, and when it goes down until this file is
# lowered with: .venv/bin/python -m tests.test_typing --write
"""


def findings() -> Counter[str]:
    """Errors per file, from one mypy run with the project's configuration."""
    run = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if run.returncode not in (0, 1):  # 2: mypy itself failed (configuration, crash)
        raise RuntimeError(f"mypy exited {run.returncode}: {run.stderr or run.stdout}")
    found: Counter[str] = Counter()
    for line in run.stdout.splitlines():
        if match := _FINDING.match(line):
            found[match["path"]] += 1
    return found


def baseline() -> tuple[int, Counter[str]]:
    total, per_module = 0, Counter[str]()
    for line in BASELINE.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        name, count = line.rsplit(maxsplit=1)
        if name == "total":
            total = int(count)
        else:
            per_module[name] = int(count)
    return total, per_module


def write_baseline(found: Counter[str]) -> None:
    lines = [f"{path} {count}" for path, count in sorted(found.items())]
    BASELINE.write_text(HEADER + f"total {found.total()}\n" + "\n".join(lines) + "\n")


@pytest.mark.slow
def test_mypy_finds_nothing_in_the_core_and_no_more_than_the_baseline_elsewhere():
    found = findings()
    core = {path: n for path, n in found.items() if path.startswith(CORE)}
    assert core == {}, "the core is strict and clean: run .venv/bin/mypy scheduler/core"
    total, listed = baseline()
    grew = {path: (listed.get(path, 0), n) for path, n in found.items() if n > listed.get(path, 0)}
    assert found.total() <= total, (
        f"mypy finds {found.total()} errors, the baseline allows {total}; "
        f"modules with more than listed (listed, found): {grew}; run .venv/bin/mypy"
    )
    assert found.total() == total, (
        f"mypy finds {found.total()} errors, fewer than the baseline's {total}: lower it with "
        ".venv/bin/python -m tests.test_typing --write"
    )


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(__doc__)
    counted = findings()
    write_baseline(counted)
    print(f"{BASELINE.relative_to(ROOT)}: {counted.total()} findings in {len(counted)} modules")
