"""PROMETHEUS_MULTIPROC_DIR handling shared by gunicorn (gunicorn.conf.py) and the Celery
workers (portal.ops.worker). No Django imports: gunicorn's master loads this before any app.

prometheus_client reads the variable when it is first imported, so it must be in the
environment of the process (the compose file and the manifests set it), not in settings.
https://prometheus.github.io/client_python/multiprocess/
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess_dir() -> str | None:
    return os.environ.get(ENV) or None


def multiprocess_dir_reset() -> None:
    """Empty the folder when the server starts: a restarted container keeps its emptyDir, and
    the files of its dead processes would otherwise be added in."""
    directory = multiprocess_dir()
    if directory is None:
        return
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    for entry in folder.iterdir():
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def process_exited(pid: int) -> None:
    """Drop a dead process's live gauges (its counters and histograms stay in the sums)."""
    if multiprocess_dir() is None:
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid)
