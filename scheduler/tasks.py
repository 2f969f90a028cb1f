"""Thin Celery tasks: take the cluster-wide lock, then call the adapters.

Beat runs `scheduling_cycle_run` every SCHEDULER_CYCLE_SECONDS; a submit or cancel kicks one
right after its transaction commits. If a cycle is already running, a kick is dropped: the
running cycle or the next beat picks the change up.
"""

from __future__ import annotations

import logging

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="scheduler.tasks.scheduling_cycle_run", ignore_result=True)
def scheduling_cycle_run() -> int | None:
    """Returns the CycleRun id, or None when another worker holds the lock."""
    from scheduler.adapters.backends import backend_from_settings
    from scheduler.adapters.cycle import scheduling_cycle_run as cycle_run
    from scheduler.adapters.lock import cycle_lock

    with cycle_lock() as held:
        if not held:
            logger.info("scheduling cycle skipped: another worker is running one")
            return None
        return cycle_run(backend=backend_from_settings()).id


def scheduling_cycle_kick() -> None:
    """Queue a cycle once the current transaction commits (call from services)."""
    from django.db import transaction

    transaction.on_commit(_kick)


def _kick() -> None:
    # The submission is already committed: a broker outage must not turn it into an error
    # for the user. Beat runs the next cycle anyway.
    try:
        scheduling_cycle_run.delay()
    except Exception:
        logger.warning("could not queue a scheduling cycle; beat will run one", exc_info=True)
