"""job_detail_data builds what JobDetailApi.OutputSerializer would render, key by key."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from portal.cluster.models import Placement
from portal.cluster.selectors import placement_list_active
from portal.jobs.apis import JobDetailApi
from portal.jobs.models import Job
from portal.jobs.presentation import job_detail_data
from portal.jobs.selectors import job_get
from tests.factories import JobFactory, JobTaskFactory, PlacementFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def api_client_for():
    def client_for(user):
        client = APIClient()
        client.force_authenticate(user)
        return client

    return client_for


class _Request:
    def __init__(self, user):
        self.user = user


def _both_ways(job_id: int, user) -> tuple[list, list]:
    job = job_get(user=user, job_id=job_id)
    serialized = JobDetailApi.OutputSerializer(job, context={"request": _Request(user)}).data
    job = job_get(user=user, job_id=job_id)
    built = job_detail_data(job, user=user, placements=placement_list_active(job_id=job.pk))
    return list(serialized.items()), list(built.items())


def test_a_running_job_with_placements_renders_as_the_serializer_does(researcher, nlp_queue):
    now = timezone.now()
    job = JobFactory(
        queue=nlp_queue,
        submitter=researcher,
        status=Job.Status.RUNNING,
        priority=-3,
        min_available=3,
        expected_duration_seconds=3600,
        admitted_at=now - timedelta(minutes=5),
        started_at=now,
        pending_reason_at=now - timedelta(hours=1, microseconds=7),
        pending_reason="queue nlp-train at capability 24/24 GPUs",
        preemption_count=2,
    )
    master = JobTaskFactory(
        job=job, name="master", command=["python", "-c", "é"], env={"A": "1", "B": ""}
    )
    worker = JobTaskFactory(
        job=job, name="worker", replicas=2, gpus=8, node_selector={"gpu-model": "H100"}
    )
    PlacementFactory(task=worker, replica=1, state=Placement.State.RUNNING)
    PlacementFactory(task=master, replica=0, state=Placement.State.BOUND)
    PlacementFactory(task=worker, replica=0, state=Placement.State.DELETED)

    serialized, built = _both_ways(job.pk, researcher)

    assert built == serialized
    assert len(dict(built)["placements"]) == 2


@pytest.mark.parametrize("status", [Job.Status.PENDING, Job.Status.SUCCEEDED])
def test_pending_and_finished_jobs_render_as_the_serializer_does(status, lead, nlp_queue):
    job = JobFactory(
        queue=nlp_queue, status=status, finished_at=None, expected_duration_seconds=None
    )
    if status == Job.Status.SUCCEEDED:
        job.finished_at = timezone.now()
        job.save()
    JobTaskFactory(job=job, gpus=0)

    serialized, built = _both_ways(job.pk, lead)

    assert built == serialized
    assert dict(built)["can_cancel"] is (status == Job.Status.PENDING)


def test_release_api_is_for_site_admins(api_client_for, researcher, staff, nlp_queue):
    job = JobFactory(queue=nlp_queue, submitter=researcher, status=Job.Status.QUARANTINED)
    url = f"/api/v1/jobs/{job.pk}/release/"
    assert api_client_for(researcher).post(url).status_code == 403
    response = api_client_for(staff).post(url)
    assert response.status_code == 200
    assert response.json()["status"] == "pending"
    assert api_client_for(staff).post(url).json()["errors"] == {
        "status": ["the job is pending, not quarantined"]
    }
