"""`./dev run` leaves nothing running when its web server ends, however it ends: its port
already taken (runserver exits at once, after the worker has started), or the web server
killed from outside."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


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
