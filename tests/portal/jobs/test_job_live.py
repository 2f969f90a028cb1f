"""The job page's live parts: /jobs/<id>/live/ sends the state, reason, facts, placement and
preemptions under the ids the page has, scoped like the page, final once the job has ended."""

from http import HTTPStatus

import pytest
from django.urls import reverse

from portal.jobs.models import Job
from tests.factories import JobFactory, JobTaskFactory, PlacementFactory

pytestmark = pytest.mark.django_db

PART_IDS = ("job-status", "job-state", "job-facts", "job-placement", "job-preemptions-wrap")


def _live(client, job):
    return client.get(reverse("jobs:job_live", args=[job.pk]))


def test_the_live_parts_are_the_pages_parts(researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue, pending_reason="waiting behind 2 higher-priority jobs")
    page = researcher_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    response = _live(researcher_client, job)
    live = response.content.decode()
    assert response.status_code == HTTPStatus.OK
    assert "no-store" in response["Cache-Control"]
    assert "X-Job-Final" not in response
    for part in PART_IDS:
        assert f'id="{part}"' in page
        assert live.count(f'id="{part}"') == 1
    assert f'data-live-url="{reverse("jobs:job_live", args=[job.pk])}"' in page
    assert "<strong>Why it is waiting:</strong> waiting behind 2 higher-priority jobs" in live
    assert "<h1>" not in live
    assert "<html" not in live


def test_a_job_that_started_since_shows_its_placement(researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue, pending_reason="waiting for the next scheduling cycle")
    task = JobTaskFactory(job=job, name="worker")
    assert "Not placed yet." in _live(researcher_client, job).content.decode()

    PlacementFactory(task=task, replica=0, node_name="gpu-worker-3")
    job.status, job.pending_reason = Job.Status.RUNNING, ""
    job.save()
    live = _live(researcher_client, job).content.decode()
    assert 'id="job-status">Running</span>' in live
    assert "gpu-worker-3" in live
    assert "Why it is waiting" not in live


def test_an_ended_job_is_final(researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue, status=Job.Status.SUCCEEDED)
    response = _live(researcher_client, job)
    assert response["X-Job-Final"] == "1"
    assert "Cancel job" not in response.content.decode()
    page = researcher_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert 'data-final="1"' in page


def test_another_tenants_job_is_404_and_a_stranger_is_sent_to_log_in(
    researcher_client, client, vision_queue
):
    job = JobFactory(queue=vision_queue)
    assert _live(researcher_client, job).status_code == HTTPStatus.NOT_FOUND
    assert _live(client, job).status_code == HTTPStatus.FOUND


def test_the_roles_table_shows_cores_and_gib(researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue)
    JobTaskFactory(job=job, cpu_millis=8000, memory_bytes=64 * 1024**3)
    page = researcher_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert ">8 cores</td>" in page
    assert ">64 GiB</td>" in page
    assert "8000m" not in page
