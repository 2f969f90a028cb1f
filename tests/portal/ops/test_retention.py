"""Retention keeps the dashboards' figures, rolls samples up before deleting them, and touches
no table but the ones it names."""

import json
import random
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.cluster.models import Placement
from portal.dashboards import views as dashboards
from portal.jobs.models import Job
from portal.ops.retention import PRUNED_MODELS, retention_run
from portal.queues.models import QueueChange
from portal.scheduling.models import (
    CycleRun,
    PreemptionEvent,
    QueueUsageRollup,
    QueueUsageSample,
)
from portal.scheduling.rollups import usage_rollups_rebuild
from tests.factories import (
    CycleRunFactory,
    JobFactory,
    PlacementFactory,
    PreemptionEventFactory,
    QueueFactory,
)

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 1, 14, 37, 12, tzinfo=UTC)
SAMPLE_MINUTES = 10


@pytest.fixture
def frozen(monkeypatch):
    monkeypatch.setattr(timezone, "now", lambda: NOW)


def samples_every(queues, *, days: int, minutes: int = SAMPLE_MINUTES, seed: int = 3) -> None:
    rng = random.Random(seed)
    rows = []
    at = NOW - timedelta(days=days)
    while at <= NOW:
        for queue in queues:
            rows.append(
                QueueUsageSample(
                    queue=queue,
                    at=at,
                    gpus_allocated=rng.randint(0, 16),
                    gpus_deserved=rng.choice([4.0, 5.5, 8.0]),
                    gpus_pending=rng.randint(0, 8),
                )
            )
        at += timedelta(minutes=minutes)
    QueueUsageSample.objects.bulk_create(rows, batch_size=2000)


def dashboard_figures(user) -> str:
    figures = {}
    for range_name in dashboards.RANGES:
        request = RequestFactory().get("/dashboards/", {"range": range_name})
        request.user = user
        for name, build in dashboards.CHARTS.items():
            figures[f"{name}/{range_name}"] = build(request)
    return json.dumps(figures, sort_keys=True, default=str)


def test_the_dashboards_show_the_same_figures_after_retention(
    frozen, staff, nlp_queue, vision_queue
):
    queues = [nlp_queue, vision_queue, QueueFactory(tenant=nlp_queue.tenant, name="nlp-eval")]
    samples_every(queues, days=40)
    usage_rollups_rebuild()  # what the cycle keeps current as it writes samples
    victim = JobFactory(queue=nlp_queue)
    for days_ago in (1, 5, 20, 29, 45, 90):
        PreemptionEventFactory(victim_job=victim, occurred_at=NOW - timedelta(days=days_ago))
    before = dashboard_figures(staff)

    report = retention_run(now=NOW, sample_days=7, preemption_event_days=35, cycle_run_days=3)

    assert dashboard_figures(staff) == before
    cutoff = datetime(2026, 11, 24, tzinfo=UTC)  # the UTC day that began 7 days before NOW
    oldest = QueueUsageSample.objects.order_by("at").first().at
    assert cutoff <= oldest < cutoff + timedelta(minutes=SAMPLE_MINUTES)
    assert len(report.days_rolled_up) == 33  # 2026-10-22 .. 2026-11-23
    assert report.samples_deleted > 0
    assert report.preemption_events_deleted == 2


def test_samples_are_rolled_up_before_they_are_deleted(frozen, nlp_queue):
    samples_every([nlp_queue], days=4, minutes=30)
    old_day = datetime(2026, 11, 28, tzinfo=UTC)
    old = list(QueueUsageSample.objects.filter(at__gte=old_day, at__lt=old_day + timedelta(days=1)))
    assert len(old) == 48
    assert not QueueUsageRollup.objects.exists()  # never rolled up

    retention_run(now=NOW, sample_days=2, preemption_event_days=0, cycle_run_days=0)

    assert not QueueUsageSample.objects.filter(at__lt=old_day + timedelta(days=1)).exists()
    day = QueueUsageRollup.objects.get(resolution="day", bucket=old_day)
    assert day.samples == 48
    assert day.gpus_allocated_avg == pytest.approx(sum(s.gpus_allocated for s in old) / 48)
    assert day.gpus_allocated_max == max(s.gpus_allocated for s in old)
    assert day.gpus_deserved_avg == pytest.approx(sum(s.gpus_deserved for s in old) / 48)
    assert (
        QueueUsageRollup.objects.filter(
            resolution="hour", bucket__gte=old_day, bucket__lt=old_day + timedelta(days=1)
        ).count()
        == 24
    )


DML = re.compile(r'^\s*(?:DELETE\s+FROM|UPDATE|INSERT\s+INTO)\s+"?(\w+)"?', re.IGNORECASE)


