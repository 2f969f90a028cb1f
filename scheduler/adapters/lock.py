"""One scheduling cycle at a time, cluster-wide.

With Redis configured (every production install), the lock is a Redis key with an expiry, so
a worker killed mid-cycle blocks scheduling for at most `ttl_seconds`. The embedded default has
no Redis and runs every worker on one machine, so an advisory file lock does the same job: the
kernel drops it the moment its holder dies.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from django.conf import settings


@contextmanager
def cycle_lock(name: str = "scheduler-cycle", *, ttl_seconds: int = 120) -> Iterator[bool]:
    """Yields True if this process holds the lock for the block, False if another one does."""
    if settings.REDIS_URL:
        with _redis_lock(name, ttl_seconds) as held:
            yield held
    else:
        with _file_lock(name) as held:
            yield held


@contextmanager
def _redis_lock(name: str, ttl_seconds: int) -> Iterator[bool]:
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    lock = client.lock(f"gpuportal:{name}", timeout=ttl_seconds, blocking=False)
    held = lock.acquire()
    try:
        yield held
    finally:
        if held:
            # Expired while we worked: someone else may hold it now; theirs to release.
            with suppress(redis.exceptions.LockError):
                lock.release()
        client.close()


@contextmanager
def _file_lock(name: str) -> Iterator[bool]:
    path = Path(settings.VAR_DIR) / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
