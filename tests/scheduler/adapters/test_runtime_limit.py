"""Run-time limits in the cycle: a started job that has run for its limit (its own, its
queue's or its tenant's, the tightest) fails saying so, and its pods go; the start is stored,
so a worker that restarts in between ends it all the same."""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from portal.cluster.models import Placement, SimulatedPod
from portal.jobs.models import Job
from portal.jobs.services import job_submit, jobs_runtime_limit_end
from portal.queues.services import queue_update
from portal.tenants.services import tenant_update
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import NodeFactory

pytestmark = pytest.mark.django_db
START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TASK = {"name": "worker", "replicas": 2, "image": "t:1", "gpus": 1, "cpu_millis": 1000}


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def _running_job(user, queue, **extra):
    """A job whose pods run for an hour, started by two cycles; returns it and a cycle(s)
    that runs a fresh worker's cycle (a new backend object, as after a restart) at s."""
    NodeFactory(name="gpu-worker-1")
    clock = Clock()
    job = job_submit(submitter=user, queue=queue, name="ddp", tasks=[TASK], **extra)

    def cycle(at_seconds):
        clock.now = START + timedelta(seconds=at_seconds)
        backend = SimulatedBackend(default_run_seconds=3600, now=clock)
        scheduling_cycle_run(backend=backend, now=clock)

    cycle(0)
    cycle(5)
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    return job, cycle


def test_a_job_is_ended_when_it_reaches_its_own_limit(researcher, nlp_queue):
    job, cycle = _running_job(researcher, nlp_queue, max_runtime_seconds=120)
    started = job.started_at
    cycle((started - START).total_seconds() + 119)
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    cycle((started - START).total_seconds() + 120)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    assert "reached its run-time limit of 120 s" in job.pending_reason
    assert f"started {started:%H:%M:%S} UTC" in job.pending_reason
    assert not Placement.objects.filter(
        job=job, state__in=[Placement.State.BOUND, Placement.State.RUNNING]
    ).exists()
    cycle((started - START).total_seconds() + 160)  # past the deletion's grace period
    assert not SimulatedPod.objects.exclude(phase__in=["Succeeded", "Failed"]).exists()


@pytest.mark.parametrize("owner", ["queue", "tenant"])
def test_the_queue_or_tenant_limit_applies_to_a_job_without_its_own(researcher, nlp_queue, owner):
    if owner == "queue":
        nlp_queue = queue_update(queue=nlp_queue, actor=None, max_runtime_seconds=60)
    else:
        tenant_update(tenant=nlp_queue.tenant, actor=None, max_runtime_seconds=60)
    job, _ = _running_job(researcher, nlp_queue)
    ended = jobs_runtime_limit_end(now=job.started_at + timedelta(seconds=60))
    assert ended == [job.id]
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED


def test_no_limit_no_end(researcher, nlp_queue):
    job, _ = _running_job(researcher, nlp_queue)
    assert jobs_runtime_limit_end(now=job.started_at + timedelta(days=400)) == []


def test_the_job_page_says_why_it_ended(researcher, nlp_queue, client):
    job, cycle = _running_job(researcher, nlp_queue, max_runtime_seconds=120)
    cycle((job.started_at - START).total_seconds() + 120)
    client.force_login(researcher)
    page = client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert "Why it failed" in page
    assert "reached its run-time limit of 120 s" in page
