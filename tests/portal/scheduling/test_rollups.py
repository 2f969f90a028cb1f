"""Usage rollups equal a direct aggregate of the samples, incrementally and when rebuilt."""

import random
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import Avg, Count, Max

from portal.scheduling.models import QueueUsageRollup, QueueUsageSample
from portal.scheduling.rollups import bucket_start, usage_rollups_rebuild, usage_rollups_refresh
from portal.scheduling.selectors import usage_series
from tests.factories import QueueUsageSampleFactory

pytestmark = pytest.mark.django_db
START = datetime(2026, 11, 30, 22, 30, tzinfo=UTC)  # crosses an hour and a day boundary


def _write_minutes(queues, minutes, *, refresh):
    rng = random.Random(5)
    for minute in range(minutes):
        at = START + timedelta(minutes=minute)
        for queue in queues:
            QueueUsageSample.objects.create(
                queue=queue,
                at=at,
                gpus_allocated=rng.randint(0, 8),
                gpus_deserved=rng.choice([4.0, 6.5]),
                gpus_pending=rng.randint(0, 3),
            )
        if refresh:
            usage_rollups_refresh(queue_ids=[q.pk for q in queues], at=at)


def _direct(resolution):
    """{(queue id, bucket): (avg alloc, max alloc, avg deserved, avg pending, n)} from samples."""
    out = {}
    for sample in QueueUsageSample.objects.all():
        key = (sample.queue_id, bucket_start(sample.at, resolution))
        out.setdefault(key, []).append(sample)
    return {
        key: (
            sum(s.gpus_allocated for s in rows) / len(rows),
            max(s.gpus_allocated for s in rows),
            sum(s.gpus_deserved for s in rows) / len(rows),
            sum(s.gpus_pending for s in rows) / len(rows),
            len(rows),
        )
        for key, rows in out.items()
    }


def _rollups(resolution):
    return {
        (r.queue_id, r.bucket): (
            r.gpus_allocated_avg,
            r.gpus_allocated_max,
            r.gpus_deserved_avg,
            r.gpus_pending_avg,
            r.samples,
        )
        for r in QueueUsageRollup.objects.filter(resolution=resolution)
    }


def _assert_equal(resolution):
    direct, rolled = _direct(resolution), _rollups(resolution)
    assert direct.keys() == rolled.keys()
    for key, expected in direct.items():
        assert rolled[key] == pytest.approx(expected), key


def test_incremental_rollups_match_direct_aggregate(nlp_queue, vision_queue):
    _write_minutes([nlp_queue, vision_queue], 150, refresh=True)
    _assert_equal("hour")
    _assert_equal("day")
    assert QueueUsageRollup.objects.filter(resolution="hour").count() == 2 * 3
    assert QueueUsageRollup.objects.filter(resolution="day").count() == 2 * 2
    # The database's own aggregate agrees too (one hour bucket).
    hour = START.replace(minute=0) + timedelta(hours=1)
    db = QueueUsageSample.objects.filter(
        queue=nlp_queue, at__gte=hour, at__lt=hour + timedelta(hours=1)
    ).aggregate(avg=Avg("gpus_allocated"), top=Max("gpus_allocated"), n=Count("id"))
    rollup = QueueUsageRollup.objects.get(queue=nlp_queue, resolution="hour", bucket=hour)
    assert (rollup.gpus_allocated_avg, rollup.gpus_allocated_max, rollup.samples) == (
        pytest.approx(db["avg"]),
        db["top"],
        db["n"],
    )


def test_refresh_is_idempotent_and_only_touches_given_queues(nlp_queue, vision_queue):
    _write_minutes([nlp_queue, vision_queue], 10, refresh=False)
    usage_rollups_refresh(queue_ids=[nlp_queue.pk], at=START)
    usage_rollups_refresh(queue_ids=[nlp_queue.pk], at=START)
    assert set(QueueUsageRollup.objects.values_list("queue_id", flat=True)) == {nlp_queue.pk}
    assert QueueUsageRollup.objects.get(resolution="hour").samples == 10


def test_rebuild_matches_direct_aggregate_and_replaces_stale_rows(nlp_queue, vision_queue):
    _write_minutes([nlp_queue, vision_queue], 150, refresh=False)
    QueueUsageRollup.objects.create(
        queue=nlp_queue, resolution="hour", bucket=bucket_start(START, "day"), samples=99
    )
    call_command("usage_rollup_rebuild", stdout=StringIO())
    _assert_equal("hour")
    _assert_equal("day")


def test_rebuild_keeps_the_rollups_of_days_whose_samples_are_gone(nlp_queue):
    """Retention deletes samples by whole days after rolling them up: those rollups are all
    that is left of the days, and a rebuild must not drop them."""
    pruned_day = bucket_start(START - timedelta(days=9), "day")
    QueueUsageRollup.objects.create(
        queue=nlp_queue, resolution="day", bucket=pruned_day, gpus_allocated_avg=3, samples=1440
    )
    _write_minutes([nlp_queue], 10, refresh=False)
    usage_rollups_rebuild()
    assert QueueUsageRollup.objects.get(resolution="day", bucket=pruned_day).samples == 1440
    assert QueueUsageRollup.objects.filter(resolution="hour").count() == 1


def test_rebuild_since_keeps_older_buckets(nlp_queue):
    old = QueueUsageSampleFactory(queue=nlp_queue, at=START - timedelta(days=5))
    QueueUsageSampleFactory(queue=nlp_queue, at=START)
    usage_rollups_rebuild()
    old.gpus_allocated = 0
    old.save()
    counts = usage_rollups_rebuild(since=START - timedelta(hours=1))
    assert counts == {"hour": 1, "day": 1}
    kept = QueueUsageRollup.objects.get(resolution="day", bucket=bucket_start(old.at, "day"))
    assert kept.gpus_allocated_avg == 4  # not rebuilt


def test_usage_series_reads_rollups_for_hours_and_days(nlp_queue):
    _write_minutes([nlp_queue], 150, refresh=True)
    hours = usage_series(since=START, bucket="hour")
    assert [row["bucket"] for row in hours] == [
        START.replace(minute=0) + timedelta(hours=h) for h in range(3)
    ]
    direct = _direct("hour")
    assert [row["gpus"] for row in hours] == pytest.approx(
        [direct[(nlp_queue.pk, row["bucket"])][0] for row in hours]
    )
    assert {row["queue__name"] for row in hours} == {nlp_queue.name}
    days = usage_series(since=START, bucket="day")
    assert len(days) == 2
    minutes = usage_series(since=START + timedelta(minutes=140), bucket="minute")
    assert len(minutes) == 10
