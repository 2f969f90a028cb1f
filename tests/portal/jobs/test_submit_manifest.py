"""job_submit_manifest: a Volcano Job manifest through the API and through the upload page
names its queue one way (id or name, among the queues the submitter can see), or none (the
submitter's default queue, said back), and both answer an unknown, foreign or closed queue with
the same message under `spec.queue`. A file of several documents: the API takes its one Job,
the upload page every Job, all or none; other kinds are skipped, named."""

from http import HTTPStatus

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.urls import reverse
from rest_framework.test import APIClient

from portal.jobs.models import Job
from portal.jobs.services import JOB_SUBMIT_QUEUE_CLOSED, job_submit_manifest
from portal.queues.models import Queue
from portal.queues.selectors import NO_DEFAULT_QUEUE, QUEUE_NOT_FOUND
from portal.queues.services import queue_default_set

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
    assert submitted.ignored == ["spec.schedulerName"]
    assert submitted.warnings == ["spec.schedulerName is ignored by the portal"]


def _without_queue(**metadata):
    manifest = _manifest("unused")
    del manifest["spec"]["queue"]
    manifest["metadata"] = metadata or {"name": "ddp"}
    return manifest


@pytest.mark.parametrize("submit", ENTRY_POINTS)
def test_without_a_queue_the_job_goes_to_the_submitters_default(submit, researcher, nlp, nlp_queue):
    """Where upstream's webhook would put it in `default` (mutate_job.go patchDefaultQueue)."""
    assert submit(researcher, _without_queue()) == {"spec.queue": [NO_DEFAULT_QUEUE]}
    queue_default_set(tenant=nlp, queue="nlp-train", actor=None)
    job = submit(researcher, _without_queue())
    assert isinstance(job, Job), job
    assert job.queue == nlp_queue


def test_the_api_says_which_default_queue_it_took(researcher, nlp, nlp_queue):
    queue_default_set(tenant=nlp, queue="nlp-train", actor=None)
    api = APIClient()
    api.force_authenticate(researcher)
    response = api.post("/api/v1/jobs/", _without_queue(), format="json")
    assert response.status_code == HTTPStatus.CREATED, response.content
    assert response.json()["warnings"] == [
        "spec.queue is not given: the job goes to queue nlp-train, the default queue of tenant nlp"
    ]


def test_generate_name_gets_five_random_characters_like_the_api_servers(researcher, nlp_queue):
    manifest = _manifest("nlp-train")
    manifest["metadata"] = {"generateName": "sweep-"}
    first = job_submit_manifest(submitter=researcher, manifest=manifest)
    second = job_submit_manifest(submitter=researcher, manifest=manifest)
    for submitted in (first, second):
        assert submitted.job.name.startswith("sweep-")
        assert len(submitted.job.name) == len("sweep-") + 5
        assert set(submitted.job.name[6:]) <= set("bcdfghjklmnpqrstvwxz2456789")
        assert f"metadata.generateName: the job is named {submitted.job.name}" in (
            submitted.warnings
        )
    manifest["metadata"] = {"generateName": "Not_A_Label-"}
    with pytest.raises(ValidationError) as raised:
        job_submit_manifest(submitter=researcher, manifest=manifest)
    assert set(raised.value.message_dict) == {"metadata.generateName"}


PRIORITY_CLASS = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "job-priority"},
    "value": 1,
}
SKIPPED = "document 1: skipped: kind PriorityClass (job-priority) (only Volcano Jobs are submitted)"


def _yaml_post(user, *documents, url="/api/v1/jobs/"):
    api = APIClient()
    api.force_authenticate(user)
    body = yaml.safe_dump_all(documents)
    return api.post(url, body, content_type="application/yaml")


def test_the_api_takes_the_one_job_of_a_file_and_names_what_it_skips(researcher, nlp_queue):
    """docs/user-guide/how_to_configure_priorityclass_for_job.md: PriorityClasses, then the Job."""
    response = _yaml_post(researcher, PRIORITY_CLASS, _manifest("nlp-train"))
    assert response.status_code == HTTPStatus.CREATED, response.content
    assert response.json()["warnings"] == [SKIPPED]
    rendered = _yaml_post(researcher, PRIORITY_CLASS, _manifest("nlp-train"),
                          url="/api/v1/jobs/render/")  # fmt: skip
    assert rendered.status_code == HTTPStatus.OK, rendered.content
    assert rendered.json()["warnings"][0] == SKIPPED


def test_the_api_refuses_a_file_of_several_jobs_or_none(researcher, nlp_queue):
    for url in ("/api/v1/jobs/", "/api/v1/jobs/render/"):
        response = _yaml_post(researcher, _manifest("nlp-train"), PRIORITY_CLASS,
                              _manifest("nlp-train"), url=url)  # fmt: skip
        assert response.status_code == HTTPStatus.BAD_REQUEST
        assert response.json()["errors"] == {"body": [
            "documents 1, 3 are 2 Volcano Jobs: the API takes one per request (the upload page "
            "takes a file of several)"
        ]}  # fmt: skip
        response = _yaml_post(researcher, PRIORITY_CLASS, PRIORITY_CLASS, url=url)
        assert response.status_code == HTTPStatus.BAD_REQUEST
        assert "none of the 2 documents is a Volcano Job" in response.json()["errors"]["body"][0]
    assert not Job.objects.exists()


def _upload(user, *documents):
    client = APIClient()
    client.force_login(user)
    return client.post(reverse("jobs:job_upload"), {"text": yaml.safe_dump_all(documents)},
                       follow=True)  # fmt: skip


def test_the_upload_page_makes_every_job_of_a_file_and_says_which(researcher, nlp_queue):
    second = _manifest("nlp-train")
    second["metadata"]["name"] = "eval"
    response = _upload(researcher, PRIORITY_CLASS, _manifest("nlp-train"), second)
    jobs = list(Job.objects.order_by("pk"))
    assert [job.name for job in jobs] == ["ddp", "eval"]
    page = response.content.decode()
    assert (
        f"2 jobs submitted: ddp (#{jobs[0].pk}, queue nlp-train), eval (#{jobs[1].pk}, "
        "queue nlp-train)."
    ) in page
    assert "skipped: kind PriorityClass (job-priority)" in page


def test_the_upload_page_makes_none_when_one_job_is_at_fault(researcher, nlp_queue):
    bad = _manifest("nlp-train", minAvailable="two")
    response = _upload(researcher, _manifest("nlp-train"), bad, PRIORITY_CLASS)
    assert response.status_code == HTTPStatus.OK
    assert response.context["errors"] == ["document 2: spec.minAvailable: must be an integer"]
    assert not Job.objects.exists()
