"""`./dev run` leaves nothing running when its web server ends, however it ends: its port
already taken (runserver exits at once, after the worker has started), or the web server
killed from outside. An install says how it is getting on."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def processes(pattern: str) -> list[int]:
    answer = subprocess.run(
        ["pgrep", "-f", "--", pattern],  # noqa: S607
        capture_output=True,
        text=True,
        check=False,
    )
    return [int(pid) for pid in answer.stdout.split()]


def dev_run_env(var_dir: Path, port: int) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(PORTAL_VAR_DIR=str(var_dir), PORTAL_PORT=str(port), DEMO_PASSWORD="x-demo-pass")
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def assert_no_worker_left(var_dir: Path) -> None:
    """Neither the worker with beat nor the plan-ahead worker is left."""
    for pattern in (
        f"--schedule {var_dir}/celerybeat-schedule",
        f"--pidfile {var_dir}/celery-plan.pid",
    ):
        deadline = time.monotonic() + 15
        while processes(pattern) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = processes(pattern)
        for pid in left:  # do not leave them to the next test either
            os.kill(pid, signal.SIGKILL)
        assert left == [], pattern


@pytest.mark.slow
def test_dev_run_stops_its_worker_when_the_web_server_cannot_start(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        answer = subprocess.run(  # noqa: S603
            [str(ROOT / "dev"), "run"],
            cwd=ROOT,
            env=dev_run_env(tmp_path, port),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert answer.returncode != 0
    assert "That port is already in use" in answer.stdout + answer.stderr
    assert_no_worker_left(tmp_path)


@pytest.mark.slow
def test_dev_run_stops_its_worker_when_the_web_server_is_killed(tmp_path):
    port = free_port()
    dev = subprocess.Popen(  # noqa: S603
        [str(ROOT / "dev"), "run"],
        cwd=ROOT,
        env=dev_run_env(tmp_path, port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240
        while not (web := processes(f"runserver 127.0.0.1:{port}")):
            assert dev.poll() is None, "./dev run ended before its web server started"
            assert time.monotonic() < deadline, "the web server never started"
            time.sleep(0.5)
        assert processes(f"--schedule {tmp_path}/celerybeat-schedule")  # the worker is up
        assert processes(f"--pidfile {tmp_path}/celery-plan.pid")  # and the plan worker
        for pid in web:
            os.kill(pid, signal.SIGTERM)
        dev.wait(timeout=60)
    finally:
        if dev.poll() is None:
            dev.kill()
    assert_no_worker_left(tmp_path)


# What pip prints installing a lock, trimmed: one package fetched, one already there.
PIP_OUTPUT = """\
Looking in links: /opt/wheels
Collecting django==5.2.19 (from -r requirements/dev.lock (line 12))
  Downloading django-5.2.19-py3-none-any.whl (8.3 MB)
Requirement already satisfied: asgiref==3.8.1 in ./venv/lib/python3.11/site-packages (3.8.1)
Collecting celery==5.5.3 (from -r requirements/dev.lock (line 9))
Installing collected packages: django, celery
Successfully installed celery-5.5.3 django-5.2.19
"""


def test_a_first_install_says_what_it_installs_how_many_and_how_long(tmp_path):
    """A fresh virtualenv's install prints each package it fetches, numbered out of the
    lock's count, with the seconds so far, then the total time (pip itself is a stand-in
    that prints what pip prints; everything else runs the real interpreter)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (tmp_path / "pip-output.txt").write_text(PIP_OUTPUT)
    fake = venv / "bin" / "python"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1 $2 $3" = "-m pip install" ]; then\n'
        f'  cat "{tmp_path}/pip-output.txt"; exit 0\n'
        "fi\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    fake.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env["VENV"] = str(venv)
    answer = subprocess.run(  # noqa: S603
        [str(ROOT / "dev"), "screenshots", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert answer.returncode == 0, answer.stderr
    total = sum("==" in line for line in (ROOT / "requirements/dev.lock").read_text().splitlines())
    lines = [line for line in answer.stdout.splitlines() if line.startswith("dev:")]
    assert lines[0] == f"dev: installing requirements/dev.lock: {total} packages into {venv}"
    assert re.fullmatch(rf"dev:   \[1/{total}\] django==5\.2\.19 \(\d+ s\)", lines[1])
    # asgiref, already there, is counted without a line of its own
    assert re.fullmatch(rf"dev:   \[3/{total}\] celery==5\.5\.3 \(\d+ s\)", lines[2])
    assert re.fullmatch(r"dev:   unpacking and installing \(\d+ s so far\)", lines[3])
    assert re.fullmatch(rf"dev: {total} packages ready in \d+ s", lines[4])
    assert (venv / ".installed-dev").exists()
    assert "usage:" in answer.stdout  # then the command itself ran
