"""Fixtures for scheduler tests that run real processes: a private Redis server, Celery
workers on the test database, and checks of the placement history they leave behind.

A private `redis-server` per test (on a free port, nothing saved to disk) instead of the
machine's Redis: tests may stop and restart it, and never see another run's keys.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest
from django.db import connection

from jobspec.labels import replica_key
from portal import celery_app
from portal.cluster.models import Node, Placement, SimulatedPod
from portal.jobs.models import Job
from portal.jobs.services import job_submit
from portal.scheduling.models import CycleRun

ROOT = Path(__file__).resolve().parents[2]
REDIS_SERVER = shutil.which("redis-server")
START_SECONDS = 30

needs_redis_server = pytest.mark.skipif(
    REDIS_SERVER is None, reason="redis-server is not installed"
)
needs_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="several worker processes writing at once need PostgreSQL (DATABASE_URL)",
)
# The marks of a test module that runs real worker processes against the test database.
REAL_WORKERS = [
    pytest.mark.postgres,
    pytest.mark.redis,
    needs_postgres,
    needs_redis_server,
    pytest.mark.django_db(transaction=True),
]
GiB = 1024**3


def other_workload_pod(name: str, node: str, *, namespace: str = "team-b", gpus: int = 4) -> dict:
    """A running pod of another team's workload bound to `node`, holding `gpus` GPUs."""
    gpu = {"nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": gpu, "limits": dict(gpu)}}
            ],
        },
        "status": {"phase": "Running"},
    }


