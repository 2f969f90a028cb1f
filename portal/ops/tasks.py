"""Thin Celery tasks of operations (beat runs `retention_run` every RETENTION_INTERVAL_SECONDS)."""

from __future__ import annotations

import logging
from dataclasses import asdict

from celery import shared_task

logger = logging.getLogger(__name__)
# Well inside CELERY_TASK_SOFT_TIME_LIMIT (240 s): a backlog of sample days is worked off over
# several runs, one committed day at a time.
RUN_BUDGET_SECONDS = 120.0


@shared_task(name="portal.ops.tasks.retention_run", ignore_result=True)
def retention_run() -> None:
    from django.conf import settings
    from django.utils import timezone

    from portal.ops.retention import retention_run as run

    report = run(
        now=timezone.now(),
        sample_days=settings.USAGE_SAMPLE_RETENTION_DAYS,
        preemption_event_days=settings.PREEMPTION_EVENT_RETENTION_DAYS,
        cycle_run_days=settings.CYCLE_RUN_RETENTION_DAYS,
        max_seconds=RUN_BUDGET_SECONDS,
    )
    logger.info(
        "retention done in %.1f s", report.seconds, extra={"event": "retention", **asdict(report)}
    )
