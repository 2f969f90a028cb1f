"""Hourly and daily rollups of the per-minute QueueUsageSample rows.

The dashboards' day/week/month usage ranges read `QueueUsageRollup` rows instead of
aggregating up to 2M samples per request. Buckets are UTC hours and days.

- `usage_rollups_refresh` re-aggregates the current hour and day buckets of a few queues right
  after their samples are written (`scheduler.adapters.persist._persist_usage`): the hour from
  its samples (at most 60 per queue), the day from its hour rollups (at most 24 per queue), each
  upserted in one query (INSERT ... ON CONFLICT DO UPDATE on SQLite and PostgreSQL). Exact
  values, idempotent, no running state.
- `usage_rollups_rebuild` recomputes the buckets of a range of days from the samples
  (backfill, repair, and retention right before it deletes a day's samples).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Avg, BigIntegerField, Count, F, Func, Max, Sum
from django.db.models.functions import Trunc

from .models import QueueUsageRollup, QueueUsageSample

HOUR = QueueUsageRollup.Resolution.HOUR
DAY = QueueUsageRollup.Resolution.DAY
UPDATE_FIELDS = [
    "gpus_allocated_avg",
    "gpus_allocated_max",
    "gpus_deserved_avg",
    "gpus_pending_avg",
    "samples",
]
BATCH = 2000


class EpochSeconds(Func):
    """Whole seconds since 1970 UTC of a datetime column (PostgreSQL and SQLite only)."""

    VENDORS = ("postgresql", "sqlite")
    output_field = BigIntegerField()

    def as_postgresql(self, compiler, connection, **extra):
        template = "CAST(EXTRACT(EPOCH FROM %(expressions)s) AS BIGINT)"
        return self.as_sql(compiler, connection, template=template, **extra)

    def as_sqlite(self, compiler, connection, **extra):
        template = "CAST(ROUND((julianday(%(expressions)s) - 2440587.5) * 86400) AS INTEGER)"
        return self.as_sql(compiler, connection, template=template, **extra)


def bucket_start(at: datetime, resolution: str) -> datetime:
    """The UTC hour or day containing `at`."""
    at = at.astimezone(UTC)
    if resolution == DAY:
        return at.replace(hour=0, minute=0, second=0, microsecond=0)
    return at.replace(minute=0, second=0, microsecond=0)


def _upsert(rows: Iterable[QueueUsageRollup]) -> int:
    rows = list(rows)
    if rows:
        QueueUsageRollup.objects.bulk_create(
            rows,
            batch_size=BATCH,
            update_conflicts=True,
            unique_fields=["queue", "resolution", "bucket"],
            update_fields=UPDATE_FIELDS,
        )
    return len(rows)


def _from_samples(row: dict, *, bucket: datetime) -> QueueUsageRollup:
    return QueueUsageRollup(
        queue_id=row["queue_id"],
        resolution=HOUR,
        bucket=bucket,
        gpus_allocated_avg=float(row["alloc_avg"] or 0),
        gpus_allocated_max=float(row["alloc_max"] or 0),
        gpus_deserved_avg=float(row["deserved_avg"] or 0),
        gpus_pending_avg=float(row["pending_avg"] or 0),
        samples=int(row["n"]),
    )


def _from_hours(row: dict, *, bucket: datetime) -> QueueUsageRollup:
    """A day from its hour rollups: sample-weighted averages (exactly the samples' average)."""
    n = int(row["n"] or 0)
    return QueueUsageRollup(
        queue_id=row["queue_id"],
        resolution=DAY,
        bucket=bucket,
        gpus_allocated_avg=float(row["alloc_sum"] or 0) / n if n else 0.0,
        gpus_allocated_max=float(row["alloc_max"] or 0),
        gpus_deserved_avg=float(row["deserved_sum"] or 0) / n if n else 0.0,
        gpus_pending_avg=float(row["pending_sum"] or 0) / n if n else 0.0,
        samples=n,
    )


_SAMPLE_AGGREGATES = {
    "alloc_avg": Avg("gpus_allocated"),
    "alloc_max": Max("gpus_allocated"),
    "deserved_avg": Avg("gpus_deserved"),
    "pending_avg": Avg("gpus_pending"),
    "n": Count("id"),
}
_HOUR_AGGREGATES = {
    "alloc_sum": Sum(F("gpus_allocated_avg") * F("samples")),
    "alloc_max": Max("gpus_allocated_max"),
    "deserved_sum": Sum(F("gpus_deserved_avg") * F("samples")),
    "pending_sum": Sum(F("gpus_pending_avg") * F("samples")),
    "n": Sum("samples"),
}


def usage_rollups_refresh(*, queue_ids: Iterable[int], at: datetime) -> None:
    """Recompute the hour and day buckets containing `at` for `queue_ids` (2 reads, 2 upserts)."""
    queue_ids = sorted(set(queue_ids))
    if not queue_ids:
        return
    hour = bucket_start(at, HOUR)
    rows = (
        QueueUsageSample.objects.filter(
            queue_id__in=queue_ids, at__gte=hour, at__lt=hour + timedelta(hours=1)
        )
        .values("queue_id")
        .annotate(**_SAMPLE_AGGREGATES)
        .order_by()
    )
    _upsert(_from_samples(row, bucket=hour) for row in rows)
    day = bucket_start(at, DAY)
    rows = (
        QueueUsageRollup.objects.filter(
            resolution=HOUR,
            queue_id__in=queue_ids,
            bucket__gte=day,
            bucket__lt=day + timedelta(days=1),
        )
        .values("queue_id")
        .annotate(**_HOUR_AGGREGATES)
        .order_by()
    )
    _upsert(_from_hours(row, bucket=day) for row in rows)


def usage_rollups_rebuild(
    *, since: datetime | None = None, until: datetime | None = None
) -> dict[str, int]:
    """Recompute every hour and day bucket from `since`'s day (or the first sample's) up to
    `until`'s day (excluded; or the end) from the samples.

    Days before the first remaining sample are left alone: retention (portal.ops.retention)
    deletes samples by whole days once their rollups are written, and those rollups are then
    the only record of those days.
    """
    first = QueueUsageSample.objects.order_by("at").values_list("at", flat=True).first()
    if first is None:
        return {"hour": 0, "day": 0}
    start = bucket_start(max(since, first) if since is not None else first, DAY)
    end = bucket_start(until, DAY) if until is not None else None
    if end is not None and end <= start:
        return {"hour": 0, "day": 0}
    window = {"bucket__gte": start, **({"bucket__lt": end} if end is not None else {})}
    with transaction.atomic():
        QueueUsageRollup.objects.filter(**window).delete()
        samples = QueueUsageSample.objects.filter(
            at__gte=start, **({"at__lt": end} if end is not None else {})
        )
        hours = (
            samples.annotate(b=Trunc("at", "hour", tzinfo=UTC))
            .values("queue_id", "b")
            .annotate(**_SAMPLE_AGGREGATES)
            .order_by()
        )
        hour_count = _upsert(
            _from_samples(row, bucket=row["b"]) for row in hours.iterator(chunk_size=BATCH)
        )
        days = (
            QueueUsageRollup.objects.filter(resolution=HOUR, **window)
            .annotate(b=Trunc("bucket", "day", tzinfo=UTC))
            .values("queue_id", "b")
            .annotate(**_HOUR_AGGREGATES)
            .order_by()
        )
        day_count = _upsert(
            _from_hours(row, bucket=row["b"]) for row in days.iterator(chunk_size=BATCH)
        )
    return {"hour": hour_count, "day": day_count}