def test_retention_writes_only_the_tables_it_names(frozen, nlp_queue):
    samples_every([nlp_queue], days=5, minutes=60)
    job = JobFactory(queue=nlp_queue, status=Job.Status.SUCCEEDED)
    PlacementFactory(job=job)
    QueueChange.objects.create(queue=nlp_queue, field="weight", old_value="1", new_value="2")
    old_cycle = CycleRunFactory(started_at=NOW - timedelta(days=30))
    PreemptionEventFactory(victim_job=job, occurred_at=NOW - timedelta(days=30), cycle=old_cycle)
    kept = {model: model.objects.count() for model in (Job, Placement, QueueChange)}

    with CaptureQueriesContext(connection) as queries:
        report = retention_run(now=NOW, sample_days=2, preemption_event_days=10, cycle_run_days=10)

    written = {m.group(1) for q in queries.captured_queries if (m := DML.match(q["sql"]))}
    allowed = {model._meta.db_table for model in (*PRUNED_MODELS, QueueUsageRollup)}
    assert written
    assert written <= allowed, written - allowed
    assert {model: model.objects.count() for model in kept} == kept
    assert (report.preemption_events_deleted, report.cycle_runs_deleted) == (1, 1)


def test_cycle_records_an_eviction_points_to_are_kept(frozen, nlp_queue):
    old = NOW - timedelta(days=30)
    linked, unlinked = CycleRunFactory(started_at=old), CycleRunFactory(started_at=old)
    recent = CycleRunFactory(started_at=NOW - timedelta(days=1))
    PreemptionEventFactory(victim_job=JobFactory(queue=nlp_queue), occurred_at=old, cycle=linked)

    report = retention_run(now=NOW, sample_days=0, preemption_event_days=0, cycle_run_days=7)

    assert set(CycleRun.objects.values_list("pk", flat=True)) == {linked.pk, recent.pk}
    assert report.cycle_runs_deleted == 1
    assert not CycleRun.objects.filter(pk=unlinked.pk).exists()
    assert PreemptionEvent.objects.get().cycle_id == linked.pk


def test_zero_keeps_everything_and_a_negative_age_is_refused(frozen, nlp_queue):
    samples_every([nlp_queue], days=3, minutes=120)
    CycleRunFactory(started_at=NOW - timedelta(days=300))
    count = QueueUsageSample.objects.count()
    report = retention_run(now=NOW, sample_days=0, preemption_event_days=0, cycle_run_days=0)
    assert QueueUsageSample.objects.count() == count
    assert CycleRun.objects.count() == 1
    assert report.samples_deleted == 0
    with pytest.raises(ValueError, match="sample_days must be 0"):
        retention_run(now=NOW, sample_days=-1, preemption_event_days=0, cycle_run_days=0)


def test_beat_runs_the_retention_task_with_the_configured_ages(settings, frozen, nlp_queue):
    from portal.ops.tasks import retention_run as retention_task

    assert settings.CELERY_BEAT_SCHEDULE["retention"]["task"] == retention_task.name
    settings.USAGE_SAMPLE_RETENTION_DAYS = 1
    settings.CYCLE_RUN_RETENTION_DAYS = 1
    samples_every([nlp_queue], days=4, minutes=240)
    CycleRunFactory(started_at=NOW - timedelta(days=2))
    retention_task.delay()
    assert QueueUsageSample.objects.order_by("at").first().at >= datetime(2026, 11, 30, tzinfo=UTC)
    assert not CycleRun.objects.exists()


def test_a_run_stops_at_its_time_budget_and_the_next_one_carries_on(frozen, nlp_queue):
    samples_every([nlp_queue], days=6, minutes=120)
    first = retention_run(
        now=NOW, sample_days=1, preemption_event_days=0, cycle_run_days=0, max_seconds=0
    )
    assert first.samples_left
    assert first.days_rolled_up == []
    second = retention_run(now=NOW, sample_days=1, preemption_event_days=0, cycle_run_days=0)
    assert not second.samples_left
    assert second.days_rolled_up[0] == "2026-11-25"
    assert second.days_rolled_up[-1] == "2026-11-29"  # the day before yesterday


def test_tenant_samples_go_after_the_sample_age_but_each_tenants_newest_stays(frozen, nlp):
    from portal.tenants.models import TenantUsageSample
    from tests.factories import TenantFactory

    quiet = TenantFactory(name="quiet")
    for days in (5, 3, 1, 0):
        TenantUsageSample.objects.create(tenant=nlp, at=NOW - timedelta(days=days))
    TenantUsageSample.objects.create(tenant=quiet, at=NOW - timedelta(days=9))  # its newest

    report = retention_run(now=NOW, sample_days=2, preemption_event_days=0, cycle_run_days=0)

    left = sorted(TenantUsageSample.objects.values_list("tenant__name", "at"))
    assert left == [
        ("nlp", NOW - timedelta(days=1)),
        ("nlp", NOW),
        ("quiet", NOW - timedelta(days=9)),
    ]
    assert report.tenant_samples_deleted == 2
    retention_run(now=NOW, sample_days=0, preemption_event_days=0, cycle_run_days=0)
    assert TenantUsageSample.objects.count() == 3  # 0 keeps them all
