"""The whole cycle on the simulated cluster: observe, snapshot, core, persist, reconcile."""

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.test import override_settings

from portal.cluster.models import Placement, SimulatedPod
from portal.jobs.models import Job
from portal.jobs.services import job_cancel
from portal.scheduling.models import CycleRun, PreemptionEvent, QueueUsageSample
from portal.tenants.models import Membership
from scheduler.adapters import orchestrator as cycle_module
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.orchestrator import scheduling_cycle_run
from scheduler.adapters.snapshot import snapshot_build
from tests.factories import MembershipFactory, NodeFactory, UserFactory
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
GiB = 1024**3


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def backend(clock):
    return SimulatedBackend(default_run_seconds=600, now=clock)


@pytest.fixture
def team(nlp, vision):
    user = UserFactory(username="alice")
    MembershipFactory(user=user, tenant=nlp, role=Membership.Role.RESEARCHER)
    MembershipFactory(user=user, tenant=vision, role=Membership.Role.RESEARCHER)
    return user


def cycle(backend, clock, seconds=5):
    run = scheduling_cycle_run(backend=backend, now=clock)
    clock.advance(seconds)
    return run


submit = submit_job


def active_nodes(job):
    return sorted(
        Placement.objects.filter(job=job, state__in=Placement.ACTIVE_STATES).values_list(
            "node_name", flat=True
        )
    )


def test_seed_scenario_packs_six_one_gpu_replicas_on_one_node(team, nlp_queue, backend, clock):
    for i in range(1, 4):
        NodeFactory(name=f"gpu-worker-{i}", gpu_resource_name="mars-tech.com/gpu")
    job = submit(team, nlp_queue, "qwen8b", replicas=6, min_available=1)

    run = cycle(backend, clock)

    assert run.binds == 6
    assert run.error == ""
    assert len(set(active_nodes(job))) == 1
    pods = SimulatedPod.objects.all()
    assert pods.count() == 6
    assert {tuple(p.requests.items()) for p in pods} == {
        (("cpu", 1000), ("memory", 4 * GiB), ("mars-tech.com/gpu", 1))
    }
    job.refresh_from_db()
    assert job.status == Job.Status.ADMITTED


def test_job_runs_then_succeeds_after_its_expected_duration(team, nlp_queue, backend, clock):
    NodeFactory(name="gpu-worker-1")
    job = submit(team, nlp_queue, "short", replicas=2, duration=60)

    cycle(backend, clock)  # bind + create pods
    cycle(backend, clock)  # the simulated kubelet starts them
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    assert job.started_at is not None

    clock.advance(60)
    cycle(backend, clock)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    assert set(Placement.objects.filter(job=job).values_list("state", flat=True)) == {
        Placement.State.SUCCEEDED
    }
    cycle(backend, clock)
    # Finished pods stay for their logs (FINISHED_POD_RETENTION_SECONDS), then go.
    assert SimulatedPod.objects.count() == 2
    clock.advance(settings.FINISHED_POD_RETENTION_SECONDS)
    cycle(backend, clock)
    assert not SimulatedPod.objects.exists()


@override_settings(FINISHED_POD_RETENTION_SECONDS=0)
def test_without_retention_finished_pods_go_once_recorded(team, nlp_queue, backend, clock):
    NodeFactory(name="gpu-worker-1")
    job = submit(team, nlp_queue, "short", replicas=1, duration=60)
    cycle(backend, clock)
    cycle(backend, clock)
    clock.advance(60)
    cycle(backend, clock)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    cycle(backend, clock)
    assert not SimulatedPod.objects.exists()


def test_gang_that_cannot_fit_stays_pending_with_a_reason(team, nlp_queue, backend, clock):
    NodeFactory(name="gpu-worker-1")
    NodeFactory(name="gpu-worker-2")
    job = submit(team, nlp_queue, "big", replicas=3, gpus=8)

    cycle(backend, clock)

    job.refresh_from_db()
    assert job.status == Job.Status.PENDING
    assert job.pending_reason
    assert job.pending_reason != "waiting for the next scheduling cycle"
    assert not Placement.objects.exists()


def test_reclaim_evicts_the_borrower_records_events_and_starts_the_new_job(
    team, nlp_queue, vision_queue, backend, clock
):
    NodeFactory(name="gpu-worker-1")
    NodeFactory(name="gpu-worker-2")
    nlp_queue.weight = 1
    nlp_queue.save()
    hogs = [submit(team, nlp_queue, f"hog-{i}", gpus=8) for i in range(2)]
    cycle(backend, clock)
    cycle(backend, clock)
    assert all(Job.objects.get(pk=h.pk).status == Job.Status.RUNNING for h in hogs)

    newcomer = submit(team, vision_queue, "newcomer", gpus=8)
    cycle(backend, clock)

    events = list(PreemptionEvent.objects.all())
    assert len(events) == 1
    event = events[0]
    assert event.action == "reclaim"
    assert event.victim_queue == nlp_queue
    assert event.preemptor_job == newcomer
    assert event.preemptor_queue == vision_queue
    assert event.gpus_freed == 8
    assert event.sentence
    victim = Job.objects.get(pk=event.victim_job_id)
    assert victim.status == Job.Status.PREEMPTED
    assert victim.preemption_count == 1

    clock.advance(60)  # past the eviction grace period: the victim's pod is gone
    for _ in range(3):
        cycle(backend, clock)
    newcomer.refresh_from_db()
    victim.refresh_from_db()
    assert newcomer.status == Job.Status.RUNNING
    assert victim.status == Job.Status.PENDING
    assert PreemptionEvent.objects.count() == 1  # no second round of evictions


