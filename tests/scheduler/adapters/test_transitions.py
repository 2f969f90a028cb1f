"""The cycle changes job statuses through the job lifecycle: a change it refuses is logged,
skipped and counted (on the CycleRun), never raised; stamps kept in bulk UPDATEs stay kept."""

import logging
from datetime import UTC, datetime

import pytest

from jobspec.labels import pod_name
from portal.cluster.models import Placement, SimulatedPod
from portal.jobs.lifecycle import Event, transition
from portal.jobs.models import Job
from portal.scheduling.models import PreemptionEvent
from scheduler.adapters.bulk import ids_update
from scheduler.adapters.cluster.base import ObservedPod
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.observe import cluster_observe
from scheduler.adapters.orchestrator import scheduling_cycle_run
from scheduler.adapters.persist import decisions_persist
from scheduler.adapters.snapshot import snapshot_build
from scheduler.adapters.transitions import SKIPPED_NOTE, CycleTransitions, stamp_columns
from scheduler.core.types import CycleResult, Evict
from tests.factories import (
    CycleRunFactory,
    JobFactory,
    JobTaskFactory,
    NodeFactory,
    PlacementFactory,
)

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
EARLIER = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)


def test_a_refused_change_is_logged_counted_once_and_noted(caplog):
    transitions = CycleTransitions()
    with caplog.at_level(logging.WARNING, logger="scheduler.adapters.transitions"):
        assert transitions.step(7, "succeeded", Event.PREEMPT) is None
        assert transitions.step(7, "succeeded", Event.PREEMPT) is None  # a persist retried
    assert transitions.step(8, "running", Event.PREEMPT) is not None
    assert "job 7: a succeeded job cannot be preempted" in caplog.text
    assert transitions.notes() == [
        SKIPPED_NOTE.format(count=1, which="job 7: a succeeded job cannot be preempted")
    ]


def test_the_note_names_the_first_few_and_counts_the_rest():
    transitions = CycleTransitions()
    for job_id in range(1, 9):
        transitions.step(job_id, "cancelled", Event.START)
    (note,) = transitions.notes()
    assert note.startswith("8 job status change(s) refused")
    assert "job 5: a cancelled job cannot start; 3 more" in note
    assert "job 6:" not in note
    assert CycleTransitions().notes() == []


@pytest.mark.django_db
def test_kept_stamps_stay_in_a_bulk_update(nlp_queue):
    ran = JobFactory(queue=nlp_queue, status=Job.Status.RUNNING, started_at=EARLIER)
    unseen = JobFactory(queue=nlp_queue, status=Job.Status.ADMITTED)
    change = transition("running", Event.SUCCEED)

    ids_update(Job, [ran.pk, unseen.pk], status=change.status, **stamp_columns(change, AT))

    rows = Job.objects.filter(pk__in=[ran.pk, unseen.pk]).order_by("pk")
    assert [(j.status, j.started_at, j.finished_at) for j in rows] == [
        ("succeeded", EARLIER, AT),
        ("succeeded", AT, AT),
    ]


def _quarantined_with_a_failed_pod(nlp_queue):
    """A quarantined job still holding a running placement whose pod failed: observe would
    fail the job, which the lifecycle refuses for a quarantined one."""
    job = JobFactory(queue=nlp_queue, status=Job.Status.QUARANTINED, pending_reason="why")
    failed = PlacementFactory(task__job=job, state=Placement.State.RUNNING, started_at=EARLIER)
    other = PlacementFactory(
        task=failed.task, replica=1, state=Placement.State.RUNNING, started_at=EARLIER
    )
    return job, failed, other


@pytest.mark.django_db
def test_observe_skips_and_counts_a_refused_change(nlp_queue):
    job, failed, other = _quarantined_with_a_failed_pod(nlp_queue)
    pods = [
        ObservedPod(failed.pod_name, "gpu-jobs", failed.node_name, "Failed", exit_code=1),
        ObservedPod(other.pod_name, "gpu-jobs", other.node_name, "Running"),
    ]
    transitions = CycleTransitions()

    cluster_observe(pods=pods, now=AT, transitions=transitions)

    job.refresh_from_db()
    assert (job.status, job.pending_reason, job.finished_at) == ("quarantined", "why", None)
    states = dict(Placement.objects.values_list("pod_name", "state"))
    # The pod's own outcome is recorded; its gang is not released for a change not made.
    assert states == {failed.pod_name: "failed", other.pod_name: "running"}
    assert list(transitions.refused) == [(job.pk, Event.FAIL)]


@pytest.mark.django_db
def test_persist_skips_and_counts_a_refused_preemption_and_still_releases_the_pod(nlp_queue):
    node = NodeFactory(name="gpu-1")
    job = JobFactory(queue=nlp_queue, name="odd", status=Job.Status.RUNNING, min_available=1)
    task = JobTaskFactory(job=job, name="worker", gpus=1)
    placement = PlacementFactory(task=task, node=node, state=Placement.State.RUNNING, gpus=1)
    bundle = snapshot_build(now=AT)
    bundle.index.jobs[str(job.id)].status = Job.Status.PENDING  # not placed, as far as it knows
    evict = Evict(
        task=pod_name(job.id, "worker", 0),
        job=str(job.id),
        node="gpu-1",
        preemptor_task=None,
        preemptor_job=None,
        action="preempt",
        reason="preempted",
    )
    result = CycleResult(
        binds=(), evictions=(evict,), pipelined=(), pending_reasons={}, queues={}, phases={}
    )
    transitions = CycleTransitions()

    decisions_persist(
        bundle=bundle, result=result, cycle=CycleRunFactory(), now=AT, transitions=transitions
    )

    job.refresh_from_db()
    assert (job.status, job.preemption_count) == ("running", 0)
    placement.refresh_from_db()
    assert placement.state == Placement.State.RELEASING
    assert PreemptionEvent.objects.filter(victim_job=job).count() == 1
    assert list(transitions.refused) == [(job.pk, Event.PREEMPT)]


@pytest.mark.django_db
def test_a_cycle_records_refused_changes_on_its_run(nlp_queue):
    job, failed, other = _quarantined_with_a_failed_pod(nlp_queue)
    for placement, phase in ((failed, "Failed"), (other, "Running")):
        SimulatedPod.objects.create(
            name=placement.pod_name, node_name=placement.node_name, phase=phase, exit_code=1
        )

    backend = SimulatedBackend(default_run_seconds=600, now=lambda: AT)

    cycle = scheduling_cycle_run(backend=backend, now=lambda: AT)

    assert cycle.error.startswith("1 job status change(s) refused by the job lifecycle")
    assert f"job {job.pk}: a quarantined job cannot " in cycle.error
    assert Job.objects.get(pk=job.pk).status == Job.Status.QUARANTINED


@pytest.mark.django_db
@pytest.mark.parametrize(("started", "expected"), [(None, AT), (EARLIER, EARLIER)])
def test_a_job_whose_pods_all_succeeded_unseen_running_succeeds_with_a_start(
    nlp_queue, started, expected
):
    job = JobFactory(
        queue=nlp_queue, status=Job.Status.ADMITTED, min_available=1, started_at=started
    )
    placement = PlacementFactory(task__job=job, state=Placement.State.BOUND, started_at=EARLIER)
    pod = ObservedPod(placement.pod_name, "gpu-jobs", placement.node_name, "Succeeded", exit_code=0)
    transitions = CycleTransitions()

    cluster_observe(pods=[pod], now=AT, transitions=transitions)

    job.refresh_from_db()
    assert (job.status, job.started_at, job.finished_at) == ("succeeded", expected, AT)
    assert transitions.refused == {}
