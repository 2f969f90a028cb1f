"""Faults with real Celery workers on PostgreSQL and a private Redis: a worker killed with
SIGKILL inside a cycle, and Redis restarted under a running worker and beat.

Afterwards the placements must be right (one per replica, no node over its GPUs), the cluster
must have exactly one pod per placement, no job may be lost or doubled, and scheduling must
have resumed without anyone restarting anything.
"""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from portal.cluster.models import Placement, SimulatedPod
from portal.jobs.models import Job
from portal.scheduling.models import CycleRun
from portal.tenants.models import Membership
from scheduler.adapters.orchestrator import ABANDONED
from tests.factories import (
    MembershipFactory,
    NodeFactory,
    QueueFactory,
    TenantFactory,
    UserFactory,
    api_token_secret,
)
from tests.scheduler.conftest import (
    REAL_WORKERS,
    current_state_violations,
    placement_history_violations,
    submit_job,
    wait_for,
)

pytestmark = REAL_WORKERS
LOCK_TTL = 2
WAIT_SECONDS = 90
# (name, replicas, GPUs each): 16 GPUs in all, exactly the two nodes.
JOBS = (("gang", 2, 4), ("whole", 1, 4), ("small", 2, 2))


@pytest.fixture
def team():
    NodeFactory(name="gpu-worker-1")
    NodeFactory(name="gpu-worker-2")
    user = UserFactory(username="alice")
    tenant = TenantFactory(name="research")
    MembershipFactory(user=user, tenant=tenant, role=Membership.Role.RESEARCHER)
    return user, QueueFactory(tenant=tenant, name="train", weight=1)


def submit(user, queue, name, replicas, gpus) -> Job:
    return submit_job(user, queue, name, replicas=replicas, gpus=gpus, min_available=replicas)


def running_replicas() -> int:
    return Placement.objects.filter(state=Placement.State.RUNNING).count()


def assert_converged(jobs: dict[str, tuple[int, int]]):
    """Every job placed whole exactly once, its pods running, one pod per placement."""
    assert sorted(Job.objects.values_list("name", flat=True)) == sorted(jobs)
    for job in Job.objects.all():
        replicas = jobs[job.name][0]
        placements = Placement.objects.filter(job=job)
        assert placements.count() == replicas, job.name
        assert set(placements.values_list("state", flat=True)) == {Placement.State.RUNNING}
        assert job.status == Job.Status.RUNNING
    pods = sorted(SimulatedPod.objects.values_list("name", "node_name"))
    assert pods == sorted(Placement.objects.values_list("pod_name", "node_name"))
    assert current_state_violations() == []
    assert placement_history_violations() == []


@pytest.mark.parametrize(
    ("at", "committed_before_the_kill"),
    [
        # Killed inside the persist transaction, after its writes: all of them roll back.
        ("persist", False),
        # Killed after the first pod of the batch was created: placements committed, the
        # cluster half done.
        ("reconcile", True),
    ],
)
def test_a_worker_killed_mid_cycle_is_taken_over_by_another(
    team, workers, tmp_path, at, committed_before_the_kill
):
    user, queue = team
    marker = tmp_path / f"paused-in-{at}"
    doomed = workers.start(
        "doomed",
        beat=True,
        hooks={
            "lock_ttl": LOCK_TTL,
            "pause": {"at": at, "seconds": 600, "times": 1, "marker": str(marker)},
        },
    )
    jobs = {name: (replicas, gpus) for name, replicas, gpus in JOBS}
    for name, (replicas, gpus) in jobs.items():
        submit(user, queue, name, replicas, gpus)
    wait_for(
        marker.exists, f"the cycle to pause in {at}", timeout=WAIT_SECONDS, on_timeout=workers.logs
    )
    assert Placement.objects.exists() is committed_before_the_kill
    assert SimulatedPod.objects.count() == (1 if committed_before_the_kill else 0)

    doomed.kill()
    killed = CycleRun.objects.filter(finished_at__isnull=True).get()
    # The next worker waits for the dead one's lock to expire, then finishes its work.
    workers.start("successor", beat=True, hooks={"lock_ttl": LOCK_TTL})
    total = sum(replicas for replicas, _ in jobs.values())

    def recovered() -> bool:
        workers.check_alive()
        return running_replicas() == total

    wait_for(recovered, "the successor to converge", timeout=WAIT_SECONDS, on_timeout=workers.logs)
    assert_converged(jobs)
    killed.refresh_from_db()
    assert killed.error == ABANDONED
    after = CycleRun.objects.filter(id__gt=killed.id)
    assert after.exists()
    assert list(after.exclude(error="").values_list("error", flat=True)) == []


def test_scheduling_resumes_by_itself_after_redis_restarts(team, workers, private_redis):
    user, queue = team
    worker = workers.start("survivor", beat=True, hooks={"lock_ttl": LOCK_TTL})
    submit(user, queue, "before", 1, 8)

    def running(name: str):
        def check() -> bool:
            workers.check_alive()
            return Job.objects.filter(name=name, status=Job.Status.RUNNING).exists()

        return check

    wait_for(
        running("before"), "the first job to run", timeout=WAIT_SECONDS, on_timeout=workers.logs
    )

    private_redis.stop()
    # A submission during the outage still succeeds for the user: the job is committed and
    # the kick that cannot reach the broker is dropped (beat runs a cycle later anyway).
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_secret(user)}")
    response = client.post(
        "/api/v1/jobs/",
        {
            "queue": queue.name,
            "name": "during-outage",
            "tasks": [{"name": "worker", "replicas": 1, "image": "busybox", "gpus": 8}],
        },
        format="json",
    )
    assert response.status_code == HTTPStatus.CREATED, response.content
    assert Job.objects.get(name="during-outage").status == Job.Status.PENDING

    restarted_at = timezone.now()
    private_redis.start()  # same port, empty: no queued tasks, no lock key
    wait_for(
        running("during-outage"),
        "the job submitted during the outage to run",
        timeout=WAIT_SECONDS,
        on_timeout=workers.logs,
    )
    assert worker.alive()  # nobody restarted it
    assert CycleRun.objects.filter(started_at__gt=restarted_at, error="").exists()
    assert_converged({"before": (1, 8), "during-outage": (1, 8)})
