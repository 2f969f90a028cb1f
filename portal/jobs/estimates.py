"""Estimated start times of pending jobs: what the plan-ahead task stores and how it is said.

The task (scheduler.tasks.plan_ahead_run) runs the scheduler forward on a copy of the cycle's
snapshot (scheduler.core.plan) and hands each pending job's estimate to
``start_estimates_record``. The pages, the API and the CLI say it with ``estimate_text``: a
range always, a single likely time only when the plan had one ("likely to start 14:10-15:30
UTC"), "not within 7 days" beyond the horizon, "never" when the job can never run as submitted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import F

from . import lifecycle
from .models import Job, StartEstimate

# The statuses an estimate is shown for: the job still waits for its pods to be placed.
ESTIMATED_STATUSES = frozenset({*lifecycle.WAITING, lifecycle.Status.ADMITTED})


@dataclass(frozen=True, slots=True)
class EstimateRow:
    job_id: int
    outlook: str  # StartEstimate.Outlook
    earliest: datetime | None
    likely: datetime | None
    latest: datetime | None


def start_estimates_record(
    *, rows: Iterable[EstimateRow], until: datetime, computed_at: datetime
) -> int:
    """Replace every stored estimate with ``rows`` (one plan's); returns how many were
    stored. Jobs deleted since the snapshot are skipped."""
    rows = list(rows)
    with transaction.atomic():
        existing = set(
            Job.objects.filter(id__in=[row.job_id for row in rows]).values_list("id", flat=True)
        )
        StartEstimate.objects.all().delete()
        StartEstimate.objects.bulk_create(
            [
                StartEstimate(
                    job_id=row.job_id,
                    outlook=row.outlook,
                    earliest=row.earliest,
                    likely=row.likely,
                    latest=row.latest,
                    until=until,
                    computed_at=computed_at,
                )
                for row in rows
                if row.job_id in existing
            ],
            batch_size=1000,
        )
    return len(existing)


def job_start_estimate(job: Job) -> StartEstimate | None:
    """The job's estimate while it waits; None when it does not wait or none was made."""
    if job.status not in ESTIMATED_STATUSES:
        return None
    return StartEstimate.objects.filter(job=job).first()


def queue_next_start(queue_id: int) -> StartEstimate | None:
    """The soonest estimated start among the queue's waiting jobs (by likely start, one with a
    range only after those with a likely time, then by earliest), as
    scheduler.core.plan.next_start orders them."""
    return (
        StartEstimate.objects.filter(
            job__queue_id=queue_id,
            job__status__in=ESTIMATED_STATUSES,
            outlook=StartEstimate.Outlook.STARTS,
        )
        .order_by(F("likely").asc(nulls_last=True), "earliest", "job_id")
        .first()
    )


def queue_next_starts(queue_ids: Iterable[int]) -> dict[int, StartEstimate]:
    """``queue_next_start`` of each queue that has one (a query per queue: a page's few)."""
    found = {queue_id: queue_next_start(queue_id) for queue_id in queue_ids}
    return {queue_id: estimate for queue_id, estimate in found.items() if estimate is not None}


def estimate_texts(jobs: Iterable[Job]) -> dict[int, str]:
    """``estimate_text`` of each waiting job among ``jobs`` that has an estimate (one query)."""
    waiting = [job.pk for job in jobs if job.status in ESTIMATED_STATUSES]
    return {
        estimate.job_id: estimate_text(estimate)
        for estimate in StartEstimate.objects.filter(job_id__in=waiting)
    }


def estimate_text(estimate: StartEstimate | None) -> str:
    """The estimate in words, times in UTC; "" without one."""
    if estimate is None:
        return ""
    if estimate.outlook == StartEstimate.Outlook.NEVER:
        return "never: it can never run as submitted"
    if estimate.outlook == StartEstimate.Outlook.LATER:
        return f"not within {_span(estimate.until - estimate.computed_at)}"
    if estimate.earliest is None:  # a plan that starts a job always says when at the earliest
        return ""
    day = estimate.computed_at
    earliest = _clock(estimate.earliest, day)
    if estimate.latest is None:
        return f"may start {earliest} UTC or later (not bounded within the horizon)"
    if estimate.likely is None:
        # Some job ahead has no run-time estimate at all: a range, never a precise time.
        return f"may start {_range(estimate.earliest, estimate.latest, day)} UTC"
    if estimate.earliest == estimate.latest:
        return f"likely to start {earliest} UTC"
    return f"likely to start {_range(estimate.earliest, estimate.latest, day)} UTC"


def estimate_fields(estimate: StartEstimate | None) -> dict:
    """``estimated_start`` (the likely time, or None) and ``estimated_start_range`` for the
    API."""
    if estimate is None:
        return {"estimated_start": None, "estimated_start_range": None}
    return {
        "estimated_start": estimate.likely,
        "estimated_start_range": {
            "outlook": estimate.outlook,
            "earliest": estimate.earliest,
            "latest": estimate.latest,
            "until": estimate.until,
            "computed_at": estimate.computed_at,
            "text": estimate_text(estimate),
        },
    }


def _range(first: datetime, last: datetime, day: datetime) -> str:
    low, high = _clock(first, day), _clock(last, day)
    return low if low == high else f"{low}-{high}"


def _clock(at: datetime, day: datetime) -> str:
    """HH:MM, with the date when it is not ``day``'s (UTC)."""
    at = at.astimezone(UTC)
    if at.date() == day.astimezone(UTC).date():
        return at.strftime("%H:%M")
    return at.strftime("%Y-%m-%d %H:%M")


def _span(length: timedelta) -> str:
    seconds = max(length.total_seconds(), 0.0)
    if seconds >= 86400:
        days = round(seconds / 86400)
        return f"{days} day" + ("s" if days != 1 else "")
    hours = max(round(seconds / 3600), 1)
    return f"{hours} hour" + ("s" if hours != 1 else "")
