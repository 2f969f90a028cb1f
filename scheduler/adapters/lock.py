"""One scheduling cycle at a time, cluster-wide, and a database fence for when that fails.

With Redis configured (every production install), the lock is a Redis key with an expiry. A
heartbeat thread renews the expiry while the cycle works, so a cycle longer than the TTL keeps
the lock, and a worker killed mid-cycle blocks scheduling for at most `ttl_seconds`. The
embedded default has no Redis and runs every worker on one machine, so an advisory file lock
does the same job: the kernel drops it the moment its holder dies.

A Redis lock can still be lost while its holder lives: Redis restarted (the key is gone), or
could not be reached for a whole TTL, or the cycle outlived `max_hold_seconds`. The lease then
reports itself lost and the cycle stops at its next checkpoint; until it gets there, the
database fence (`cycle_write_lock` plus the checks in scheduler.adapters.orchestrator) keeps two
cycles' writes from interleaving.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from django.conf import settings
from django.db import connection

logger = logging.getLogger(__name__)

# Renewals per TTL: two can fail (a Redis blip) before the key expires.
RENEWALS_PER_TTL = 3
# Names the scheduler's lock among PostgreSQL advisory locks (visible in pg_locks.objid).
ADVISORY_LOCK_KEY = 4_711_000_001


class CycleAbandoned(Exception):
    """The cycle must stop without writing: another one took over, or may have."""


class LeaseLost(CycleAbandoned):
    pass


class CycleLease:
    """What `cycle_lock` yields: truthy when this process holds the lock.

    `check()` raises LeaseLost once the lock may belong to someone else; the cycle calls it
    before each phase that writes.
    """

    def __init__(self, held: bool) -> None:
        self.held = held
        self._lost = threading.Event()
        self._reason = ""

    def __bool__(self) -> bool:
        return self.held

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def check(self) -> None:
        if self._lost.is_set():
            raise LeaseLost(f"lost the cycle lock: {self._reason}")

    def lose(self, reason: str) -> None:
        if not self._lost.is_set():
            self._reason = reason
            self._lost.set()
            logger.warning("scheduling cycle lock lost: %s", reason)


@contextmanager
def cycle_lock(
    name: str | None = None,
    *,
    ttl_seconds: float | None = None,
    max_hold_seconds: float | None = None,
) -> Iterator[CycleLease]:
    """Yields a lease that is truthy if this process holds the lock for the block.

    Defaults come from settings: SCHEDULER_LOCK_NAME, SCHEDULER_LOCK_TTL_SECONDS, and
    CELERY_TASK_TIME_LIMIT for the longest a cycle may keep renewing (a hung cycle must not
    stall scheduling forever).
    """
    name = name or settings.SCHEDULER_LOCK_NAME
    if settings.REDIS_URL:
        ttl = ttl_seconds or settings.SCHEDULER_LOCK_TTL_SECONDS
        max_hold = max_hold_seconds or settings.CELERY_TASK_TIME_LIMIT
        with _redis_lock(name, float(ttl), max_hold) as lease:
            yield lease
    else:
        with _file_lock(name) as lease:
            yield lease


def cycle_write_lock() -> None:
    """Wait until no other cycle is inside a fenced write transaction, and hold that until
    the current transaction ends.

    PostgreSQL: a transaction-level advisory lock, released at commit or rollback, or by the
    server when the holder's connection dies. SQLite allows one writer at a time anyway; the
    caller's first write takes that lock.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("cycle_write_lock() must be called inside transaction.atomic()")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])


@contextmanager
def _redis_lock(name: str, ttl: float, max_hold: float | None) -> Iterator[CycleLease]:
    import redis

    # Bounded socket waits: a hung Redis must not hang the cycle or its heartbeat.
    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=max(1.0, ttl / 3), socket_connect_timeout=2.0
    )
    # thread_local=False: the heartbeat thread renews with the token the cycle's thread got.
    lock = client.lock(f"gpuportal:{name}", timeout=ttl, blocking=False, thread_local=False)
    try:
        held = lock.acquire()
    except redis.RedisError as error:
        # Nobody can take the lock while Redis is down; skip this cycle like a busy lock.
        logger.warning("scheduling cycle lock unavailable: %s", error)
        held = False
    lease = CycleLease(held)
    stop = threading.Event()
    heartbeat = None
    if held:
        heartbeat = threading.Thread(
            target=Heartbeat(lock, lease, ttl, max_hold).run,
            args=(stop,),
            name=f"{name}-heartbeat",
            daemon=True,
        )
        heartbeat.start()
    try:
        yield lease
    finally:
        stop.set()
        if heartbeat is not None:
            heartbeat.join()
        if held:
            # Release checks the token: a key that expired and went to another worker stays
            # theirs. Redis down: nothing to free, the key expires by itself.
            with suppress(redis.RedisError):
                lock.release()
        client.close()


class Heartbeat:
    """Renews a held Redis lock's expiry, one `beat()` every TTL / RENEWALS_PER_TTL.

    The lock itself is redis-py's `Lock` (token-checked acquire, `reacquire` and release in
    Lua). It renews nothing by itself and says nothing when the key is gone, so this loop is
    ours: `reacquire` (the full TTL again; `extend` would add to what is left, or with
    `replace_ttl` do the same) and LockNotOwnedError as the sign the lease is lost. Time
    comes from `clock` (monotonic seconds), so tests drive beats without sleeping.
    """

    def __init__(
        self,
        lock,
        lease: CycleLease,
        ttl: float,
        max_hold: float | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lock = lock
        self.lease = lease
        self.ttl = ttl
        self.max_hold = max_hold
        self.clock = clock
        self.started = self.last_renewed = clock()

    def beat(self) -> bool:
        """Renew once; False once the lease is lost (the heartbeat then stops)."""
        import redis

        attempt = self.clock()
        if self.max_hold is not None and attempt - self.started >= self.max_hold:
            self.lease.lose(
                f"the cycle ran past {self.max_hold:g} s; left to expire for another worker"
            )
            return False
        try:
            self.lock.reacquire()
        except redis.exceptions.LockNotOwnedError:
            self.lease.lose("the key expired or was lost (Redis restarted?) and may be re-acquired")
            return False
        except redis.RedisError as error:
            if attempt - self.last_renewed >= self.ttl:
                self.lease.lose(f"Redis unreachable for a whole TTL ({error})")
                return False
            logger.warning("scheduling cycle lock: renewal failed, retrying: %s", error)
        else:
            self.last_renewed = attempt
        return True

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.ttl / RENEWALS_PER_TTL):
            if not self.beat():
                return


@contextmanager
def _file_lock(name: str) -> Iterator[CycleLease]:
    path = Path(settings.VAR_DIR) / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield CycleLease(False)
            return
        try:
            yield CycleLease(True)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