def submit_job(
    user,
    queue,
    name: str,
    *,
    replicas: int = 1,
    gpus: int = 1,
    image: str = "ghcr.io/example/train:1",
    min_available: int | None = None,
    duration: int | None = None,
    **kwargs,
) -> Job:
    """One task of `replicas` pods of `gpus` GPUs, 1 CPU and 4 GiB each, through job_submit."""
    return job_submit(
        submitter=user,
        queue=queue,
        name=name,
        tasks=[
            {
                "name": "worker",
                "replicas": replicas,
                "image": image,
                "gpus": gpus,
                "cpu_millis": 1000,
                "memory_bytes": 4 * GiB,
            }
        ],
        min_available=min_available,
        expected_duration_seconds=duration,
        **kwargs,
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(condition: Callable[[], bool], what: str, *, timeout: float, on_timeout=None):
    """Poll `condition` until it holds; fail naming `what` (plus `on_timeout()`, e.g. logs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    detail = on_timeout() if on_timeout else ""
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}\n{detail}")


class RedisServer:
    """A redis-server on a port of its own; `stop()` and `start()` again keep the port."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.directory = directory
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", str(self.directory),
                "--logfile", str(self.directory / f"redis-{self.port}.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(self.ping, f"redis-server on port {self.port}", timeout=START_SECONDS)

    def ping(self) -> bool:
        import redis

        try:
            with redis.Redis.from_url(self.url, socket_connect_timeout=0.5) as client:
                return bool(client.ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None


@pytest.fixture
def private_redis(tmp_path):
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed")
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# A worker process: Django set up on the test database, optional test hooks installed, then
# Celery's own worker main. Hooks are configured through GPUPORTAL_TEST_WORKER (JSON):
#   lock_ttl      SCHEDULER_LOCK_TTL_SECONDS for this worker
#   no_lock       every cycle believes it holds the lock (a broken lock, for the DB fence)
#   pause         {"at": "snapshot" | "persist" | "reconcile", "seconds": s, "every": n,
#                  "times": k, "marker": path}: every n-th time (at most k times) the cycle
#                  gets there, touch `marker` and sleep. "persist" counts only cycles with
#                  binds and pauses inside the persist transaction, after its writes;
#                  "reconcile" pauses after the first pod a cycle creates.
WORKER_MAIN = r"""
import json, os, sys, time
from contextlib import contextmanager
from pathlib import Path

import django

django.setup()
from django.conf import settings

config = json.loads(os.environ.get("GPUPORTAL_TEST_WORKER") or "{}")
if "lock_ttl" in config:
    settings.SCHEDULER_LOCK_TTL_SECONDS = config["lock_ttl"]

from scheduler.adapters import lock, orchestrator
from scheduler.adapters.cluster import simulated

if config.get("no_lock"):
    @contextmanager
    def always_held(*args, **kwargs):
        yield lock.CycleLease(True)

    lock.cycle_lock = always_held

pause = config.get("pause")
if pause:
    counter = {"n": 0}

    def maybe_pause():
        counter["n"] += 1
        paused = counter["n"] // pause.get("every", 1)
        if counter["n"] % pause.get("every", 1) == 0 and paused <= pause.get("times", paused):
            if pause.get("marker"):
                Path(pause["marker"]).write_text(str(os.getpid()))
            time.sleep(pause["seconds"])

    def after(function, hook):
        def wrapped(*args, **kwargs):
            result = function(*args, **kwargs)
            hook(**kwargs)
            return result
        return wrapped

    def persisted(*, result, **kwargs):
        if result.binds:  # a cycle with nothing to write proves nothing
            maybe_pause()

    if pause["at"] == "snapshot":
        orchestrator.snapshot_build = after(orchestrator.snapshot_build, lambda **kwargs: maybe_pause())
    elif pause["at"] == "persist":
        orchestrator.decisions_persist = after(orchestrator.decisions_persist, persisted)
    elif pause["at"] == "reconcile":
        backend = simulated.SimulatedBackend
        original = backend.create_pod

        def create_pod(self, pod):
            original(self, pod)
            maybe_pause()

        def create_pods(self, pods):
            # One pod first, then the pause, then the rest: a kill lands mid-batch.
            outcomes = []
            for pod in pods:
                try:
                    original(self, pod)
                    outcomes.append(None)
                except Exception as error:
                    outcomes.append(error)
                if len(outcomes) == 1:
                    maybe_pause()
            return outcomes

        backend.create_pod = create_pod
        backend.create_pods = create_pods
    else:
        raise SystemExit(f"unknown pause point {pause['at']!r}")

from portal.celery import app

app.worker_main(sys.argv[1:])
"""


def database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user, host, port = db["USER"], db["HOST"] or "127.0.0.1", db["PORT"] or 5432
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"


@dataclass
class Worker:
    name: str
    process: subprocess.Popen
    log: Path
    killed: bool = False

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL to the worker and its children (an embedded beat): nothing runs cleanup."""
        self.killed = True
        if self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


@dataclass
class Workers:
    """Starts Celery workers (solo or thread pools, optionally with beat) on the test database
    and the private Redis, and points this process's Celery app at the same broker."""

    directory: Path
    redis: RedisServer
    started: list[Worker] = field(default_factory=list)

    def start(
        self,
        name: str,
        *,
        beat: bool = False,
        pool: str = "solo",
        concurrency: int = 1,
        hooks: dict | None = None,
        env: dict[str, str] | None = None,
    ) -> Worker:
        script = self.directory / "worker_main.py"
        script.write_text(WORKER_MAIN)
        args = [
            sys.executable, str(script), "worker", f"--pool={pool}",
            f"--concurrency={concurrency}", "--loglevel=INFO", f"--hostname={name}@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
            # The cycle task is routed to queue `cycle` (CELERY_TASK_ROUTES); these workers
            # run it as ./dev run's worker does.
            "-Q", "celery,cycle",
        ]  # fmt: skip
        if beat:
            args += ["--beat", "--schedule", str(self.directory / f"beat-{name}")]
        environment = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "portal.settings.test",
            "PYTHONPATH": str(ROOT),
            "CELERY_TASK_ALWAYS_EAGER": "false",
            # Finished pods go at once, so "cleaned up" is reached within a test's patience.
            "FINISHED_POD_RETENTION_SECONDS": "0",
            "DATABASE_URL": database_url(),
            "REDIS_URL": self.redis.url,
            "CELERY_BROKER_URL": self.redis.url,
            "SCHEDULER_CYCLE_SECONDS": "1",
            "EVICTION_GRACE_SECONDS": "1",
            "SIMULATED_DEFAULT_RUN_SECONDS": "3600",
            "GPUPORTAL_TEST_WORKER": json.dumps(hooks or {}),
            **(env or {}),
        }
        log = self.directory / f"worker-{name}.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                args,
                cwd=ROOT,
                env=environment,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so kill() reaches beat too
            )
        worker = Worker(name, process, log)
        self.started.append(worker)
        return worker

    def wait_ready(self, timeout: float = START_SECONDS * 2) -> None:
        """Wait until every started worker consumes tasks ("ready" in its log)."""

        def ready() -> bool:
            self.check_alive()
            return all(
                " ready." in worker.log.read_text(errors="replace")
                for worker in self.started
                if not worker.killed
            )

        wait_for(ready, "the workers to be ready", timeout=timeout, on_timeout=self.logs)

    def check_alive(self) -> None:
        """Fail at once (with the logs) if a worker that was not killed on purpose died."""
        dead = [w.name for w in self.started if not w.alive() and not w.killed]
        if dead:
            pytest.fail(f"worker(s) {dead} died:\n{self.logs()}")

    def logs(self, tail: int = 4000) -> str:
        return "\n".join(
            f"--- {worker.name} ---\n{worker.log.read_text(errors='replace')[-tail:]}"
            for worker in self.started
        )

    def stop_all(self) -> None:
        # The test is over: no need to wait for a graceful shutdown. The database drops a
        # killed worker's session (and rolls back its transaction) at once.
        for worker in self.started:
            worker.kill()


@pytest.fixture
def workers(transactional_db, tmp_path, private_redis):
    """Requesting transactional_db first makes the workers stop before the tables are
    flushed; this process's cycle kicks go to the private broker meanwhile."""
    pool = Workers(tmp_path, private_redis)
    conf = celery_app.conf
    previous = {key: conf[key] for key in BROKER_KEYS}
    _celery_configure(
        {**dict.fromkeys(BROKER_KEYS[:-1], private_redis.url), "task_always_eager": False}
    )
    try:
        yield pool
    finally:
        pool.stop_all()
        _celery_configure(previous)
        connection.close()


# Celery fills the read and write URLs from CELERY_BROKER_URL in the environment, and then
# prefers them to broker_url: all three must point at the private server.
BROKER_KEYS = ("broker_url", "broker_read_url", "broker_write_url", "task_always_eager")


def _celery_configure(values: dict) -> None:
    for key, value in values.items():
        celery_app.conf[key] = value
    # Drop pooled connections to the previous broker (what Celery does after a fork).
    celery_app._after_fork()


# -- checks on what the cycles left in the database -------------------------------------------


def cycle_overlaps() -> list[tuple[int, int]]:
    """Pairs of finished CycleRuns whose [started_at, finished_at] intervals overlap."""
    runs = list(
        CycleRun.objects.filter(finished_at__isnull=False)
        .order_by("started_at", "id")
        .values_list("id", "started_at", "finished_at")
    )
    overlaps = []
    latest_end: tuple[int, datetime] | None = None
    for run_id, started, finished in runs:
        if latest_end is not None and started < latest_end[1]:
            overlaps.append((latest_end[0], run_id))
        if latest_end is None or finished > latest_end[1]:
            latest_end = (run_id, finished)
    return overlaps


def placement_history_violations() -> list[str]:
    """Over the whole placement history: no node ever held more GPUs in active placements than
    it has, and no replica ever had two active placements at once.

    A placement is active from created_at until the observation that ended it (updated_at of
    a succeeded/failed/deleted row); a capacity freed that way is only visible to snapshots
    taken after it was written, so legitimate reuse never looks like an overlap.
    """
    ended = {Placement.State.SUCCEEDED, Placement.State.FAILED, Placement.State.DELETED}
    capacity = dict(Node.objects.values_list("name", "gpu_count"))
    events: dict[str, list[tuple[datetime, int, int]]] = defaultdict(list)
    by_replica: dict[tuple[int, int], list[tuple[datetime, datetime | None]]] = defaultdict(list)
    rows = Placement.objects.values_list(
        "node_name", "task_id", "replica", "gpus", "state", "created_at", "updated_at"
    )
    for node, task_id, replica, gpus, state, created, updated in rows:
        end = updated if state in ended else None
        events[node].append((created, 1, gpus))
        if end is not None:
            events[node].append((end, 0, -gpus))  # ends sort before starts at one instant
        by_replica[(task_id, replica)].append((created, end))
    problems = []
    for node, node_events in events.items():
        held = 0
        for at, _, delta in sorted(node_events):
            held += delta
            if held > capacity.get(node, 0):
                problems.append(f"{node} held {held} GPUs of {capacity.get(node, 0)} at {at}")
                break
    for key, intervals in by_replica.items():
        intervals.sort(key=lambda interval: interval[0])
        for (_, first_end), (second_start, _) in zip(intervals, intervals[1:]):
            if first_end is None or first_end > second_start:
                problems.append(f"replica {key} had two active placements at {second_start}")
    return problems


def current_state_violations() -> list[str]:
    """Now: active GPUs per node within capacity, one active placement and at most one pod
    per replica."""
    problems = []
    capacity = dict(Node.objects.values_list("name", "gpu_count"))
    held: dict[str, int] = defaultdict(int)
    replicas: dict[tuple[int, int], int] = defaultdict(int)
    active = Placement.objects.filter(state__in=Placement.ACTIVE_STATES)
    for node, gpus, task_id, replica in active.values_list(
        "node_name", "gpus", "task_id", "replica"
    ):
        held[node] += gpus
        replicas[(task_id, replica)] += 1
    problems += [
        f"{n} holds {g} GPUs of {capacity.get(n, 0)}"
        for n, g in held.items()
        if g > capacity.get(n, 0)
    ]
    problems += [f"replica {k} has {c} active placements" for k, c in replicas.items() if c > 1]
    pods: dict[tuple, list[str]] = defaultdict(list)
    for name, labels in SimulatedPod.objects.values_list("name", "labels"):
        pods[replica_key(labels)].append(name)
    problems += [f"replica {k} has pods {names}" for k, names in pods.items() if len(names) > 1]
    return problems
