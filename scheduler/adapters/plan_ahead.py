"""Plan ahead: estimate when each pending job starts, outside the scheduling cycle.

Reads the snapshot exactly as a cycle builds it (``snapshot_build``, one read transaction, no
cycle lock: the plan writes nothing the cycle reads, only the estimates), predicts run times,
runs ``scheduler.core.plan`` with a cost bound and stores the estimates
(``portal.jobs.estimates.start_estimates_record``).

Run times. A job's ``expected_duration_seconds`` comes first: a running job is expected to end
that long after it started, a pending one to run that long; a running job already past it is
predicted as one without. Otherwise the history of finished jobs predicts it
(``scheduler.core.runtimes.RuntimeHistory``), keyed ``(queue, submitter, image)`` (the first
task's image): the most specific of those with enough jobs, each job of the last
``HISTORY_DAYS`` days that ran (started and finished), and the running jobs as censored at what
they have run so far. A run-time limit bounds every prediction: ``runtime_limit`` gives it per
job (by default the tightest of the job's, its queue's and its tenant's, as the cycle ends it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Min

from scheduler.adapters.gc_pause import gc_paused
from scheduler.adapters.portal_port import (
    EstimateRow,
    Job,
    JobTask,
    Placement,
    effective_limit,
    start_estimates_record,
)
from scheduler.adapters.snapshot import JobRow, SnapshotBundle, snapshot_build
from scheduler.core.plan import Plan, PlanLimits, plan_starts
from scheduler.core.runtimes import Key, RuntimeHistory, Span
from scheduler.core.types import OCCUPYING_STATUSES, JobInfo

logger = logging.getLogger(__name__)

HISTORY_DAYS = 30
HISTORY_MAX_JOBS = 20_000  # the most recent finished jobs read, at most
# Statuses of jobs whose run time ran to an end the scheduler did not choose.
FINISHED = (Job.Status.SUCCEEDED, Job.Status.FAILED, Job.Status.CANCELLED)


def no_runtime_limit(job: JobRow) -> float | None:
    """A ``runtime_limit`` under which no job has a run-time limit."""
    return None


def stored_runtime_limits(job_ids: list[int]) -> Callable[[JobRow], float | None]:
    """The run-time limit each job runs under (portal.jobs.services.jobs_runtime_limit_end's
    rule: the tightest of its own, its queue's and its tenant's), read once for the plan."""
    rows = Job.objects.filter(id__in=job_ids).values_list(
        "id",
        "max_runtime_seconds",
        "queue__max_runtime_seconds",
        "queue__tenant__max_runtime_seconds",
    )
    found = {job_id: effective_limit(*limits) for job_id, *limits in rows}

    def limit(job: JobRow) -> float | None:
        value = found.get(job.id)
        return float(value) if value is not None else None

    return limit


@dataclass(frozen=True, slots=True)
class _Facts:
    key: Key
    expected: float | None  # expected_duration_seconds
    started: float | None  # started_at, seconds since 1970


def plan_ahead_run(
    *,
    now: datetime,
    limits: PlanLimits | None = None,
    runtime_limit: Callable[[JobRow], float | None] | None = None,
) -> Plan:
    """Estimate every pending job's start from a snapshot taken at ``now`` and store them."""
    limits = limits or plan_limits()
    bundle = snapshot_build(now=now)
    if runtime_limit is None:
        runtime_limit = stored_runtime_limits([int(job.name) for job in bundle.snapshot.jobs])
    ends, durations = job_runtimes(bundle, runtime_limit=runtime_limit)
    releases = pod_releases(bundle, grace=settings.EVICTION_GRACE_SECONDS)
    with gc_paused():
        plan = plan_starts(
            bundle.snapshot,
            bundle.conf,
            ends=ends,
            durations=durations,
            releases=releases,
            limits=limits,
        )
    start_estimates_record(
        rows=[
            EstimateRow(
                job_id=int(name),
                outlook=estimate.outlook.value,
                earliest=_time(estimate.earliest),
                likely=_time(estimate.likely),
                latest=_time(estimate.latest),
            )
            for name, estimate in plan.starts.items()
        ],
        until=_time(plan.until) or now,
        computed_at=now,
    )
    logger.info(
        "plan ahead: %d pending jobs estimated, %d core runs", len(plan.starts), plan.instants
    )
    return plan


def plan_limits() -> PlanLimits:
    return PlanLimits(
        horizon=settings.PLAN_AHEAD_HORIZON_SECONDS,
        max_instants=settings.PLAN_AHEAD_MAX_INSTANTS,
    )


