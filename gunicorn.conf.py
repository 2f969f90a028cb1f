"""Gunicorn settings of the web service (Dockerfile, docker-compose.yml, bench/load_mixed.py).

Gunicorn reads ./gunicorn.conf.py from its working directory; command-line options and
GUNICORN_CMD_ARGS override what is set here. The figures behind these choices are in
docs/load.md.
https://docs.gunicorn.org/en/stable/settings.html
"""

import os
from pathlib import Path

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
# The work per request is CPU (Python) plus a few short database round trips: about one
# process and a half per core keeps the cores busy while some wait on PostgreSQL.
workers = int(os.environ.get("WEB_CONCURRENCY", 3))
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "sync")
threads = int(os.environ.get("GUNICORN_THREADS", 1))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", 60))
keepalive = 5  # gthread only: API clients reuse their connection instead of reconnecting
# The workers' heartbeat files in memory, not on the container's overlay filesystem (a
# stalled disk write would otherwise get busy workers killed as unresponsive).
if Path("/dev/shm").is_dir():  # noqa: S108 - gunicorn heartbeat files in memory
    worker_tmp_dir = "/dev/shm"  # noqa: S108 - gunicorn heartbeat files in memory
# "-" is stdout (the container log); GUNICORN_ACCESS_LOG="" turns it off.
accesslog = os.environ.get("GUNICORN_ACCESS_LOG", "-") or None
errorlog = "-"

# Metrics: with PROMETHEUS_MULTIPROC_DIR set, every worker process records into that folder and
# /metrics adds them up (one process alone would answer with its own share); the folder is
# emptied when the master starts, and a dead worker's live gauges are dropped.
# Logs: LOG_FORMAT=json gives gunicorn's own lines (errors, the access log with the request id
# the app set) the same one-object-per-line shape as the app's (portal/ops/logs.py).


def on_starting(server):
    from portal.ops.multiproc import multiprocess_dir_reset

    multiprocess_dir_reset()


def child_exit(server, worker):
    from portal.ops.multiproc import process_exited

    process_exited(worker.pid)


if os.environ.get("LOG_FORMAT") == "json":
    from portal.ops.logs import gunicorn_logconfig

    logconfig_dict = gunicorn_logconfig()
    access_log_format = '%(h)s "%(r)s" %(s)s %(B)s %(D)sus %({x-request-id}o)s'
