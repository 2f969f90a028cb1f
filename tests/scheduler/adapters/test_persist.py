"""decisions_persist writes each decision's rows, in a number of queries that does not grow
with the number of binds, evictions or pending reasons."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobspec.labels import pod_name
from portal.cluster.models import Placement
from portal.jobs.models import Job
from portal.queues.models import QueueOrder
from portal.scheduling.models import PreemptionEvent, QueueUsageSample
from scheduler.adapters.persist import GANG_BROKEN, decisions_persist
from scheduler.adapters.snapshot import snapshot_build
from scheduler.core.cycle import run_cycle
from scheduler.core.types import Bind, CycleResult, Evict
from tests.factories import (
    CycleRunFactory,
    JobFactory,
    JobTaskFactory,
    NodeFactory,
    PlacementFactory,
    QueueFactory,
    largest_gpu_count,
)

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def decide_and_persist(now):
    bundle = snapshot_build(now=now)
    result = run_cycle(bundle.snapshot, bundle.conf)
    with CaptureQueriesContext(connection) as queries:
        decisions_persist(bundle=bundle, result=result, cycle=CycleRunFactory(), now=now)
    return result, queries


def pending_jobs(queue, count, *, gpus):
    jobs = [JobFactory(queue=queue, name=f"{queue.name}-{i}") for i in range(count)]
    for job in jobs:
        JobTaskFactory(job=job, name="worker", gpus=gpus)
    return jobs


def bind_some_and_explain_the_rest(jobs, binds, now):
    """Persist binds for the first `binds` jobs and a reason of its own for every other."""
    bundle = snapshot_build(now=now)
    result = CycleResult(
        binds=tuple(
            Bind(task=pod_name(job.id, "worker", 0), job=str(job.id), node="gpu-1")
            for job in jobs[:binds]
        ),
        evictions=(),
        pipelined=(),
        pending_reasons={str(job.id): f"needs 4 GPUs, {job.id} waits" for job in jobs[binds:]},
        queues={},
        phases={},
    )
    with CaptureQueriesContext(connection) as queries:
        decisions_persist(bundle=bundle, result=result, cycle=CycleRunFactory(), now=now)
    return queries


def test_query_count_does_not_grow_with_binds_and_pending_reasons(nlp_queue):
    NodeFactory(name="gpu-1")
    few = bind_some_and_explain_the_rest(pending_jobs(nlp_queue, 3, gpus=1), 1, NOW)
    big = QueueFactory(tenant=nlp_queue.tenant, name="big")

    many = bind_some_and_explain_the_rest(pending_jobs(big, 40, gpus=1), 10, NOW)

    assert len(many) == len(few)
    assert Placement.objects.filter(state=Placement.State.BOUND).count() == 11
    assert Job.objects.filter(status=Job.Status.ADMITTED).count() == 11
    waiting = Job.objects.filter(status=Job.Status.PENDING, queue=big)
    assert len(waiting) == 30
    assert all(job.pending_reason == f"needs 4 GPUs, {job.id} waits" for job in waiting)


def test_binds_admit_jobs_and_name_a_re_placed_replica_after_its_attempts(nlp_queue):
    node = NodeFactory(name="gpu-1")
    job = JobFactory(queue=nlp_queue, name="again", pending_reason="waiting")
    task = JobTaskFactory(job=job, name="worker", replicas=2, gpus=1)
    # Replica 0 ran twice before (preempted both times); replica 1 never ran.
    for attempt in ("again-x-0", "again-y-0"):
        PlacementFactory(task=task, replica=0, node=node, pod_name=attempt, state="deleted")

    result, _ = decide_and_persist(NOW)

    assert len(result.binds) == 2
    names = dict(
        Placement.objects.filter(state=Placement.State.BOUND).values_list("replica", "pod_name")
    )
    assert names == {0: f"{job.object_name}-worker-0-a2", 1: f"{job.object_name}-worker-1"}
    job.refresh_from_db()
    assert (job.status, job.admitted_at, job.pending_reason, job.pending_reason_at) == (
        Job.Status.ADMITTED,
        NOW,
        "",
        NOW,
    )


def test_job_names_that_spell_each_others_pod_names_both_run(nlp_queue):
    """Pod names once began with the job's free-text name: job `p` with task `t-10-u` (id 9)
    and job `p-9-t` with task `u` (id 10) both made `p-9-t-10-u-0`, the unique constraint
    failed every cycle and nothing was scheduled for anyone. Names are id-based now."""
    NodeFactory(name="gpu-1")
    first = JobFactory(queue=nlp_queue, name="p")
    JobTaskFactory(job=first, name="t-10-u")
    second = JobFactory(queue=nlp_queue, name=f"p-{first.id}-t")
    JobTaskFactory(job=second, name="u")

    result, _ = decide_and_persist(NOW)

    assert {bind.job for bind in result.binds} == {str(first.id), str(second.id)}
    assert sorted(Placement.objects.values_list("pod_name", flat=True)) == sorted(
        [f"{first.object_name}-t-10-u-0", f"{second.object_name}-u-0"]
    )


def running(queue, name, *, replicas, min_available, preemption_count=0):
    node = NodeFactory(name=f"node-{name}")
    job = JobFactory(
        queue=queue,
        name=name,
        status=Job.Status.RUNNING,
        min_available=min_available,
        preemption_count=preemption_count,
    )
    task = JobTaskFactory(job=job, name="worker", replicas=replicas, gpus=2)
    for replica in range(replicas):
        PlacementFactory(
            task=task, replica=replica, node=node, state=Placement.State.RUNNING, gpus=2
        )
    return job


def evict(job, replica, reason, preemptor=None):
    return Evict(
        task=pod_name(job.id, "worker", replica),
        job=str(job.id),
        node=f"node-{job.name}",
        preemptor_task=None,
        preemptor_job=str(preemptor.id) if preemptor else None,
        action="reclaim",
        reason=reason,
    )


def test_evictions_release_placements_and_preempt_each_job_with_its_own_reason(
    nlp_queue, vision_queue
):
    solo = running(nlp_queue, "solo", replicas=1, min_available=1, preemption_count=2)
    gang = running(nlp_queue, "gang", replicas=2, min_available=2)
    spare = running(nlp_queue, "spare", replicas=2, min_available=1)
    newcomer = JobFactory(queue=vision_queue, name="newcomer")
    JobTaskFactory(job=newcomer, name="worker", gpus=2)
    bundle = snapshot_build(now=NOW)
    result = CycleResult(
        binds=(),
        evictions=(
            evict(solo, 0, "reclaimed by vision", newcomer),
            evict(gang, 0, "gang reclaimed", newcomer),
            evict(spare, 1, "one replica reclaimed", newcomer),
        ),
        pipelined=(),
        pending_reasons={},
        queues={},
        phases={},
    )

    decisions_persist(bundle=bundle, result=result, cycle=CycleRunFactory(), now=NOW)

    jobs = {j.name: j for j in Job.objects.filter(name__in=["solo", "gang", "spare"])}
    assert [
        (jobs[n].status, jobs[n].preemption_count, jobs[n].pending_reason)
        for n in ("solo", "gang", "spare")
    ] == [
        (Job.Status.PREEMPTED, 3, "reclaimed by vision"),
        (Job.Status.PREEMPTED, 1, "gang reclaimed"),
        (Job.Status.RUNNING, 0, ""),  # one replica left, min_available 1: keeps running
    ]
    assert {jobs["solo"].pending_reason_at, jobs["gang"].pending_reason_at} == {NOW}
    states = dict(
        Placement.objects.values_list("pod_name", "state").filter(job__name__in=["gang", "spare"])
    )
    assert sorted(states.values()) == ["releasing", "releasing", "releasing", "running"]
    sentences = sorted(
        PreemptionEvent.objects.filter(victim_job=gang).values_list("sentence", flat=True)
    )
    assert sentences == sorted(["gang reclaimed", GANG_BROKEN.format(job="gang", min_available=2)])
    event = PreemptionEvent.objects.get(victim_job=solo)
    assert (event.victim_queue, event.victim_tenant, event.preemptor_job, event.gpus_freed) == (
        nlp_queue,
        nlp_queue.tenant,
        newcomer,
        2,
    )
    assert event.preemptor_queue == vision_queue


def test_pending_reasons_are_rewritten_only_when_they_change(nlp_queue):
    NodeFactory(name="gpu-1", gpu_count=1)
    earlier = NOW - timedelta(minutes=5)
    jobs = pending_jobs(nlp_queue, 3, gpus=8)  # none fits a 1-GPU node
    first, _ = decide_and_persist(earlier)
    reasons = {job.id: first.pending_reasons[str(job.id)] for job in jobs}
    assert all(reasons.values())
    Job.objects.filter(id=jobs[0].id).update(pending_reason="stale")

    decide_and_persist(NOW)

    rows = {
        row[0]: row[1:]
        for row in Job.objects.values_list("id", "pending_reason", "pending_reason_at")
    }
    assert rows[jobs[0].id] == (reasons[jobs[0].id], NOW)
    assert rows[jobs[1].id] == (reasons[jobs[1].id], earlier)
    assert rows[jobs[2].id] == (reasons[jobs[2].id], earlier)


def test_usage_samples_saturate_instead_of_overflowing_on_huge_stored_jobs(nlp_queue, settings):
    """A job stored with 2 x 2**62 GPUs (before the limits existed) made every cycle fail with
    OverflowError at the usage sample, for every tenant, until it was cancelled. (The snapshot
    now leaves out a job above the limits; here the limit lets it through.)"""
    huge = largest_gpu_count()
    settings.JOB_MAX_GPUS_PER_POD = huge
    NodeFactory(name="gpu-1")
    JobTaskFactory(job=JobFactory(queue=nlp_queue, name="huge"), gpus=huge, replicas=2)

    result, _ = decide_and_persist(NOW)

    # No pod that large fits a node: the job can never run, so it is no pending demand.
    assert result.pending_kinds[str(Job.objects.get().id)] == "never"
    sample = QueueUsageSample.objects.get(queue=nlp_queue)
    assert sample.gpus_pending == 0
    assert sample.gpus_allocated == 0


def test_the_pending_figure_leaves_out_jobs_that_can_never_run(nlp_queue):
    NodeFactory(name="gpu-1")  # 8 GPUs
    JobTaskFactory(job=JobFactory(queue=nlp_queue, name="running"), gpus=8)
    JobTaskFactory(job=JobFactory(queue=nlp_queue, name="waits"), gpus=2, replicas=2)
    JobTaskFactory(job=JobFactory(queue=nlp_queue, name="too-big"), gpus=16)

    result, _ = decide_and_persist(NOW)

    kinds = {
        Job.objects.get(id=int(name)).name: kind for name, kind in result.pending_kinds.items()
    }
    assert kinds == {"waits": "waits", "too-big": "never"}
    assert QueueUsageSample.objects.get(queue=nlp_queue).gpus_pending == 4


def test_queue_lines_are_the_cores_and_written_only_when_they_change(nlp_queue):
    NodeFactory(name="gpu-1", gpu_count=1)
    pending_jobs(nlp_queue, 3, gpus=1)  # one binds, two wait
    result, _ = decide_and_persist(NOW)
    line = QueueOrder.unpack(QueueOrder.objects.get(queue=nlp_queue).job_ids).tolist()
    assert line == [int(key) for key in result.queue_orders[nlp_queue.name]]
    assert len(line) == 2
    _, queries = decide_and_persist(NOW + timedelta(seconds=5))
    written = [q["sql"] for q in queries.captured_queries if "INSERT" in q["sql"]]
    assert not any(QueueOrder._meta.db_table in sql for sql in written)