def test_cancelled_job_releases_its_gpus_in_the_next_cycle(team, nlp_queue, backend, clock):
    NodeFactory(name="gpu-worker-1")
    first = submit(team, nlp_queue, "first", gpus=8)
    cycle(backend, clock)
    second = submit(team, nlp_queue, "second", gpus=8)
    cycle(backend, clock)
    assert Job.objects.get(pk=second.pk).status == Job.Status.PENDING

    job_cancel(job=first, actor=team)
    cycle(backend, clock)
    assert set(Placement.objects.filter(job=first).values_list("state", flat=True)) == {
        Placement.State.RELEASING
    }
    clock.advance(60)
    cycle(backend, clock)
    cycle(backend, clock)
    second.refresh_from_db()
    assert second.status in (Job.Status.ADMITTED, Job.Status.RUNNING)


def test_repeated_cycles_never_duplicate_a_replica(team, nlp_queue, backend, clock):
    NodeFactory(name="gpu-worker-1")
    submit(team, nlp_queue, "steady", replicas=4, min_available=4, duration=10_000)
    for _ in range(5):
        cycle(backend, clock)
    assert Placement.objects.count() == 4
    assert SimulatedPod.objects.count() == 4


def test_a_cycle_that_dies_before_reconcile_converges_on_the_next(
    team, nlp_queue, backend, clock, monkeypatch
):
    NodeFactory(name="gpu-worker-1")
    job = submit(team, nlp_queue, "survivor", replicas=2)

    def crash(**kwargs):
        raise RuntimeError("worker killed")

    monkeypatch.setattr(cycle_module, "cluster_reconcile", crash)
    with pytest.raises(RuntimeError):
        scheduling_cycle_run(backend=backend, now=clock)
    assert "worker killed" in CycleRun.objects.get().error
    assert Placement.objects.filter(job=job).count() == 2
    assert not SimulatedPod.objects.exists()

    monkeypatch.undo()
    cycle(backend, clock)
    cycle(backend, clock)
    assert SimulatedPod.objects.count() == 2
    assert Placement.objects.filter(job=job).count() == 2
    assert Job.objects.get(pk=job.pk).status == Job.Status.RUNNING


def test_usage_is_sampled_at_most_once_a_minute(team, nlp_queue, vision_queue, backend, clock):
    NodeFactory(name="gpu-worker-1")
    submit(team, nlp_queue, "user", gpus=2)
    cycle(backend, clock, seconds=5)
    cycle(backend, clock, seconds=5)
    assert QueueUsageSample.objects.count() == 2  # one per queue
    sample = QueueUsageSample.objects.get(queue=nlp_queue)
    assert sample.gpus_allocated == 2
    clock.advance(60)
    cycle(backend, clock)
    assert QueueUsageSample.objects.count() == 4


def test_snapshot_query_count_does_not_grow_with_jobs(
    team, nlp_queue, clock, django_assert_max_num_queries
):
    NodeFactory(name="gpu-worker-1")
    for i in range(3):
        submit(team, nlp_queue, f"few-{i}", replicas=2)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as few:
        snapshot_build(now=clock())
    for i in range(30):
        submit(team, nlp_queue, f"many-{i}", replicas=2)
    with django_assert_max_num_queries(len(few.captured_queries)):
        bundle = snapshot_build(now=clock())
    assert len(bundle.snapshot.jobs) == 33


def test_usage_samples_keep_hour_and_day_rollups_current(
    team, nlp_queue, vision_queue, backend, clock
):
    from django.db.models import Avg, Count, Max

    from portal.scheduling.models import QueueUsageRollup

    NodeFactory(name="gpu-worker-1")
    submit(team, nlp_queue, "user", gpus=2)
    for _ in range(4):
        cycle(backend, clock, seconds=61)
    assert QueueUsageSample.objects.count() == 8
    for resolution in ("hour", "day"):
        for queue in (nlp_queue, vision_queue):
            direct = QueueUsageSample.objects.filter(queue=queue).aggregate(
                avg=Avg("gpus_allocated"), top=Max("gpus_allocated"), n=Count("id")
            )
            rollup = QueueUsageRollup.objects.get(queue=queue, resolution=resolution)
            assert rollup.gpus_allocated_avg == pytest.approx(direct["avg"])
            assert (rollup.gpus_allocated_max, rollup.samples) == (direct["top"], 4)
    assert QueueUsageRollup.objects.get(queue=nlp_queue, resolution="hour").gpus_allocated_max == 2


@pytest.fixture
def two_nodes():
    return [NodeFactory(name=f"gpu-worker-{i}") for i in (1, 2)]


def test_every_simulated_node_is_seen_by_the_cycle(two_nodes, backend, clock):
    from portal.cluster.models import Node

    first = clock.now
    cycle(backend, clock)
    assert set(Node.objects.values_list("last_seen_at", flat=True)) == {first}
    cycle(backend, clock)  # 5 s later: not rewritten
    assert set(Node.objects.values_list("last_seen_at", flat=True)) == {first}
    clock.advance(60)
    cycle(backend, clock)
    assert set(Node.objects.values_list("last_seen_at", flat=True)) == {
        first + timedelta(seconds=70)
    }


def test_a_real_cluster_marks_only_the_nodes_it_listed(two_nodes, clock):
    from portal.cluster.models import Node
    from scheduler.adapters.cluster.base import ObservedNode
    from tests.scheduler.adapters.test_reconcile import RecordingBackend

    class OneNodeCluster(RecordingBackend):
        def list_nodes(self):
            return [ObservedNode(name="gpu-worker-1", allocatable={"nvidia.com/gpu": 8})]

    scheduling_cycle_run(backend=OneNodeCluster(), now=clock)
    seen = dict(Node.objects.values_list("name", "last_seen_at"))
    assert seen["gpu-worker-1"] == clock.now
    assert seen["gpu-worker-2"] is None
