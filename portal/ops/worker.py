"""Celery worker side of operations: its own metrics exporter and probe, task metrics, and the
request id carried from the web request that queued a task into that task's log lines.

Connected by `portal/celery.py` (import for the signal handlers). The exporter starts in the
worker's main process when WORKER_METRICS_PORT is set and serves two paths:

* `/metrics`: what this worker counted. A prefork pool (the default queue's workers) records
  in its child processes, so those workers need PROMETHEUS_MULTIPROC_DIR (an empty folder of
  their own; wiped when the worker starts); the solo cycle worker records in-process.
* `/healthz`: 200 while the process lives; with WORKER_HEALTH_CYCLE_SECONDS set (the cycle
  worker), 503 once this process has gone that long without finishing a scheduling cycle task
  (started or skipped for the lock, either counts), so a wedged cycle worker gets restarted.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from celery.signals import (
    before_task_publish,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_shutdown,
)
from prometheus_client import Counter, Histogram, generate_latest

from portal.ops.multiproc import multiprocess_dir_reset, process_exited
from portal.ops.requestid import current_request_id, reset_request_id, set_request_id

logger = logging.getLogger(__name__)

CYCLE_TASK = "scheduler.tasks.scheduling_cycle_run"
REQUEST_ID_HEADER = "request_id"

TASKS = Counter(
    "gpuportal_celery_tasks_total", "Celery tasks this worker finished.", ["task", "state"]
)
TASK_DURATION = Histogram(
    "gpuportal_celery_task_duration_seconds",
    "Wall time of the Celery tasks this worker ran.",
    ["task"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
)


class _Progress:
    """When this process started and last finished a cycle task (monotonic seconds)."""

    started = time.monotonic()
    cycle_finished: float | None = None


_task_state: dict[str, tuple[float, object]] = {}


@before_task_publish.connect
def _carry_request_id(headers=None, **kwargs) -> None:
    request_id = current_request_id()
    if request_id and headers is not None:
        headers.setdefault(REQUEST_ID_HEADER, request_id)


@task_prerun.connect
def _task_started(task_id=None, task=None, **kwargs) -> None:
    request_id = getattr(task.request, REQUEST_ID_HEADER, None) or task_id
    _task_state[task_id] = (time.perf_counter(), set_request_id(request_id))


@task_postrun.connect
def _task_finished(task_id=None, task=None, state=None, **kwargs) -> None:
    started, token = _task_state.pop(task_id, (None, None))
    if started is not None:
        TASK_DURATION.labels(task.name).observe(time.perf_counter() - started)
    TASKS.labels(task.name, (state or "unknown").lower()).inc()
    if task.name == CYCLE_TASK:
        _Progress.cycle_finished = time.monotonic()
    if token is not None:
        reset_request_id(token)


def cycle_stalled(*, limit_seconds: float, now: float | None = None) -> str | None:
    now = time.monotonic() if now is None else now
    last = _Progress.cycle_finished or _Progress.started
    idle = now - last
    if idle > limit_seconds:
        return f"no scheduling cycle task finished in this worker for {idle:.0f} s"
    return None


def exporter_app(*, cycle_limit_seconds: float):
    from portal.ops.metrics import CONTENT_TYPE, process_registry

    def app(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            reason = (
                cycle_stalled(limit_seconds=cycle_limit_seconds) if cycle_limit_seconds else None
            )
            status = "503 Service Unavailable" if reason else "200 OK"
            start_response(status, [("Content-Type", "text/plain")])
            return [(reason or "ok").encode() + b"\n"]
        if path == "/metrics":
            start_response("200 OK", [("Content-Type", CONTENT_TYPE)])
            return [generate_latest(process_registry())]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"/metrics or /healthz\n"]

    return app


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # scrapes every 15 s would drown the worker's log
        return None


def exporter_start(*, port: int, address: str, cycle_limit_seconds: float) -> WSGIServer:
    server = make_server(
        address,
        port,
        exporter_app(cycle_limit_seconds=cycle_limit_seconds),
        server_class=_ThreadingServer,
        handler_class=_QuietHandler,
    )
    thread = threading.Thread(target=server.serve_forever, name="metrics-exporter", daemon=True)
    thread.start()
    logger.info("worker metrics on http://%s:%s/metrics", address, server.server_port)
    return server


@worker_init.connect
def _worker_starting(**kwargs) -> None:
    from django.conf import settings

    if not settings.WORKER_METRICS_PORT:
        return
    multiprocess_dir_reset()
    exporter_start(
        port=settings.WORKER_METRICS_PORT,
        address=settings.WORKER_METRICS_ADDRESS,
        cycle_limit_seconds=settings.WORKER_HEALTH_CYCLE_SECONDS,
    )


@worker_process_shutdown.connect
def _pool_process_exited(pid=None, **kwargs) -> None:
    process_exited(pid or os.getpid())