def job_runtimes(
    bundle: SnapshotBundle,
    *,
    runtime_limit: Callable[[JobRow], float | None] = no_runtime_limit,
) -> tuple[dict[str, Span], dict[str, Span]]:
    """Per running job of the snapshot, when it ends (snapshot times); per pending job, how
    long it runs once started."""
    snapshot = bundle.snapshot
    now = snapshot.now
    facts = _facts([int(job.name) for job in snapshot.jobs])
    running = {
        job.name: now - started
        for job in snapshot.jobs
        if job.name in facts and (started := facts[job.name].started) is not None and _placed(job)
    }
    history = RuntimeHistory(
        _finished(now),
        [(facts[name].key, max(elapsed, 0.0)) for name, elapsed in running.items()],
    )
    ends: dict[str, Span] = {}
    durations: dict[str, Span] = {}
    for job in snapshot.jobs:
        fact = facts.get(job.name)
        if fact is None:
            continue
        limit = runtime_limit(bundle.index.jobs[job.name])
        if job.name in running:
            elapsed = max(running[job.name], 0.0)
            if fact.expected is not None and fact.expected > elapsed:
                ends[job.name] = Span.exactly(_bounded(fact.expected, limit) - elapsed).shifted(now)
            else:
                ends[job.name] = history.remaining(fact.key, elapsed=elapsed, limit=limit).shifted(
                    now
                )
        elif fact.expected is not None:
            durations[job.name] = Span.exactly(_bounded(fact.expected, limit))
        else:
            durations[job.name] = history.remaining(fact.key, limit=limit)
    return ends, durations


def pod_releases(bundle: SnapshotBundle, *, grace: float) -> dict[str, Span]:
    """Per releasing pod of the snapshot, when it is gone (snapshot times): by its preemption
    notice's deadline, deleted then with up to ``grace`` (it may checkpoint and exit at once);
    without a notice, within ``grace`` from now. One query, of the releasing placements."""
    now = bundle.snapshot.now
    releasing = {
        placement.id: name
        for name, placement in bundle.index.placements.items()
        if placement.state == Placement.State.RELEASING
    }
    deadlines = dict(
        Placement.objects.filter(id__in=releasing, notice_deadline__isnull=False).values_list(
            "id", "notice_deadline"
        )
    )
    releases = {}
    for placement_id, name in releasing.items():
        deadline = deadlines.get(placement_id)
        likely = max(deadline.timestamp(), now) if deadline is not None else now
        releases[name] = Span(now, likely, likely + grace)
    return releases


def _placed(job: JobInfo) -> bool:
    """Holds resources: a running job to the plan (its end matters, not its run time)."""
    return any(task.status in OCCUPYING_STATUSES and task.node for task in job.tasks)


def _bounded(seconds: float, limit: float | None) -> float:
    return seconds if limit is None else min(seconds, limit)


def _images(job_ids: list[int]) -> dict[int, str]:
    """Each job's first task's image (the key's last part)."""
    first = (
        JobTask.objects.filter(job_id__in=job_ids)
        .values("job_id")
        .annotate(first=Min("id"))
        .values_list("first", flat=True)
    )
    return dict(JobTask.objects.filter(id__in=list(first)).values_list("job_id", "image"))


def _facts(job_ids: list[int]) -> dict[str, _Facts]:
    images = _images(job_ids)
    out = {}
    rows = Job.objects.filter(id__in=job_ids).values_list(
        "id", "queue__name", "submitter_id", "expected_duration_seconds", "started_at"
    )
    for job_id, queue, submitter, expected, started in rows:
        out[str(job_id)] = _Facts(
            (queue, str(submitter), images.get(job_id, "")),
            float(expected) if expected else None,
            started.timestamp() if started is not None else None,
        )
    return out


def _finished(now: float) -> list[tuple[Key, float]]:
    """(key, run time) of the jobs that finished in the last HISTORY_DAYS days, newest first."""
    since = datetime.fromtimestamp(now, tz=UTC) - timedelta(days=HISTORY_DAYS)
    rows = list(
        Job.objects.filter(
            status__in=FINISHED,
            finished_at__gte=since,
            started_at__isnull=False,
        )
        .order_by("-finished_at")
        .values_list("id", "queue__name", "submitter_id", "started_at", "finished_at")[
            :HISTORY_MAX_JOBS
        ]
    )
    images = _images([row[0] for row in rows])
    # The filter leaves no row without both times.
    return [
        (
            (queue, str(submitter), images.get(job_id, "")),
            max((finished - started).total_seconds(), 0.0),
        )
        for job_id, queue, submitter, started, finished in rows
        if started is not None and finished is not None
    ]


def _time(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=UTC)


__all__ = ["job_runtimes", "no_runtime_limit", "plan_ahead_run", "plan_limits"]
