"""job_submit_manifest: a Volcano Job manifest through the API and through the upload page
names its queue one way (id or name, among the queues the submitter can see), and both
answer an unknown, foreign or closed queue with the same message under `spec.queue`."""

from http import HTTPStatus

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.urls import reverse
from rest_framework.test import APIClient

from portal.jobs.models import Job
from portal.jobs.services import JOB_SUBMIT_QUEUE_CLOSED, job_submit_manifest
from portal.queues.models import Queue
from portal.queues.selectors import QUEUE_NOT_FOUND

pytestmark = pytest.mark.django_db


def _manifest(queue: str, **spec: object) -> dict:
    task = {
        "name": "worker",
        "replicas": 1,
        "template": {"spec": {"containers": [{"name": "t", "image": "trainer:1"}]}},
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "ddp"},
        "spec": {"queue": queue, "tasks": [task], **spec},
    }


def _through_api(user, manifest: dict) -> dict[str, list[str]] | Job:
    client = APIClient()
    client.force_authenticate(user)
    response = client.post("/api/v1/jobs/", manifest, format="json")
    if response.status_code == HTTPStatus.CREATED:
        return Job.objects.get(pk=response.json()["id"])
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    return response.json()["errors"]


def _through_upload_page(user, manifest: dict) -> dict[str, list[str]] | Job:
    client = APIClient()  # a session login; the page is an ordinary Django view
    client.force_login(user)
    response = client.post(reverse("jobs:job_upload"), {"text": yaml.safe_dump(manifest)})
    if response.status_code == HTTPStatus.FOUND:
        return Job.objects.get(pk=int(response["Location"].rstrip("/").rsplit("/", 1)[1]))
    assert response.status_code == HTTPStatus.OK, response.content
    errors: dict[str, list[str]] = {}
    for line in response.context["errors"]:
        path, _, message = line.partition(": ")
        errors.setdefault(path, []).append(message)
    return errors


ENTRY_POINTS = [
    pytest.param(_through_api, id="api"),
    pytest.param(_through_upload_page, id="upload-page"),
]


@pytest.mark.parametrize("submit", ENTRY_POINTS)
def test_the_queue_by_name(submit, researcher, nlp_queue):
    job = submit(researcher, _manifest("nlp-train"))
    assert isinstance(job, Job), job
    assert job.queue == nlp_queue


@pytest.mark.parametrize("submit", ENTRY_POINTS)
def test_the_queue_by_id(submit, researcher, nlp_queue):
    job = submit(researcher, _manifest(str(nlp_queue.pk)))
    assert isinstance(job, Job), job
    assert job.queue == nlp_queue


@pytest.mark.parametrize("submit", ENTRY_POINTS)
def test_an_unknown_queue(submit, researcher, nlp_queue):
    errors = submit(researcher, _manifest("no-such-queue"))
    assert errors == {"spec.queue": [QUEUE_NOT_FOUND.format(ref="no-such-queue")]}
    assert not Job.objects.exists()


@pytest.mark.parametrize("submit", ENTRY_POINTS)
def test_another_tenants_queue_is_unknown_by_name_and_by_id(
    submit, researcher, nlp_queue, vision_queue
):
    for ref in ("vision-train", str(vision_queue.pk)):
        errors = submit(researcher, _manifest(ref))
        assert errors == {"spec.queue": [QUEUE_NOT_FOUND.format(ref=ref)]}
    assert not Job.objects.exists()


@pytest.mark.parametrize("submit", ENTRY_POINTS)
def test_a_closed_queue_says_so(submit, researcher, nlp_queue):
    Queue.objects.filter(pk=nlp_queue.pk).update(state=Queue.State.CLOSED)
    errors = submit(researcher, _manifest("nlp-train"))
    assert errors == {"spec.queue": [JOB_SUBMIT_QUEUE_CLOSED.format(queue="nlp-train")]}


@pytest.mark.parametrize("submit", ENTRY_POINTS)
def test_an_unknown_queue_is_named_with_the_manifests_own_faults(submit, researcher, nlp_queue):
    errors = submit(researcher, _manifest("no-such-queue", minAvailable="two"))
    assert errors == {
        "spec.minAvailable": ["must be an integer"],
        "spec.queue": [QUEUE_NOT_FOUND.format(ref="no-such-queue")],
    }


def test_the_service_keys_the_jobs_faults_by_manifest_path(researcher, nlp_queue):
    manifest = _manifest("nlp-train")
    manifest["spec"]["tasks"][0]["replicas"] = 0
    with pytest.raises(ValidationError) as raised:
        job_submit_manifest(submitter=researcher, manifest=manifest)
    assert set(raised.value.message_dict) == {"spec.tasks[0].replicas"}


def test_the_service_hands_back_the_ignored_fields(researcher, nlp_queue):
    submitted = job_submit_manifest(
        submitter=researcher, manifest=_manifest("nlp-train", schedulerName="volcano")
    )
    assert submitted.job.queue == nlp_queue
    assert submitted.ignored == ["schedulerName"]
