"""plan_ahead_run: the cycle's snapshot, run times from expected durations and the portal's own
history of finished jobs, estimates stored per pending job."""

from datetime import UTC, datetime, timedelta

import pytest

from portal.cluster.models import Placement
from portal.jobs.models import Job, StartEstimate
from scheduler.adapters.plan_ahead import job_runtimes, plan_ahead_run, stored_runtime_limits
from scheduler.adapters.snapshot import snapshot_build
from scheduler.core.plan import PlanLimits
from tests.factories import JobFactory, JobTaskFactory, NodeFactory, PlacementFactory

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
HOUR = 3600.0


def _running(queue, *, started, expected=None, gpus=8, node=None, submitter=None):
    extra = {"submitter": submitter} if submitter else {}
    job = JobFactory(
        queue=queue,
        status=Job.Status.RUNNING,
        started_at=started,
        expected_duration_seconds=expected,
        **extra,
    )
    task = JobTaskFactory(job=job, gpus=gpus)
    PlacementFactory(task=task, node=node or NodeFactory(), state=Placement.State.RUNNING)
    return job


def _pending(queue, *, expected=None, gpus=8, submitted=NOW - timedelta(minutes=5), **extra):
    job = JobFactory(
        queue=queue, expected_duration_seconds=expected, submitted_at=submitted, **extra
    )
    JobTaskFactory(job=job, gpus=gpus)
    return job


def _finished(queue, run_time: float, *, submitter=None, image="ghcr.io/example/trainer:latest"):
    extra = {"submitter": submitter} if submitter else {}
    start = NOW - timedelta(days=1)
    job = JobFactory(
        queue=queue,
        status=Job.Status.SUCCEEDED,
        started_at=start,
        finished_at=start + timedelta(seconds=run_time),
        **extra,
    )
    JobTaskFactory(job=job, image=image)
    return job


def test_a_queue_of_jobs_with_expected_durations_gets_starts_one_after_the_other(nlp_queue):
    node = NodeFactory()
    _running(nlp_queue, started=NOW - timedelta(hours=1), expected=2 * HOUR, node=node)
    first = _pending(nlp_queue, expected=int(HOUR), submitted=NOW - timedelta(minutes=9))
    second = _pending(nlp_queue, expected=int(HOUR), submitted=NOW - timedelta(minutes=5))

    plan_ahead_run(now=NOW)

    rows = {row.job_id: row for row in StartEstimate.objects.all()}
    assert set(rows) == {first.id, second.id}
    assert rows[first.id].outlook == StartEstimate.Outlook.STARTS
    assert rows[first.id].likely == NOW + timedelta(hours=1)
    assert rows[first.id].earliest == rows[first.id].latest == rows[first.id].likely
    assert rows[second.id].likely == NOW + timedelta(hours=2)
    assert {row.computed_at for row in rows.values()} == {NOW}
    assert rows[first.id].until == NOW + timedelta(days=7)


def test_a_job_after_one_nobody_can_estimate_gets_a_range_never_a_precise_time(nlp_queue):
    node = NodeFactory()
    _running(nlp_queue, started=NOW - timedelta(hours=1), node=node)  # no estimate, no history
    waiting = _pending(nlp_queue, expected=int(HOUR))

    plan_ahead_run(now=NOW)

    row = StartEstimate.objects.get(job=waiting)
    assert row.outlook == StartEstimate.Outlook.STARTS
    assert row.likely is None
    assert row.earliest is not None
    assert row.earliest < NOW + timedelta(hours=1)


def test_a_job_too_big_for_the_cluster_is_never(nlp_queue):
    NodeFactory()
    huge = _pending(nlp_queue, gpus=64)

    plan_ahead_run(now=NOW)

    assert StartEstimate.objects.get(job=huge).outlook == StartEstimate.Outlook.NEVER


def test_each_run_replaces_the_last_ones_estimates(nlp_queue):
    NodeFactory()
    waiting = _pending(nlp_queue, gpus=4, expected=60)
    plan_ahead_run(now=NOW)
    waiting.status = Job.Status.SUCCEEDED  # gone from the next snapshot
    waiting.save()
    other = _pending(nlp_queue, gpus=4, expected=60)

    plan_ahead_run(now=NOW + timedelta(minutes=1))

    assert list(StartEstimate.objects.values_list("job_id", flat=True)) == [other.id]


