from http import HTTPStatus

import pytest
from django.urls import reverse

from portal.jobs.models import Job
from tests.factories import JobFactory, JobTaskFactory, PlacementFactory

pytestmark = pytest.mark.django_db


def test_job_list_scoped(researcher_client, staff_client, nlp_queue, vision_queue):
    JobFactory(queue=nlp_queue, name="visible-job")
    JobFactory(queue=vision_queue, name="hidden-job")
    body = researcher_client.get(reverse("jobs:job_list")).content.decode()
    assert "visible-job" in body
    assert "hidden-job" not in body
    body = staff_client.get(reverse("jobs:job_list")).content.decode()
    assert "hidden-job" in body


def test_job_list_status_filter(researcher_client, nlp_queue):
    JobFactory(queue=nlp_queue, name="running-job", status=Job.Status.RUNNING)
    JobFactory(queue=nlp_queue, name="pending-job")
    response = researcher_client.get(reverse("jobs:job_list"), {"status": "running"})
    assert [job.name for job in response.context["jobs"]] == ["running-job"]
    response = researcher_client.get(reverse("jobs:job_list"), {"status": "bogus"})
    assert len(response.context["jobs"]) == 2


def test_job_detail_shows_tasks_and_placements(researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue, name="bert")
    task = JobTaskFactory(job=job, name="master", node_selector={"gpu-model": "H100"})
    PlacementFactory(task=task, pod_name="bert-1-master-0")
    response = researcher_client.get(reverse("jobs:job_detail", args=[job.pk]))
    assert response.status_code == HTTPStatus.OK
    body = response.content.decode()
    assert "master" in body
    assert "gpu-model=H100" in body
    assert "bert-1-master-0" in body


def test_job_detail_other_tenant_is_404(researcher_client, vision_queue):
    job = JobFactory(queue=vision_queue)
    response = researcher_client.get(reverse("jobs:job_detail", args=[job.pk]))
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert job.name not in response.content.decode()


def test_job_detail_missing_is_404(researcher_client):
    assert researcher_client.get(reverse("jobs:job_detail", args=[999999])).status_code == 404


def test_cancel_own_job(researcher, researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue, submitter=researcher)
    response = researcher_client.post(reverse("jobs:job_cancel", args=[job.pk]))
    assert response.status_code == HTTPStatus.FOUND
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED


def test_cancel_colleague_job_is_403(researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue)
    response = researcher_client.post(reverse("jobs:job_cancel", args=[job.pk]))
    assert response.status_code == HTTPStatus.FORBIDDEN
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING


def test_cancel_other_tenant_job_is_404(researcher_client, vision_queue):
    job = JobFactory(queue=vision_queue)
    response = researcher_client.post(reverse("jobs:job_cancel", args=[job.pk]))
    assert response.status_code == HTTPStatus.NOT_FOUND


def test_cancel_finished_job_shows_error(researcher, researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue, submitter=researcher, status=Job.Status.SUCCEEDED)
    response = researcher_client.post(reverse("jobs:job_cancel", args=[job.pk]), follow=True)
    assert "already succeeded" in response.content.decode()


def test_cancel_needs_post(researcher, researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue, submitter=researcher)
    response = researcher_client.get(reverse("jobs:job_cancel", args=[job.pk]))
    assert response.status_code == HTTPStatus.METHOD_NOT_ALLOWED
