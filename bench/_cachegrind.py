"""Instructions a command executes, counted by valgrind's cachegrind.

Instruction counts barely move with the host's load or speed, so two versions of the code can
be compared on a shared machine where wall-clock and even CPU seconds vary by a third.
"""

import os
import re
import shutil
import subprocess


def instructions(command: list[str], env: dict[str, str] | None = None) -> int:
    """Instructions executed by ``command`` (its own process only); PYTHONHASHSEED is pinned so
    set and dict orders, hence the work done, repeat exactly."""
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind not found (apt-get install -y valgrind)")
    run = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
        + command,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {}), "PYTHONHASHSEED": "0"},
    )
    refs = re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
    if refs is None:
        raise SystemExit(run.stderr[-2000:])
    return int(refs.group(1).replace(",", ""))
