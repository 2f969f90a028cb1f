"""Where tasks go, and that something consumes every queue they go to."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

from portal.celery import app

ROOT = Path(__file__).resolve().parents[2]


def _queue(task_name: str) -> str:
    return app.amqp.router.route({}, task_name)["queue"].name


def test_the_cycle_and_plan_ahead_have_queues_of_their_own_and_the_rest_use_the_default():
    assert _queue("scheduler.tasks.scheduling_cycle_run") == "cycle"
    assert _queue("scheduler.tasks.plan_ahead_run") == "plan"
    assert _queue("portal.ops.tasks.retention_run") == "celery"


def test_every_routed_queue_is_consumed_by_each_way_of_running_the_workers():
    routed = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()} | {"celery"}
    for launcher in ("dev", "docker-compose.yml", "deploy/portal"):
        path = ROOT / launcher
        texts = (
            [p.read_text() for p in sorted(path.glob("*.yaml"))]
            if path.is_dir()
            else [path.read_text()]
        )
        consumed = {
            queue
            for text in texts
            for match in re.finditer(r"""-Q["', ]+([\w,]+)""", text)
            for queue in match.group(1).split(",")
        }
        assert routed <= consumed, f"{launcher} consumes {sorted(consumed)}"


def test_the_cycle_queue_is_served_by_a_single_process():
    compose = (ROOT / "docker-compose.yml").read_text()
    manifest = (ROOT / "deploy/portal/cycle-worker.yaml").read_text()
    assert re.search(r"--pool solo -Q cycle", compose)
    assert '"--pool", "solo", "-Q", "cycle"' in manifest
    assert re.search(r"replicas: 1\b", manifest)
