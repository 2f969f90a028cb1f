"""Lifecycle policies on the simulated cluster: a failed pod restarts the job while retries are
left (each retry recorded), RestartPod places the one pod again while the others run on, a
policy's timeout delays its action (the failed pod's replica waits meanwhile), an evicted pod
follows PodEvicted, a completed task can complete the job, and without a policy a failed pod
still fails it."""

from datetime import UTC, datetime, timedelta

import pytest

from portal.cluster.models import Placement, SimulatedPod
from portal.jobs.models import Job
from portal.jobs.services import job_submit
from scheduler.adapters.cluster.base import ObservedPod
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.observe import cluster_observe
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import NodeFactory

pytestmark = pytest.mark.django_db


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def run(db):
    NodeFactory(name="gpu-worker-1")
    clock = Clock()
    backend = SimulatedBackend(default_run_seconds=600, now=clock)

    def cycles(count=1):
        for _ in range(count):
            scheduling_cycle_run(backend=backend, now=clock)
            clock.now += timedelta(seconds=5)

    cycles.clock = clock
    return cycles


def _submit(user, queue, **extra):
    task = {"name": "worker", "replicas": 2, "image": "trainer:1", "gpus": 1, "cpu_millis": 1000}
    return job_submit(submitter=user, queue=queue, name="ddp", tasks=[task], **extra)


def _fail_one_pod(exit_code=137):
    pod = SimulatedPod.objects.filter(phase__in=["Pending", "Running"]).order_by("name").first()
    pod.phase, pod.exit_code = "Failed", exit_code
    pod.save()
    return pod.name


def test_a_failed_pod_restarts_the_job_until_max_retry(run, researcher, nlp_queue):
    policies = [{"event": "PodFailed", "action": "RestartJob"}]
    job = _submit(researcher, nlp_queue, policies=policies, max_retry=1)
    run(2)
    assert Job.objects.get().status == Job.Status.RUNNING
    first = _fail_one_pod()
    run(1)
    job.refresh_from_db()
    assert job.status in (Job.Status.PREEMPTED, Job.Status.PENDING, Job.Status.ADMITTED)
    assert job.retry_count == 1
    assert [(r["pod"], r["event"], r["action"]) for r in job.retries] == [
        (first, "PodFailed", "RestartJob")
    ]
    assert "retry 1 of 1" in job.retries[0]["reason"]
    run(12)  # its pods go (their grace period), it waits, it is placed and runs again
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    running = set(Placement.objects.filter(job=job, state=Placement.State.RUNNING)
                  .values_list("pod_name", flat=True))  # fmt: skip
    assert len(running) == 2
    assert first not in running  # a new attempt, under a new name
    _fail_one_pod()
    run(1)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    assert "maxRetry" in job.pending_reason
    assert job.retry_count == 1


def test_without_a_policy_a_failed_pod_fails_the_job(run, researcher, nlp_queue):
    job = _submit(researcher, nlp_queue)
    run(2)
    _fail_one_pod(exit_code=1)
    run(1)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    assert "exit code 1" in job.pending_reason
    assert job.retries == []


def test_an_exit_code_policy_matches_only_that_code(run, researcher, nlp_queue):
    policies = [{"exitCode": 137, "action": "RestartJob"}]
    job = _submit(researcher, nlp_queue, policies=policies)
    run(2)
    _fail_one_pod(exit_code=1)
    run(1)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED  # 1 is not 137: no policy, the default


