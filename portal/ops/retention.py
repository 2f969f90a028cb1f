"""Retention: what the portal keeps, and for how long.

Exactly these tables, named here and nowhere else, are pruned; every other table (jobs, queue
change audit, placements, and any accounting ledger) is never touched:

* `QueueUsageSample` (one row per queue per minute): days older than the sample age are
  rolled up first, into the hour and day `QueueUsageRollup` rows the dashboards read, then
  deleted. Whole UTC days, one transaction per day, oldest first: an interrupted run leaves
  whole days, and the rollups of a day are recomputed from all of its samples right before they
  go, so the dashboards show the same figures before and after. Rollups are kept.
* `TenantUsageSample` (one row per tenant per cycle that samples): deleted after the sample
  age, with no rollup. Only each tenant's newest sample is read (its share on the tenant pages);
  the dashboards' history comes from the queues' rollups and the ledger keeps the accounting, so
  an old tenant sample has no reader, and each tenant's newest sample is kept whatever its age.
* `PreemptionEvent`: deleted after their own age (the preemption history and its chart).
* `CycleRun`: deleted after their own age, except cycles a kept PreemptionEvent points to
  (the history links each eviction to its cycle's timings).

On the cluster, the reconcile keeps what these say (`finished_pods_kept`, `ttl_jobs_kept`):

* A finished pod (its logs can still be read, by the portal or `kubectl logs`) stays
  FINISHED_POD_RETENTION_SECONDS after it ended; the pods of a job with
  ttlSecondsAfterFinished stay while the job runs on, and that long after the job ended.
* An ended job's plugin objects (Service, ConfigMap, ...) stay for its ttlSecondsAfterFinished.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from portal.cluster.models import Placement
from portal.cluster.namespaces import placement_namespace
from portal.jobs.models import Job
from portal.scheduling.models import CycleRun, PreemptionEvent, QueueUsageSample
from portal.scheduling.rollups import DAY, bucket_start, usage_rollups_rebuild
from portal.tenants.models import TenantUsageSample

PRUNED_MODELS = (QueueUsageSample, TenantUsageSample, PreemptionEvent, CycleRun)
BATCH = 5000


@dataclass
class RetentionReport:
    samples_deleted: int = 0
    tenant_samples_deleted: int = 0
    days_rolled_up: list[str] = field(default_factory=list)
    preemption_events_deleted: int = 0
    cycle_runs_deleted: int = 0
    seconds: float = 0.0
    # Stopped at the time budget with older samples left: the next run carries on.
    samples_left: bool = False


def retention_run(
    *,
    now: datetime,
    sample_days: int,
    preemption_event_days: int,
    cycle_run_days: int,
    max_seconds: float | None = None,
) -> RetentionReport:
    """Prune what is older than each age in days (0: keep that table forever).

    `max_seconds` bounds the sample days a run works through (about 2 s a day at 50 queues):
    the first run on a year-old installation has hundreds of days to roll up, more than a
    Celery task may take. Each day commits on its own, so the next run carries on."""
    for name, days in (
        ("sample_days", sample_days),
        ("preemption_event_days", preemption_event_days),
        ("cycle_run_days", cycle_run_days),
    ):
        if days < 0:
            raise ValueError(f"{name} must be 0 (keep forever) or more, not {days}")
    started = time.perf_counter()
    report = RetentionReport()
    if sample_days:
        deadline = started + max_seconds if max_seconds is not None else None
        _samples_prune(
            report, before=bucket_start(now - timedelta(days=sample_days), DAY), deadline=deadline
        )
        report.tenant_samples_deleted = _tenant_samples_prune(
            before=now - timedelta(days=sample_days)
        )
    if preemption_event_days:
        events = PreemptionEvent.objects.filter(
            occurred_at__lt=now - timedelta(days=preemption_event_days)
        )
        report.preemption_events_deleted = _delete_in_batches(events)
    if cycle_run_days:
        cycles = CycleRun.objects.filter(
            started_at__lt=now - timedelta(days=cycle_run_days), preemptions__isnull=True
        )
        report.cycle_runs_deleted = _delete_in_batches(cycles)
    report.seconds = time.perf_counter() - started
    return report


def _samples_prune(report: RetentionReport, *, before: datetime, deadline: float | None) -> None:
    while True:
        first = (
            QueueUsageSample.objects.filter(at__lt=before)
            .order_by("at")
            .values_list("at", flat=True)
            .first()
        )
        if first is None:
            return
        if deadline is not None and time.perf_counter() >= deadline:
            report.samples_left = True
            return
        day = bucket_start(first, DAY)
        end = min(day + timedelta(days=1), before)
        with transaction.atomic():
            usage_rollups_rebuild(since=day, until=end)
            deleted, _ = QueueUsageSample.objects.filter(at__gte=day, at__lt=end).delete()
        report.samples_deleted += deleted
        report.days_rolled_up.append(day.date().isoformat())


def _tenant_samples_prune(*, before: datetime) -> int:
    tenant_ids = TenantUsageSample.objects.values_list("tenant_id", flat=True).distinct()
    newest = [
        TenantUsageSample.objects.filter(tenant_id=tenant_id)
        .order_by("-at", "-id")
        .values_list("pk", flat=True)
        .first()
        for tenant_id in tenant_ids
    ]
    old = TenantUsageSample.objects.filter(at__lt=before).exclude(pk__in=newest)
    return _delete_in_batches(old)


def _delete_in_batches(queryset) -> int:
    model = queryset.model
    total = 0
    while True:
        ids = list(queryset.order_by("pk").values_list("pk", flat=True)[:BATCH])
        if not ids:
            return total
        with transaction.atomic():
            deleted = model.objects.filter(pk__in=ids).delete()[1].get(model._meta.label, 0)
        total += deleted


def finished_pods_kept(*, now: datetime) -> frozenset[tuple[str, str]]:
    """(namespace, name) of the finished pods still within their retention on the cluster."""
    retention = settings.FINISHED_POD_RETENTION_SECONDS
    finished = Placement.objects.filter(
        state__in=[Placement.State.SUCCEEDED, Placement.State.FAILED]
    )
    by_default = finished.filter(job__ttl_seconds_after_finished__isnull=True)
    names = (
        list(
            by_default.filter(ended_at__gte=now - timedelta(seconds=retention)).values_list(
                "namespace", "pod_name"
            )
        )
        if retention > 0
        else []
    )
    for namespace, name, status, finished_at, cancelled_at, ttl in finished.filter(
        job__ttl_seconds_after_finished__isnull=False
    ).values_list(
        "namespace",
        "pod_name",
        "job__status",
        "job__finished_at",
        "job__cancelled_at",
        "job__ttl_seconds_after_finished",
    ):
        ended = finished_at or cancelled_at
        if status not in Job.TERMINAL_STATUSES or (
            ended is not None and now < ended + timedelta(seconds=ttl)
        ):
            names.append((namespace, name))
    return frozenset((placement_namespace(namespace), name) for namespace, name in names)


def ttl_jobs_kept(*, now: datetime) -> list[int]:
    """Ended jobs whose ttlSecondsAfterFinished has not run out: their plugin objects stay."""
    rows = Job.objects.filter(
        ttl_seconds_after_finished__gt=0, status__in=Job.TERMINAL_STATUSES
    ).values_list("id", "finished_at", "cancelled_at", "ttl_seconds_after_finished")
    return [
        job_id
        for job_id, finished_at, cancelled_at, ttl in rows
        if (ended := finished_at or cancelled_at) is not None
        and now < ended + timedelta(seconds=ttl)
    ]
