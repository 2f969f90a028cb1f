"""The Celery worker's exporter and probe, task metrics, and request ids carried into tasks;
then a real prefork worker whose child processes' counts reach its exporter."""

import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from portal.ops import worker
from portal.ops.requestid import reset_request_id, set_request_id
from portal.scheduling.models import CycleRun
from scheduler.tasks import scheduling_cycle_run
from tests.scheduler.conftest import database_url, free_port, wait_for

ROOT = Path(__file__).resolve().parents[3]


def call(app, path: str) -> tuple[str, bytes]:
    answer = {}

    def start_response(status, headers):
        answer["status"] = status

    body = b"".join(app({"PATH_INFO": path}, start_response))
    return answer["status"], body


def test_exporter_serves_metrics_and_health():
    app = worker.exporter_app(cycle_limit_seconds=0)
    status, body = call(app, "/metrics")
    assert status == "200 OK"
    assert b"# TYPE gpuportal_celery_tasks_total counter" in body
    assert call(app, "/healthz") == ("200 OK", b"ok\n")
    assert call(app, "/")[0] == "404 Not Found"


def test_cycle_probe_fails_once_no_cycle_task_finished_for_too_long(monkeypatch):
    monkeypatch.setattr(worker._Progress, "started", 1000.0)
    monkeypatch.setattr(worker._Progress, "cycle_finished", None)
    assert worker.cycle_stalled(limit_seconds=60, now=1030.0) is None  # grace after start
    assert worker.cycle_stalled(limit_seconds=60, now=1090.0) == (
        "no scheduling cycle task finished in this worker for 90 s"
    )
    monkeypatch.setattr(worker._Progress, "cycle_finished", 1080.0)
    assert worker.cycle_stalled(limit_seconds=60, now=1090.0) is None


@pytest.mark.django_db
def test_a_cycle_task_is_counted_and_feeds_the_probe(monkeypatch):
    monkeypatch.setattr(worker._Progress, "cycle_finished", None)
    labels = {"task": worker.CYCLE_TASK, "state": "success"}
    before = REGISTRY.get_sample_value("gpuportal_celery_tasks_total", labels) or 0
    scheduling_cycle_run.delay()  # eager in tests: runs here, with the task signals
    assert REGISTRY.get_sample_value("gpuportal_celery_tasks_total", labels) == before + 1
    assert worker._Progress.cycle_finished is not None


def test_the_request_id_travels_in_the_task_headers():
    headers: dict = {}
    token = set_request_id("req-7")
    try:
        worker._carry_request_id(headers=headers)
    finally:
        reset_request_id(token)
    assert headers == {"request_id": "req-7"}


@pytest.mark.django_db(transaction=True)
def test_a_prefork_worker_exports_what_its_children_counted(tmp_path):
    """Two pool processes run beat's cycle and retention tasks; the main process's exporter
    adds up their counts from PROMETHEUS_MULTIPROC_DIR (without it, it would show none)."""
    port = free_port()
    multiproc = tmp_path / "prometheus"
    multiproc.mkdir()
    (multiproc / "stale.db").write_bytes(b"left by a previous run")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "DATABASE_URL": database_url(),
        "PORTAL_VAR_DIR": str(tmp_path),  # a broker folder of its own on the embedded broker
        "SCHEDULER_CYCLE_SECONDS": "0.5",
        "RETENTION_INTERVAL_SECONDS": "0.5",
        "WORKER_METRICS_PORT": str(port),
        "WORKER_METRICS_ADDRESS": "127.0.0.1",
        "PROMETHEUS_MULTIPROC_DIR": str(multiproc),
    }
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "portal", "worker", "--beat",
                "--pool=prefork", "--concurrency=2", "-Q", "celery,cycle", "--loglevel=INFO",
                "--schedule", str(tmp_path / "beat-schedule"),
            ],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:

        def counted() -> dict[str, float]:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    text = r.read().decode()
            except (urllib.error.URLError, ConnectionError):
                return {}
            return {
                sample.labels["task"]: sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples
                if sample.name == "gpuportal_celery_tasks_total"
                and sample.labels["state"] == "success"
            }

        def both_tasks_ran_twice() -> bool:
            assert process.poll() is None, log.read_text()
            counts = counted()
            return (
                counts.get(worker.CYCLE_TASK, 0) >= 2
                and counts.get("portal.ops.tasks.retention_run", 0) >= 2
            )

        wait_for(both_tasks_ran_twice, "task counts on the exporter", timeout=90,
                 on_timeout=lambda: log.read_text()[-4000:])  # fmt: skip
        assert not (multiproc / "stale.db").exists()
        pids = {name.split("_")[-1] for name in os.listdir(multiproc)}
        assert len(pids) >= 2, pids  # more than one process wrote counts
        assert CycleRun.objects.exists()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            assert answer.status == 200
    finally:
        os.killpg(process.pid, 15)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(timeout=10)