def test_run_times_come_from_the_expected_duration_before_the_history(nlp_queue, researcher):
    for _ in range(6):
        _finished(nlp_queue, 10 * HOUR, submitter=researcher)
    node = NodeFactory()
    told = _running(
        nlp_queue, started=NOW - timedelta(hours=1), expected=3 * HOUR, node=node, gpus=4
    )
    guessed = _running(
        nlp_queue, started=NOW - timedelta(hours=1), node=node, gpus=4, submitter=researcher
    )
    pending_told = _pending(nlp_queue, expected=1800, submitter=researcher)
    pending_guessed = _pending(nlp_queue, submitter=researcher)

    ends, durations = job_runtimes(snapshot_build(now=NOW))

    now = NOW.timestamp()
    assert ends[str(told.id)].likely == now + 2 * HOUR
    # The user's 10-hour jobs, given 1 hour run: 9 hours left.
    assert ends[str(guessed.id)].likely == now + 9 * HOUR
    assert durations[str(pending_told.id)].likely == 1800
    assert durations[str(pending_guessed.id)].likely == 10 * HOUR


def test_the_most_specific_history_key_with_enough_jobs_predicts(nlp_queue, researcher):
    for _ in range(6):
        _finished(nlp_queue, 2 * HOUR)  # other users of the queue
    for _ in range(6):
        _finished(nlp_queue, 5 * HOUR, submitter=researcher, image="ghcr.io/example/bert:1")
    NodeFactory()
    mine = _pending(nlp_queue, submitter=researcher)
    JobTaskFactory(job=mine, image="ghcr.io/example/bert:1", gpus=0)
    mine.tasks.exclude(image="ghcr.io/example/bert:1").delete()
    theirs = _pending(nlp_queue)

    _, durations = job_runtimes(snapshot_build(now=NOW))

    assert durations[str(mine.id)].likely == 5 * HOUR
    # Anyone else's: the queue's twelve jobs, the researcher's included (their median).
    assert durations[str(theirs.id)].likely == 2 * HOUR


def test_a_job_without_any_estimate_has_no_likely_run_time(nlp_queue):
    NodeFactory()
    unknown = _pending(nlp_queue)

    _, durations = job_runtimes(snapshot_build(now=NOW))

    assert durations[str(unknown.id)].likely is None


def test_a_run_time_limit_bounds_every_prediction(nlp_queue):
    node = NodeFactory()
    running = _running(nlp_queue, started=NOW - timedelta(hours=1), expected=5 * HOUR, node=node)
    pending = _pending(nlp_queue, expected=int(5 * HOUR))
    unknown = _pending(nlp_queue)

    ends, durations = job_runtimes(snapshot_build(now=NOW), runtime_limit=lambda job: 2 * HOUR)

    assert ends[str(running.id)].high == NOW.timestamp() + HOUR
    assert durations[str(pending.id)].likely == 2 * HOUR
    assert durations[str(unknown.id)].high == 2 * HOUR


def test_the_stored_limits_bound_the_plan_as_the_cycle_ends_jobs(nlp_queue):
    """The plan's default: the tightest of the job's, its queue's and its tenant's limits."""
    node = NodeFactory()
    nlp_queue.max_runtime_seconds = int(3 * HOUR)
    nlp_queue.save(update_fields=["max_runtime_seconds"])
    running = _running(nlp_queue, started=NOW - timedelta(hours=1), expected=5 * HOUR, node=node)
    own = _pending(nlp_queue, expected=int(5 * HOUR), max_runtime_seconds=int(HOUR))
    queue_only = _pending(nlp_queue, expected=int(5 * HOUR))
    bundle = snapshot_build(now=NOW)

    limit = stored_runtime_limits([int(job.name) for job in bundle.snapshot.jobs])
    ends, durations = job_runtimes(bundle, runtime_limit=limit)

    assert ends[str(running.id)].high == NOW.timestamp() + 2 * HOUR
    assert durations[str(own.id)].likely == HOUR
    assert durations[str(queue_only.id)].likely == 3 * HOUR


def test_the_cost_bound_is_passed_on(nlp_queue):
    NodeFactory()
    _pending(nlp_queue, gpus=4, expected=60)

    plan = plan_ahead_run(now=NOW, limits=PlanLimits(horizon=HOUR, max_instants=2))

    assert plan.instants <= 1 + 3 * 2
    assert StartEstimate.objects.get().until <= NOW + timedelta(hours=1)
