"""One over-limit job through every entry point: the submit form, the API (JSON and a Volcano
manifest as YAML), the YAML upload page and the CLI (tests/portal/cli/test_cli.py). Each refuses
it with the same messages, under its own name for the field, and writes nothing.

The web form once stored 1,000,000 replicas x 5,000 GPUs that the API refused; tasks per job
were 20 in the form and 64 in the API. The limits live in jobspec.limits only.
"""

import copy
from http import HTTPStatus

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from jobspec.limits import exceeded
from portal.jobs.limits import job_limits
from portal.jobs.models import Job, JobTask
from tests.portal.common.pages import job_form_data
from tests.portal.jobs.over_limit import (
    GPUS,
    REPLICAS,
    REPLICAS_PATH,
    expected_messages,
    manifest_errors,
    over_limit_manifest,
)

pytestmark = pytest.mark.django_db


def _rows() -> tuple[int, int]:
    return Job.objects.count(), JobTask.objects.count()


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.force_authenticate(researcher)
    return client


def test_the_form_refuses_it_on_its_fields(researcher_client, nlp_queue):
    data = job_form_data(
        nlp_queue.pk, **{"tasks-0-replicas": str(REPLICAS), "tasks-0-gpus": str(GPUS)}
    )
    response = researcher_client.post(reverse("jobs:job_submit"), data)
    assert response.status_code == HTTPStatus.OK
    assert _rows() == (0, 0)
    task_form = response.context["formset"].forms[0]
    messages = expected_messages()
    assert task_form.errors == {
        "replicas": messages["tasks[0].replicas"],
        "gpus": messages["tasks[0].gpus"],
    }
    assert list(response.context["formset"].non_form_errors()) == messages["tasks"]
    for message in sum(messages.values(), []):
        assert message in response.content.decode()


def test_the_api_refuses_it_as_json(api, nlp_queue):
    body = {
        "queue": "nlp-train",
        "name": "huge",
        "tasks": [{"name": "worker", "replicas": REPLICAS, "image": "trainer:1", "gpus": GPUS}],
    }
    response = api.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["errors"] == expected_messages()
    assert _rows() == (0, 0)


def test_the_api_refuses_it_as_a_volcano_manifest(api, nlp_queue):
    response = api.post(
        "/api/v1/jobs/",
        yaml.safe_dump(over_limit_manifest()),
        content_type="application/yaml",
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["errors"] == manifest_errors()
    assert _rows() == (0, 0)


def test_the_upload_page_refuses_it_by_manifest_path(researcher_client, nlp_queue):
    upload = SimpleUploadedFile(
        "job.yaml", yaml.safe_dump(over_limit_manifest()).encode(), content_type="application/yaml"
    )
    response = researcher_client.post(reverse("jobs:job_upload"), {"manifest": upload})
    assert response.status_code == HTTPStatus.OK
    assert sorted(response.context["errors"]) == sorted(
        f"{path}: {message}" for path, messages in manifest_errors().items() for message in messages
    )
    assert _rows() == (0, 0)


@override_settings(JOB_MAX_TASKS=2)
def test_tasks_per_job_is_one_number_for_the_form_and_the_api(researcher_client, api, nlp_queue):
    """Three tasks, one over the limit: the form (which builds one form more than the limit),
    the API and a manifest give the same message; a form post of many more tasks gets it too."""
    message = exceeded(job_limits(), "tasks_per_job", 3)
    tasks = [{"name": f"t{i}", "replicas": 1, "image": "trainer:1"} for i in range(3)]
    response = api.post(
        "/api/v1/jobs/", {"queue": "nlp-train", "name": "many", "tasks": tasks}, format="json"
    )
    assert response.json()["errors"] == {"tasks": [message]}

    data = job_form_data(nlp_queue.pk, **{"tasks-TOTAL_FORMS": "3"})
    for i in (1, 2):
        data |= {f"tasks-{i}-{key}": value for key, value in
                 (("name", f"t{i}"), ("replicas", "1"), ("image", "trainer:1"), ("gpus", "0"))}  # fmt: skip
    response = researcher_client.post(reverse("jobs:job_submit"), data)
    assert list(response.context["formset"].non_form_errors()) == [message]

    manifest = over_limit_manifest()
    task = manifest["spec"]["tasks"][0]
    manifest["spec"]["tasks"] = [
        {**copy.deepcopy(task), "name": f"t{i}", "replicas": 1} for i in range(3)
    ]
    response = api.post("/api/v1/jobs/", yaml.safe_dump(manifest), content_type="application/yaml")
    assert response.json()["errors"] == {"spec.tasks": [message]}

    data["tasks-TOTAL_FORMS"] = "1000000"
    response = researcher_client.post(reverse("jobs:job_submit"), data)
    assert list(response.context["formset"].non_form_errors()) == [
        exceeded(job_limits(), "tasks_per_job", 1_000_000)
    ]
    assert len(response.context["formset"].forms) == 3  # never more than the limit + 1
    assert _rows() == (0, 0)


@pytest.mark.parametrize(
    ("path", "value", "error_path"),
    [
        # Right shape, out of bounds: job_submit refuses them, by the manifest's paths.
        (("spec", "tasks", 0, "replicas"), 0, REPLICAS_PATH),
        (("spec", "tasks", 0, "replicas"), -2, REPLICAS_PATH),
        # 0 is left out (upstream's webhook too: patchDefaultMinAvailable); -1 is out of bounds
        (("spec", "minAvailable"), -1, "spec.minAvailable"),
        (("metadata", "annotations"), {"priority": str(10**12)}, "metadata.annotations.priority"),
    ],
)
def test_manifest_numbers_out_of_bounds_name_the_manifest_path(
    api, nlp_queue, path, value, error_path
):
    manifest = over_limit_manifest()
    manifest["spec"]["tasks"][0]["replicas"] = 1
    manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"] = {}
    target = manifest
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    response = api.post("/api/v1/jobs/", manifest, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert error_path in response.json()["errors"], response.json()
    assert _rows() == (0, 0)
