"""ttlSecondsAfterFinished: a finished job's pods, and its svc plugin's objects, stay that many
seconds after the job ends (instead of FINISHED_POD_RETENTION_SECONDS from each pod's end),
then are deleted."""

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from portal.cluster.models import SimulatedPod
from portal.jobs.models import Job
from portal.jobs.services import job_submit
from portal.ops.retention import ttl_jobs_kept
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.desired import job_objects_kept
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import NodeFactory

pytestmark = pytest.mark.django_db
START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def _submit(user, queue, ttl, **extra):
    task = {"name": "worker", "replicas": 2, "image": "t:1", "gpus": 1, "cpu_millis": 1000}
    return job_submit(
        submitter=user, queue=queue, name="ddp", tasks=[task], ttl_seconds_after_finished=ttl,
        **extra,
    )  # fmt: skip


def _run_to_the_end(user, queue, ttl):
    """Submit, run the job's pods to success (60 s), and return the job and the clock."""
    NodeFactory(name="gpu-worker-1")
    clock = Clock()
    backend = SimulatedBackend(default_run_seconds=60, now=clock)
    job = _submit(user, queue, ttl)

    def cycle(at_seconds):
        clock.now = START + timedelta(seconds=at_seconds)
        scheduling_cycle_run(backend=backend, now=clock)

    for second in (0, 5, 70, 75):
        cycle(second)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    return job, cycle


@override_settings(FINISHED_POD_RETENTION_SECONDS=0)
def test_pods_stay_until_the_ttl_even_without_retention(researcher, nlp_queue):
    job, cycle = _run_to_the_end(researcher, nlp_queue, ttl=300)
    ended = (job.finished_at - START).total_seconds()
    cycle(ended + 290)
    assert SimulatedPod.objects.count() == 2
    cycle(ended + 301)
    cycle(ended + 306)  # a deletion's grace period ends
    assert SimulatedPod.objects.count() == 0


@override_settings(FINISHED_POD_RETENTION_SECONDS=3600)
def test_a_short_ttl_deletes_pods_before_the_retention(researcher, nlp_queue):
    job, cycle = _run_to_the_end(researcher, nlp_queue, ttl=10)
    ended = (job.finished_at - START).total_seconds()
    cycle(ended + 11)
    cycle(ended + 16)
    assert SimulatedPod.objects.count() == 0


@override_settings(FINISHED_POD_RETENTION_SECONDS=3600)
def test_without_a_ttl_the_retention_applies(researcher, nlp_queue):
    job, cycle = _run_to_the_end(researcher, nlp_queue, ttl=None)
    ended = (job.finished_at - START).total_seconds()
    cycle(ended + 600)
    assert SimulatedPod.objects.count() == 2


def test_an_ended_jobs_service_stays_until_its_ttl(researcher, nlp_queue):
    job = _submit(researcher, nlp_queue, 120, plugins={"svc": []})
    ended = START
    Job.objects.filter(id=job.id).update(status=Job.Status.SUCCEEDED, finished_at=ended)

    def kept(at):
        return job_objects_kept([], [], set(), ttl_jobs_kept(now=at))

    assert "Service" in {kind for kind, _, _ in kept(ended + timedelta(seconds=100))}
    assert kept(ended + timedelta(seconds=121)) == set()


@pytest.mark.parametrize("ttl", [-1, "60", 30 * 86400 + 1, True])
def test_a_bad_ttl_is_an_error_naming_the_field(researcher, nlp_queue, ttl):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as raised:
        _submit(researcher, nlp_queue, ttl)
    assert "ttl_seconds_after_finished" in raised.value.message_dict
    assert not Job.objects.exists()