def test_a_completed_task_completes_the_job(run, researcher, nlp_queue):
    tasks = [
        {"name": "master", "replicas": 1, "image": "t:1", "gpus": 1, "cpu_millis": 1000,
         "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}]},
        {"name": "worker", "replicas": 1, "image": "t:1", "gpus": 1, "cpu_millis": 1000},
    ]  # fmt: skip
    job = job_submit(submitter=researcher, queue=nlp_queue, name="ps", tasks=tasks)
    run(2)
    master_pod = Placement.objects.get(job=job, task__name="master").pod_name
    master = SimulatedPod.objects.get(name=master_pod)
    master.phase, master.exit_code = "Succeeded", 0
    master.save()
    run(1)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    assert "task master completed" in job.pending_reason
    worker = Placement.objects.get(job=job, task__name="worker")
    assert worker.state in (Placement.State.RELEASING, Placement.State.DELETED)


def test_an_evicted_pod_follows_pod_evicted(run, researcher, nlp_queue):
    policies = [{"event": "PodEvicted", "action": "TerminateJob"}]
    job = _submit(researcher, nlp_queue, policies=policies)
    run(2)
    placement = Placement.objects.filter(job=job).order_by("id").first()
    pods = [
        ObservedPod(
            name=p.pod_name,
            namespace="gpu-jobs",
            node_name=p.node_name,
            phase="Failed" if p.pk == placement.pk else "Running",
            labels={},
            reason="Evicted" if p.pk == placement.pk else None,
        )
        for p in Placement.objects.filter(job=job)
    ]
    cluster_observe(pods=pods, now=datetime(2026, 12, 1, 13, 0, tzinfo=UTC))
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    assert "PodEvicted -> TerminateJob" in job.pending_reason
    assert job.retry_count == 0


def _pods(job, *states):
    return dict(
        Placement.objects.filter(job=job, state__in=states).values_list("pod_name", "replica")
    )


def test_restart_pod_places_the_failed_pod_again_while_the_others_run_on(
    run, researcher, nlp_queue
):
    """upstream state/running.go: RestartPod kills only that pod (KillTarget); the job stays
    running and the controller makes the pod anew."""
    job = _submit(researcher, nlp_queue, policies=[{"event": "PodFailed", "action": "RestartPod"}])
    run(2)
    failed = _fail_one_pod()
    (other,) = set(_pods(job, Placement.State.RUNNING)) - {failed}
    run(1)
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    assert job.retry_count == 1
    assert "RestartPod: the pod is placed again (retry 1 of 3)" in job.pending_reason
    assert [(r["pod"], r["action"]) for r in job.retries] == [(failed, "RestartPod")]
    run(3)
    running = _pods(job, Placement.State.RUNNING)
    assert other in running  # never stopped
    assert failed not in running
    assert len(running) == 2
    assert set(running.values()) == {0, 1}
    assert Job.objects.get().status == Job.Status.RUNNING


def test_restart_pod_with_its_retries_spent_fails_the_job(run, researcher, nlp_queue):
    policies = [{"event": "PodFailed", "action": "RestartPod"}]
    job = _submit(researcher, nlp_queue, policies=policies, max_retry=1)
    run(2)
    _fail_one_pod()
    run(3)
    _fail_one_pod()
    run(1)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    assert "PodFailed -> RestartPod, but the job has been restarted 1 times" in job.pending_reason


def test_a_delayed_restart_waits_for_its_time_the_failed_replica_held(run, researcher, nlp_queue):
    """job_controller.go:374-383: a policy with a timeout runs its action that much later;
    meanwhile the job goes on and the failed pod is not replaced."""
    policies = [{"event": "PodFailed", "action": "RestartJob", "timeout": "60s"}]
    job = _submit(researcher, nlp_queue, policies=policies)
    run(2)
    failed = _fail_one_pod()
    failed_at = run.clock.now
    run(1)
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    assert "policy PodFailed -> RestartJob in 60 s" in job.pending_reason
    assert [d["pod"] for d in job.policy_delays] == [failed]
    assert job.policy_due_at == failed_at + timedelta(seconds=60)
    run(10)  # 50 s: not yet; the failed replica is not placed again meanwhile
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    assert job.retry_count == 0
    assert len(_pods(job, Placement.State.RUNNING)) == 1
    assert Placement.objects.filter(job=job).count() == 2
    run(3)
    job.refresh_from_db()
    assert job.retry_count == 1
    assert [(r["pod"], r["event"], r["action"]) for r in job.retries] == [
        (failed, "PodFailed", "RestartJob")
    ]
    assert (job.policy_delays, job.policy_due_at) == ([], None)
    run(12)
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    assert len(_pods(job, Placement.State.RUNNING)) == 2


def test_a_delayed_restart_pod_places_the_pod_again_at_its_time(run, researcher, nlp_queue):
    policies = [{"event": "PodFailed", "action": "RestartPod", "timeout": "20s"}]
    job = _submit(researcher, nlp_queue, policies=policies)
    run(2)
    failed = _fail_one_pod()
    run(3)  # 15 s
    assert len(_pods(job, Placement.State.RUNNING)) == 1
    run(4)
    job.refresh_from_db()
    assert job.retry_count == 1
    assert job.status == Job.Status.RUNNING
    running = _pods(job, Placement.State.RUNNING)
    assert failed not in running
    assert len(running) == 2


def test_a_delay_is_dropped_when_the_job_ends_first(run, researcher, nlp_queue):
    from portal.jobs.services import job_cancel

    policies = [{"event": "PodFailed", "action": "RestartJob", "timeout": "60s"}]
    job = _submit(researcher, nlp_queue, policies=policies)
    run(2)
    _fail_one_pod()
    run(1)
    job_cancel(job=Job.objects.get(), actor=researcher)
    run(14)
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED
    assert (job.policy_delays, job.policy_due_at, job.retry_count) == ([], None, 0)


def test_a_delay_of_an_earlier_run_is_never_carried_out(researcher, nlp_queue):
    """Delays belong to the run (admission) they were raised in: after a restart or a
    preemption they are dropped, not carried out on the job's next run."""
    job = _submit(researcher, nlp_queue)
    admitted = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    stale = {"action": "AbortJob", "event": "PodFailed", "pod": "gp-x", "task": "", "what":
             "failed", "why": "exit code 1", "due": admitted.isoformat(), "run": "earlier"}  # fmt: skip
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.RUNNING, admitted_at=admitted, policy_delays=[stale],
        policy_due_at=admitted,
    )  # fmt: skip
    cluster_observe(pods=[], now=admitted + timedelta(minutes=1))
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    assert (job.policy_delays, job.policy_due_at) == ([], None)
