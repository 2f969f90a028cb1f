"""docker-compose.yml without Docker: every service's command line and health check, exactly
as written in the file, started on this machine against the test database's server and a
private Redis, with web, workers and beat working together for a few seconds.

What differs from a container is only where things are: the database and Redis addresses,
the ports (several services share this host) and the writable folders. Those few variables
are overridden below; everything else comes from the file and its `${VAR:-default}`s.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from django.db import connection

from tests.scheduler.conftest import REDIS_SERVER, RedisServer, free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
VENV_BIN = ROOT / ".venv" / "bin"
# The .env of a real deployment.
DOTENV = {
    "SECRET_KEY": "compose-test-only-secret-key-0123456789abcdef",
    "POSTGRES_PASSWORD": "unused-outside-docker",
    "METRICS_TOKEN": "compose-test-metrics-token",
}
START_SECONDS = 120
_VARIABLE = re.compile(r"\$\$|\$\{(\w+)(?::([-?])([^}]*))?\}")


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's `${VAR}`, `${VAR:-default}`, `${VAR:?error}` and `$$`."""

    def substitute(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name, kind, argument = match.groups()
        value = env.get(name, "")
        if kind == "?" and not value:
            raise ValueError(f"{name}: {argument}")
        if kind == "-" and not value:
            return argument
        return value

    return _VARIABLE.sub(substitute, text)


def services() -> dict[str, dict]:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def service_env(service: dict, overrides: dict[str, str]) -> dict[str, str]:
    env = {
        key: interpolate(str(value), DOTENV)
        for key, value in service.get("environment", {}).items()
    }
    for key, value in overrides.items():
        if key in env or key in ("PORTAL_VAR_DIR",):
            env[key] = value
    base = {
        "PATH": f"{VENV_BIN}:{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
    }
    return {**base, **env}


def argv(command: str | list[str]) -> list[str]:
    """Compose runs a string command split like a shell would, without a shell."""
    return shlex.split(command) if isinstance(command, str) else list(command)


def health_argv(service: dict) -> list[str]:
    test = service["healthcheck"]["test"]
    if test[0] == "CMD":
        return test[1:]
    assert test[0] == "CMD-SHELL", test
    return ["sh", "-c", test[1]]


def test_every_service_is_an_image_or_runs_a_command_tested_here():
    for name, service in services().items():
        assert "image" in service or "command" in service, name
        if "command" in service:
            assert "healthcheck" in service or name == "beat", f"{name} has no health check"


def test_missing_secrets_stop_compose_before_anything_starts():
    env = services()["web"]["environment"]
    with pytest.raises(ValueError, match="SECRET_KEY: set SECRET_KEY in .env"):
        interpolate(env["SECRET_KEY"], {})


@pytest.fixture
def database(tmp_path):
    """A database of its own for the compose services: the web's migrate creates the schema."""
    if connection.vendor != "postgresql":
        yield f"sqlite:///{tmp_path / 'compose.sqlite3'}"
        return
    db = connection.settings_dict
    server = ["-h", db["HOST"] or "127.0.0.1", "-p", str(db["PORT"] or 5432), "-U", db["USER"]]
    name = f"{db['NAME']}_compose"
    subprocess.run(["dropdb", *server, "--if-exists", name], check=True)
    subprocess.run(["createdb", *server, name], check=True)
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    try:
        yield f"postgres://{db['USER']}{password}@{server[1]}:{server[3]}/{name}"
    finally:
        subprocess.run(["dropdb", *server, "--if-exists", "--force", name], check=True)


@pytest.fixture
def redis_url(tmp_path):
    if REDIS_SERVER is None:
        yield ""  # the embedded filesystem broker, shared through PORTAL_VAR_DIR
        return
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


class Started:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self, name: str, command: list[str], env: dict[str, str]) -> None:
        log = (self.tmp_path / f"{name}.log").open("wb")
        self.processes[name] = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")

    def logs(self) -> str:
        return "\n".join(f"--- {name} ---\n{self.log(name)[-3000:]}" for name in self.processes)

    def check_alive(self) -> None:
        dead = {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}
        assert not dead, f"exited: {dead}\n{self.logs()}"

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def healthy(started: Started, name: str, command: list[str], env: dict[str, str]) -> bool:
    started.check_alive()
    return (
        subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=30).returncode == 0
    )


def http(url: str, **headers) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.mark.django_db
def test_the_compose_services_run_together_outside_docker(tmp_path, database, redis_url):
    compose = services()
    web_port = free_port()
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    started = Started(tmp_path)
    envs: dict[str, dict[str, str]] = {}
    for name, service in compose.items():
        if "command" not in service:
            continue  # postgres and redis: images of the servers this machine already runs
        envs[name] = service_env(
            service,
            {
                "DATABASE_URL": database,
                "REDIS_URL": redis_url,
                "WORKER_METRICS_PORT": str(free_port()),
                "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / f"prometheus-{name}"),
                "PORTAL_VAR_DIR": str(var_dir),
            },
        )
        envs[name].update(
            {"GUNICORN_BIND": f"127.0.0.1:{web_port}", "WORKER_METRICS_ADDRESS": "127.0.0.1"}
        )
    assert set(envs) >= {"web", "worker", "beat"}
    try:
        # depends_on: the web migrates the empty database before anything else uses it.
        started.start("web", argv(compose["web"]["command"]), envs["web"])
        wait_for(
            lambda: healthy(started, "web", health_argv(compose["web"]), envs["web"]),
            "the web's health check",
            timeout=START_SECONDS,
            on_timeout=started.logs,
        )
        for name in envs.keys() - {"web"}:
            started.start(name, argv(compose[name]["command"]), envs[name])
        for name in envs.keys() - {"web", "beat"}:
            wait_for(
                lambda name=name: healthy(started, name, health_argv(compose[name]), envs[name]),
                f"the health check of {name}",
                timeout=START_SECONDS,
                on_timeout=started.logs,
            )
        # Beat queues cycles, a worker runs them, the web sees them finish.
        wait_for(
            lambda: http(f"http://127.0.0.1:{web_port}/readyz?check=cycle")[0] == 200,
            "a scheduling cycle run by beat and a worker",
            timeout=START_SECONDS,
            on_timeout=started.logs,
        )
        status, body = http(
            f"http://127.0.0.1:{web_port}/metrics",
            Authorization=f"Bearer {DOTENV['METRICS_TOKEN']}",
        )
        assert status == 200
        assert "gpuportal_cycle_age_seconds" in body
        assert http(f"http://127.0.0.1:{web_port}/metrics")[0] == 401
        status, _ = http(
            f"http://127.0.0.1:{web_port}/api/v1/jobs/", **{"X-Request-ID": "compose-check"}
        )
        assert status in (401, 403)
        started.check_alive()
    finally:
        started.stop()
    # LOG_FORMAT=json: gunicorn's access line and the workers' cycle events are JSON objects.
    logged = [
        json.loads(line) for line in started.log("web").splitlines() if '"compose-check"' in line
    ]
    access = [entry for entry in logged if entry["logger"] == "gunicorn.access"]
    assert access, started.log("web")[-3000:]
    assert (access[0]["path"], access[0]["status"]) == ("/api/v1/jobs/", str(status))
    cycles = [
        json.loads(line)
        for name in envs.keys() - {"web", "beat"}
        for line in started.log(name).splitlines()
        if '"event": "cycle"' in line
    ]
    assert cycles, started.logs()
    assert {"binds", "evictions", "snapshot_ms", "cycle_id"} <= cycles[0].keys()
