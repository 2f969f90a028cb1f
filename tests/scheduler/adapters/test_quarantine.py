"""Failure isolation: a job whose data makes a phase of the cycle fail is quarantined, and the
other tenants' jobs are placed in the same cycle.

Each phase test makes one job's data break that phase (a per-job function patched to raise for
that job id), then runs one cycle and checks: the bad job is `quarantined` with a reason naming
the phase and the error, it holds no pods, and a job of another tenant was placed and got its
pod in that very cycle. Before this, such a job stopped scheduling for everyone: ten cycles in
a row failed on one pod name, and a job of 2**62 GPUs broke every usage sample.
"""

from datetime import UTC, datetime, timedelta
from math import ceil, log2

import pytest
from django.db import OperationalError

from portal.cluster.models import Placement, SimulatedPod
from portal.jobs.models import Job
from portal.jobs.services import job_quarantine_release
from portal.scheduling.models import CycleRun
from scheduler.adapters import desired, persist, snapshot
from scheduler.adapters import orchestrator as cycle_module
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.orchestrator import scheduling_cycle_run
from scheduler.adapters.quarantine import find_culprits
from tests.factories import JobFactory, JobTaskFactory, NodeFactory, PlacementFactory
from tests.scheduler.adapters.conftest import CycleClock

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def clock():
    return CycleClock(T0)


@pytest.fixture
def run(clock):
    backend = SimulatedBackend(default_run_seconds=600, now=clock)

    def one_cycle() -> CycleRun:
        result = scheduling_cycle_run(backend=backend, now=clock)
        clock.now += timedelta(seconds=5)
        return result

    return one_cycle


@pytest.fixture
def jobs(nlp_queue, vision_queue):
    """A bad job of tenant nlp, submitted first (it would be placed first), and a good one of
    tenant vision, on a cluster where both fit."""
    NodeFactory(name="gpu-1", gpu_count=8)
    bad = JobFactory(queue=nlp_queue, name="bad", submitted_at=T0 - timedelta(minutes=2))
    JobTaskFactory(job=bad, name="worker", gpus=1)
    good = JobFactory(queue=vision_queue, name="good", submitted_at=T0 - timedelta(minutes=1))
    JobTaskFactory(job=good, name="worker", gpus=1)
    return bad, good


def raising_for(job_id: int, original, *, job_of):
    def patched(*args, **kwargs):
        if job_of(*args, **kwargs) == job_id:
            raise ValueError(f"broken data in job {job_id}")
        return original(*args, **kwargs)

    return patched


def core_fails_for(job_id: int, monkeypatch) -> None:
    """The pure core raises whenever job `job_id` is in its snapshot (as a bug its data
    triggers would, in whatever action or plugin)."""
    real = cycle_module.run_cycle_paused

    def run_cycle(snapshot, conf):
        if any(job.name == str(job_id) for job in snapshot.jobs):
            raise ValueError(f"broken data in job {job_id}")
        return real(snapshot, conf)

    monkeypatch.setattr(cycle_module, "run_cycle_paused", run_cycle)


def assert_quarantined_and_others_placed(bad, good, cycle_run, phase, error="ValueError"):
    bad.refresh_from_db()
    assert bad.status == Job.Status.QUARANTINED
    assert f"the scheduler's {phase} step failed on this job ({error}" in bad.pending_reason
    assert not Placement.objects.filter(
        job=bad, state__in=[Placement.State.BOUND, Placement.State.RUNNING]
    ).exists()
    good.refresh_from_db()
    assert good.status == Job.Status.ADMITTED
    assert Placement.objects.filter(job=good, state=Placement.State.BOUND).count() == 1
    assert SimulatedPod.objects.filter(name__in=good.placements.values("pod_name")).count() == 1
    assert f"job {bad.pk} quarantined ({phase}: {error}" in cycle_run.error


def test_a_job_that_breaks_the_snapshot(jobs, run, monkeypatch):
    bad, good = jobs
    monkeypatch.setattr(
        snapshot,
        "job_info",
        raising_for(bad.pk, snapshot.job_info, job_of=lambda job, *rest: job.id),
    )
    cycle_run = run()
    assert_quarantined_and_others_placed(bad, good, cycle_run, "snapshot")


