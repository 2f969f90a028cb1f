"""snapshot_build reads plain rows; the JobInfo/TaskInfo it builds carry the rows' values."""

from datetime import UTC, datetime, timedelta

import pytest

from jobspec.labels import object_prefix, pod_name
from portal.cluster.models import Placement
from portal.cluster.services import placement_pod_name
from portal.jobs.models import Job
from scheduler.adapters.snapshot import snapshot_build
from scheduler.core.types import TaskStatus
from tests.factories import JobFactory, JobTaskFactory, NodeFactory, PlacementFactory

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_tasks_carry_their_node_selector_requests_and_the_queue_tenant(nlp_queue):
    submitted = datetime(2026, 11, 30, 8, 15, 2, 250001, tzinfo=UTC)
    job = JobFactory(queue=nlp_queue, priority=10, min_available=2, submitted_at=submitted)
    picky = JobTaskFactory(
        job=job, name="master", node_selector={"zone": "b", "gpu-model": "H100"}, gpus=2
    )
    JobTaskFactory(job=job, name="worker", replicas=2, gpus=1, cpu_millis=500)

    bundle = snapshot_build(now=NOW)

    (info,) = bundle.snapshot.jobs
    assert (info.name, info.queue, info.namespace) == (str(job.id), "nlp-train", "nlp")
    assert (info.priority, info.min_available, info.created) == (10, 2, submitted.timestamp())
    by_name = {task.name: task for task in info.tasks}
    master = by_name[pod_name(job.id, "master", 0)]
    assert master.node_selector == (("gpu-model", "H100"), ("zone", "b"))
    assert master.requests.get("gpu") == 2
    workers = [by_name[pod_name(job.id, "worker", r)] for r in range(2)]
    assert [w.node_selector for w in workers] == [(), ()]
    assert [w.requests.get("cpu") for w in workers] == [500, 500]
    assert bundle.index.pending[master.name].task.id == picky.id
    assert bundle.index.pending_gpus["nlp-train"] == 4


def test_placed_replicas_point_at_their_placement_rows(nlp_queue):
    node = NodeFactory(name="gpu-1")
    running = JobFactory(queue=nlp_queue, status=Job.Status.RUNNING)
    task = JobTaskFactory(job=running, name="worker", replicas=2)
    placement = PlacementFactory(task=task, replica=0, node=node, state=Placement.State.RUNNING)
    finished = JobFactory(queue=nlp_queue, status=Job.Status.SUCCEEDED)
    JobTaskFactory(job=finished)

    bundle = snapshot_build(now=NOW)

    assert [info.name for info in bundle.snapshot.jobs] == [str(running.id)]
    tasks = {t.name: t for t in bundle.snapshot.jobs[0].tasks}
    placed = tasks[pod_name(running.id, "worker", 0)]
    assert (placed.status, placed.node) == (TaskStatus.RUNNING, "gpu-1")
    assert tasks[pod_name(running.id, "worker", 1)].status == TaskStatus.PENDING
    row = bundle.index.placements[placed.name]
    assert (row.id, row.job_id, row.state, row.gpus) == (
        placement.id,
        running.id,
        Placement.State.RUNNING,
        placement.gpus,
    )
    assert bundle.index.nodes["gpu-1"].id == node.id


def test_jobs_of_any_status_that_still_hold_gpus_are_in_the_snapshot(nlp_queue):
    node = NodeFactory(name="gpu-1")
    cancelled = JobFactory(queue=nlp_queue, status=Job.Status.CANCELLED)
    task = JobTaskFactory(job=cancelled, name="worker", replicas=2)
    PlacementFactory(task=task, replica=0, node=node, state=Placement.State.RELEASING)
    PlacementFactory(task=task, replica=1, node=node, state=Placement.State.DELETED)
    half_done = JobFactory(queue=nlp_queue, status=Job.Status.RUNNING)
    done_task = JobTaskFactory(job=half_done, name="worker", replicas=2)
    PlacementFactory(task=done_task, replica=0, node=node, state=Placement.State.SUCCEEDED)
    PlacementFactory(task=done_task, replica=1, node=node, state=Placement.State.RUNNING)
    gone = JobFactory(queue=nlp_queue, status=Job.Status.SUCCEEDED)
    gone_task = JobTaskFactory(job=gone, name="worker")
    PlacementFactory(task=gone_task, replica=0, node=node, state=Placement.State.SUCCEEDED)

    bundle = snapshot_build(now=NOW)

    statuses = {
        info.name: [(t.name, t.status) for t in info.tasks] for info in bundle.snapshot.jobs
    }
    assert statuses == {
        # Releasing pods still hold their GPUs; a cancelled job asks for nothing more.
        str(cancelled.id): [(pod_name(cancelled.id, "worker", 0), TaskStatus.RELEASING)],
        str(half_done.id): [
            (pod_name(half_done.id, "worker", 0), TaskStatus.SUCCEEDED),
            (pod_name(half_done.id, "worker", 1), TaskStatus.RUNNING),
        ],
    }
    assert bundle.index.pending == {}


def test_created_is_exactly_the_submission_timestamp(nlp_queue):
    """The core orders jobs by `created`: the database's epoch must equal Python's to the bit."""
    base = datetime(2031, 5, 17, 23, 59, 58, tzinfo=UTC)
    times = [base + timedelta(microseconds=us) for us in (0, 1, 7, 499_999, 999_999, 123_457)]
    jobs = [JobFactory(queue=nlp_queue, submitted_at=at) for at in times]
    for job in jobs:
        JobTaskFactory(job=job)

    bundle = snapshot_build(now=NOW)

    created = {info.name: info.created for info in bundle.snapshot.jobs}
    assert created == {str(job.id): at.timestamp() for job, at in zip(jobs, times)}


def test_a_placed_pod_carries_its_bind_and_its_queue_its_minimum_run_time(nlp_queue):
    """What the cdp plugin reads: stored, so a restarted worker protects the same pods."""
    nlp_queue.min_runtime_seconds = 600
    nlp_queue.save()
    node = NodeFactory(name="gpu-1")
    running = JobFactory(queue=nlp_queue, status=Job.Status.RUNNING)
    task = JobTaskFactory(job=running, name="worker", replicas=2)
    bound = NOW - timedelta(seconds=100)
    PlacementFactory(
        task=task, replica=0, node=node, state=Placement.State.RUNNING, started_at=bound
    )

    snapshot = snapshot_build(now=NOW).snapshot

    assert {q.name: q.min_runtime for q in snapshot.queues}["nlp-train"] == 600
    tasks = {t.name: t for t in snapshot.jobs[0].tasks}
    assert tasks[pod_name(running.id, "worker", 0)].started == bound.timestamp()
    assert tasks[pod_name(running.id, "worker", 1)].started is None


def test_the_cores_name_of_a_replica_is_the_name_its_pod_gets(nlp_queue):
    # The core's sentences (an eviction's "preempted by <pod> of ...") name the pod as the
    # user finds it on the cluster, whose name carries the portal instance.
    job = JobFactory(queue=nlp_queue, object_prefix=object_prefix("gpuportal"))
    task = JobTaskFactory(job=job, name="worker", replicas=2)

    bundle = snapshot_build(now=NOW)

    names = sorted(t.name for t in bundle.snapshot.jobs[0].tasks)
    assert names == [placement_pod_name(job=job, task=task, replica=r) for r in range(2)]
    assert names[0].startswith(f"{job.object_name}-worker-")
