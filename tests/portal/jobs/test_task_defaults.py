"""One default CPU and memory per pod for every way a job comes in: the form, the API (JSON or a
Volcano manifest) and the upload page give a pod that does not say the same request."""

from http import HTTPStatus

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from portal.jobs.forms import TaskForm
from portal.jobs.models import TASK_DEFAULT_CPU_MILLIS, TASK_DEFAULT_MEMORY_BYTES, Job

pytestmark = pytest.mark.django_db

DEFAULT = (TASK_DEFAULT_CPU_MILLIS, TASK_DEFAULT_MEMORY_BYTES)
MANIFEST = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: yaml-job}
spec:
  queue: nlp-train
  tasks:
  - name: worker
    replicas: 1
    template:
      spec:
        containers:
        - name: main
          image: trainer:1
          resources: {limits: {nvidia.com/gpu: 2}}
"""


def _requests(name: str) -> tuple[int, int]:
    task = Job.objects.get(name=name).tasks.get()
    return task.cpu_millis, task.memory_bytes


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.force_authenticate(researcher)
    return client


def test_the_default_is_eight_cores_and_64_gib():
    assert DEFAULT == (8000, 64 * 1024**3)


def test_a_json_job_without_cpu_or_memory_gets_the_default(api, nlp_queue):
    body = {
        "queue": "nlp-train",
        "name": "api-job",
        "tasks": [{"name": "worker", "replicas": 1, "image": "trainer:1", "gpus": 1}],
    }
    response = api.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == HTTPStatus.CREATED, response.json()
    assert _requests("api-job") == DEFAULT
    task = response.json()["tasks"][0]
    assert (task["cpu_millis"], task["memory_bytes"]) == DEFAULT


def test_a_json_job_that_asks_for_no_cpu_keeps_zero(api, nlp_queue):
    task = {"name": "w", "replicas": 1, "image": "t:1", "cpu_millis": 0, "memory_bytes": 0}
    body = {"queue": "nlp-train", "name": "zero", "tasks": [task]}
    assert api.post("/api/v1/jobs/", body, format="json").status_code == HTTPStatus.CREATED
    assert _requests("zero") == (0, 0)


def test_a_manifest_without_cpu_or_memory_gets_the_default(api, researcher_client, nlp_queue):
    response = api.post("/api/v1/jobs/", MANIFEST, content_type="application/yaml")
    assert response.status_code == HTTPStatus.CREATED, response.json()
    assert _requests("yaml-job") == DEFAULT

    upload = SimpleUploadedFile("job.yaml", MANIFEST.replace("yaml-job", "uploaded").encode())
    response = researcher_client.post(reverse("jobs:job_upload"), {"manifest": upload})
    assert response.status_code == HTTPStatus.FOUND
    assert _requests("uploaded") == DEFAULT


def test_a_manifest_that_states_only_memory_gets_the_default_cpu(api, nlp_queue):
    manifest = MANIFEST.replace("{limits: {nvidia.com/gpu: 2}}", "{requests: {memory: 1Gi}}")
    assert api.post("/api/v1/jobs/", manifest, content_type="application/yaml").status_code == 201
    assert _requests("yaml-job") == (TASK_DEFAULT_CPU_MILLIS, 1024**3)


def test_the_form_starts_at_the_default_and_an_empty_field_means_it(researcher_client, nlp_queue):
    from tests.portal.common.pages import job_form_data

    form = TaskForm()
    assert (form["cpu"].initial, form["memory"].initial) == ("8", "64Gi")
    assert "Empty: 8 cores" in form.fields["cpu"].help_text
    assert "Empty: 64 GiB" in form.fields["memory"].help_text

    data = job_form_data(nlp_queue.pk, name="form-job")
    data |= {"tasks-0-cpu": "", "tasks-0-memory": ""}
    response = researcher_client.post(reverse("jobs:job_submit"), data)
    assert response.status_code == HTTPStatus.FOUND
    assert _requests("form-job") == DEFAULT