def test_a_job_that_breaks_the_core(jobs, run, monkeypatch):
    bad, good = jobs
    core_fails_for(bad.pk, monkeypatch)
    cycle_run = run()
    assert_quarantined_and_others_placed(bad, good, cycle_run, "core")


def test_two_jobs_making_one_pod_name_no_longer_stop_every_bind(jobs, run, monkeypatch):
    """Finding 1: the bad job's pod name was already taken (another job's), so the insert of
    its placement failed and, with it, every bind of every cycle."""
    bad, good = jobs
    PlacementFactory(pod_name="taken", state=Placement.State.SUCCEEDED)
    original = persist.placement_pod_name
    monkeypatch.setattr(
        persist,
        "placement_pod_name",
        lambda *, job, **kwargs: "taken" if job.id == bad.pk else original(job=job, **kwargs),
    )
    cycle_run = run()
    assert_quarantined_and_others_placed(bad, good, cycle_run, "persist", error="IntegrityError")


def test_a_job_that_breaks_the_usage_sample(jobs, run, monkeypatch):
    """The usage sample's columns overflowed on a job of 2**62 GPUs (a job that can now never
    run, left out of the pending figure); here an overflow is raised for a pending count of 8
    GPUs, which only the bad job's queue reaches: it waits for the GPU the good job, submitted
    first here, holds on the one node."""
    bad, good = jobs
    bad.tasks.update(gpus=8)
    Job.objects.filter(pk=good.pk).update(submitted_at=T0 - timedelta(minutes=3))
    original = persist.gpus_sample

    def column(value):
        if value == 8:  # the bad job's pending GPUs
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
        return original(value)

    monkeypatch.setattr(persist, "gpus_sample", column)
    cycle_run = run()
    bad.refresh_from_db()
    assert bad.status == Job.Status.QUARANTINED
    assert "the scheduler's persist step failed on this job (OverflowError" in bad.pending_reason
    good.refresh_from_db()
    assert good.status == Job.Status.ADMITTED
    assert cycle_run.binds == 1


def test_a_job_that_breaks_reconcile(jobs, run, monkeypatch):
    bad, good = jobs
    monkeypatch.setattr(
        desired,
        "_desired",
        raising_for(bad.pk, desired._desired, job_of=lambda row, *rest: row[3]),
    )
    cycle_run = run()
    bad.refresh_from_db()
    assert bad.status == Job.Status.QUARANTINED
    assert "the scheduler's reconcile step failed on this job (ValueError" in bad.pending_reason
    # Bound in this cycle's persist, released by the quarantine: its pod was never created.
    assert set(bad.placements.values_list("state", flat=True)) == {Placement.State.RELEASING}
    assert not SimulatedPod.objects.filter(name__in=bad.placements.values("pod_name")).exists()
    assert SimulatedPod.objects.filter(name__in=good.placements.values("pod_name")).count() == 1
    assert f"job {bad.pk} quarantined (reconcile: ValueError" in cycle_run.error


def test_a_quarantined_placed_job_keeps_its_gpus_off_limits_until_its_pods_are_gone(
    nlp_queue, vision_queue, run, monkeypatch
):
    node = NodeFactory(name="gpu-1", gpu_count=8)
    running = JobFactory(queue=nlp_queue, name="running", status=Job.Status.ADMITTED)
    task = JobTaskFactory(job=running, name="worker", gpus=8)
    # Bound, its pod not created yet: the observe step leaves it as it is.
    PlacementFactory(task=task, node=node, state=Placement.State.BOUND, pod_name="running-0")
    waiting = JobFactory(queue=vision_queue, name="waiting")
    JobTaskFactory(job=waiting, name="worker", gpus=8)
    monkeypatch.setattr(
        snapshot,
        "job_info",
        raising_for(running.pk, snapshot.job_info, job_of=lambda job, *rest: job.id),
    )

    run()

    running.refresh_from_db()
    assert running.status == Job.Status.QUARANTINED
    assert set(running.placements.values_list("state", flat=True)) == {Placement.State.RELEASING}
    assert not waiting.placements.exists()  # the 8 GPUs are still held by the releasing pod
    monkeypatch.undo()
    run()  # observes the releasing placement's pod gone
    assert set(running.placements.values_list("state", flat=True)) == {Placement.State.DELETED}
    assert waiting.placements.filter(state=Placement.State.BOUND).count() == 1


