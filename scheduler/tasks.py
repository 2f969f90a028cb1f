"""Thin Celery tasks: take the cluster-wide lock, then call the adapters.

Beat runs `scheduling_cycle_run` every SCHEDULER_CYCLE_SECONDS; a submit or cancel kicks one
right after its transaction commits (coalesced: at most two kicks per second, see `_kick`).
If a cycle is already running, a kick is dropped: the running cycle or the next beat picks
the change up.
"""

from __future__ import annotations

import logging
import time

from celery import shared_task
from django.core.cache import cache
from django.db import transaction

logger = logging.getLogger(__name__)


@shared_task(name="scheduler.tasks.scheduling_cycle_run", ignore_result=True)
def scheduling_cycle_run() -> int | None:
    """Returns the CycleRun id, or None when another worker holds the lock. The cycle's
    modules are imported here, as a task imports the service it calls (the styleguide's
    tasks): a process that only queues cycles (the web) never loads them."""
    from scheduler.adapters.backends import backend_from_settings
    from scheduler.adapters.lock import cycle_lock
    from scheduler.adapters.orchestrator import scheduling_cycle_run as cycle_run

    with cycle_lock() as lease:
        if not lease:
            logger.info("scheduling cycle skipped: another worker is running one")
            return None
        return cycle_run(backend=backend_from_settings(), checkpoint=lease.check).id


# Kicks are coalesced per window of this many seconds of wall-clock time (see `_kick`).
KICK_WINDOW_SECONDS = 1
KICK_LEADING_KEY = "scheduler:kick:{window}"
KICK_TRAILING_KEY = "scheduler:kick-trailing:{window}"
# The last window for which this process knows a trailing kick is queued (by itself or by
# another process): later commits in that window need no cache round trip at all.
_trailing_window: int | None = None


def scheduling_cycle_kick() -> None:
    """Queue a cycle once the current transaction commits: the portal's services call it
    through their facade (portal.scheduling.facade.cycle_kick)."""
    transaction.on_commit(_kick)


def _kick() -> None:
    """At most two cycles per window, and still one that starts after every commit.

    The first commit of a window queues a cycle at once (leading kick); the first one after
    it queues a cycle for the window's end (trailing kick), which starts after every commit
    of the window; the rest send nothing. The claims are `add`s (SET NX) in the default
    cache, shared by all web processes when it is Redis, per process otherwise. Eager
    Celery (tests) runs the cycle inline, so there is nothing to coalesce.
    """
    global _trailing_window
    # The submission is already committed: a broker or cache outage must not turn it into
    # an error for the user. Beat runs the next cycle anyway.
    try:
        if scheduling_cycle_run.app.conf.task_always_eager:
            scheduling_cycle_run.delay()
            return
        now = time.time()
        window = int(now // KICK_WINDOW_SECONDS)
        if window == _trailing_window:
            return
        expiry = 2 * KICK_WINDOW_SECONDS
        if cache.add(KICK_LEADING_KEY.format(window=window), 1, timeout=expiry):
            scheduling_cycle_run.delay()
            return
        claimed = cache.add(KICK_TRAILING_KEY.format(window=window), 1, timeout=expiry)
        _trailing_window = window
        if claimed:
            end = (window + 1) * KICK_WINDOW_SECONDS
            scheduling_cycle_run.apply_async(countdown=max(end - now, 0.0))
    except Exception:
        logger.warning("could not queue a scheduling cycle; beat will run one", exc_info=True)


PLAN_AHEAD_KEY = "scheduler:plan-ahead"


@shared_task(name="scheduler.tasks.plan_ahead_run", ignore_result=True)
def plan_ahead_run() -> int | None:
    """Estimate every pending job's start (queue `plan`, its own worker; no cycle lock: it only
    reads the snapshot and writes the estimates). Returns how many jobs were estimated, or None
    when another plan is still running."""
    from django.core.cache import cache
    from django.utils import timezone

    from scheduler.adapters.plan_ahead import plan_ahead_run as run

    # One plan at a time: a slow one is not doubled by the next beat; the claim expires with
    # the task's time limit should its worker die.
    if not cache.add(PLAN_AHEAD_KEY, 1, timeout=plan_ahead_run.app.conf.task_time_limit or 300):
        logger.info("plan ahead skipped: another plan is running")
        return None
    try:
        return len(run(now=timezone.now()).starts)
    finally:
        cache.delete(PLAN_AHEAD_KEY)