def test_the_next_cycles_run_clean_and_an_admin_release_schedules_the_job(
    jobs, run, monkeypatch, staff
):
    bad, good = jobs
    core_fails_for(bad.pk, monkeypatch)
    run()
    assert run().error == ""
    bad.refresh_from_db()
    assert bad.status == Job.Status.QUARANTINED

    monkeypatch.undo()  # the cause is fixed
    job_quarantine_release(job=bad, actor=staff)  # kicks a cycle (eager in tests)
    run()
    bad.refresh_from_db()
    assert bad.status == Job.Status.ADMITTED


def test_errors_that_are_no_job_s_fault_fail_the_cycle_as_before(jobs, run, monkeypatch):
    def locked(*args, **kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(cycle_module, "run_cycle_paused", locked)
    with pytest.raises(OperationalError):
        run()
    assert not Job.objects.filter(status=Job.Status.QUARANTINED).exists()


def test_a_failure_without_any_job_quarantines_nobody(jobs, run, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("a bug in the conf, not in a job")

    monkeypatch.setattr(cycle_module, "run_cycle_paused", broken)
    with pytest.raises(ValueError):
        run()
    assert not Job.objects.filter(status=Job.Status.QUARANTINED).exists()


# --- find_culprits: bisection over the job set ------------------------------------------------


class Batch:
    """A phase that fails when every job of any one `trigger` set is in the batch."""

    def __init__(self, *triggers: set[str]) -> None:
        self.triggers = triggers
        self.runs = 0

    def __call__(self, keys) -> Exception | None:
        self.runs += 1
        present = set(keys)
        for trigger in self.triggers:
            if trigger <= present:
                return ValueError(f"trigger {sorted(trigger)}")
        return None


KEYS = [str(n) for n in range(1000)]


def test_one_culprit_is_found_in_logarithmic_runs():
    batch = Batch({"617"})
    assert [key for key, _ in find_culprits(batch, KEYS)] == ["617"]
    assert batch.runs <= 2 + 2 * ceil(log2(len(KEYS))) + 1


def test_a_failure_that_needs_two_jobs_names_one_of_them():
    batch = Batch({"3", "900"})
    culprits = find_culprits(batch, KEYS)
    assert len(culprits) == 1
    assert culprits[0][0] in {"3", "900"}
    assert str(culprits[0][1]) == "trigger ['3', '900']"


def test_several_culprits_up_to_the_limit():
    batch = Batch({"1"}, {"2"}, {"3"}, {"4"})
    assert [key for key, _ in find_culprits(batch, KEYS, limit=3)] == ["1", "2", "3"]


def test_a_batch_that_fails_without_any_job_has_no_culprit():
    assert find_culprits(lambda keys: ValueError("always"), KEYS) == []


def test_a_batch_that_no_longer_fails_has_no_culprit():
    assert find_culprits(Batch(), KEYS) == []


def test_a_stored_job_above_the_limits_is_quarantined_before_it_costs_a_cycle(jobs, run):
    """200,000 replicas stored through the old form took a cycle from 0.013 s to 16.9 s."""
    bad, good = jobs
    bad.tasks.update(replicas=200_000)
    cycle_run = run()
    bad.refresh_from_db()
    assert bad.status == Job.Status.QUARANTINED
    assert (
        "the scheduler's snapshot step failed on this job (OverLimits: tasks[0].replicas: "
        "at most 1024 replicas per task (JOB_MAX_REPLICAS_PER_TASK); this asks for 200000; "
        "tasks: at most 2048 replicas per job (JOB_MAX_REPLICAS_PER_JOB); this asks for 200000)"
    ) in bad.pending_reason
    assert cycle_run.binds == 1
    assert good.placements.count() == 1


def test_a_placed_job_above_a_lowered_limit_keeps_running(jobs, run, settings):
    bad, good = jobs
    run()
    settings.JOB_MAX_GPUS_PER_POD = 0  # lowered by an operator after both were placed
    assert run().error == ""
    assert not Job.objects.filter(status=Job.Status.QUARANTINED).exists()
