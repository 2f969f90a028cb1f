"""Task tolerations: one validator behind the API, the form and the Volcano YAML upload."""

from http import HTTPStatus

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from jobspec.tolerations import toleration_errors, tolerations_parse, tolerations_text
from portal.jobs.models import Job
from portal.jobs.services import job_submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(researcher) -> APIClient:
    client = APIClient()
    client.force_authenticate(researcher)
    return client


GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
DEDICATED = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"}


@pytest.mark.parametrize(
    "tolerations",
    [
        [],
        [GPU, DEDICATED],
        [{"operator": "Exists"}],  # tolerate everything
        [{"key": "a", "value": "b"}],  # operator defaults to Equal, effect to any
        [{**DEDICATED, "tolerationSeconds": 300}],
    ],
)
def test_valid_tolerations_pass(tolerations):
    assert toleration_errors(tolerations) == []


@pytest.mark.parametrize(
    ("tolerations", "message"),
    [
        ({"key": "a"}, "must be a list of tolerations"),
        (["a"], "[0]: must be a mapping"),
        ([{"key": "a", "operator": "In"}], "[0].operator: must be Exists or Equal"),
        ([GPU, {"key": "a", "effect": "NoRun"}], "[1].effect: must be empty"),
        ([{"key": "a", "operator": "Exists", "value": "x"}], "[0].value: must be empty"),
        ([{"value": "x"}], "[0].operator: must be Exists when the key is empty"),
        ([{"key": "bad key!"}], "[0].key: must be a label key"),
        ([{"key": "a", "value": "-x"}], "[0].value: must be a label value"),
        ([{**GPU, "tolerationSeconds": 5}], "[0].tolerationSeconds: only allowed with effect"),
        ([{**DEDICATED, "tolerationSeconds": "5"}], "[0].tolerationSeconds: must be an integer"),
        (
            [{**DEDICATED, "tolerationSeconds": 2**63}],
            "[0].tolerationSeconds: must be an integer between -2^63 and 2^63-1",
        ),
        ([{"key": 3}], "[0].key: must be a string"),
        ([{"key": "a", "tolerance": 1}], "[0]: unknown field tolerance"),
    ],
)
def test_invalid_tolerations_name_the_item_and_field(tolerations, message):
    errors = toleration_errors(tolerations)
    assert any(error.startswith(message) for error in errors), errors


def test_the_service_refuses_bad_tolerations_under_the_task_path(researcher, nlp_queue):
    with pytest.raises(ValidationError) as caught:
        job_submit(
            submitter=researcher,
            queue=nlp_queue,
            name="t",
            tasks=[{"name": "w", "image": "i"}, {"name": "x", "image": "i", "tolerations": [{}]}],
        )
    errors = caught.value.message_dict
    assert list(errors) == ["tasks[1].tolerations"]
    assert errors["tasks[1].tolerations"][0].startswith("[0].operator: must be Exists")
    assert not Job.objects.exists()


def test_the_api_stores_and_shows_tolerations(api, nlp_queue):
    """A taint beyond the GPU ones needs a site admin's list (jobspec.tenancy)."""
    nlp_queue.tenant.allowed_tolerations = [{"key": "dedicated", "operator": "Exists"}]
    nlp_queue.tenant.save()
    client = api
    body = {
        "queue": "nlp-train",
        "name": "tolerant",
        "tasks": [
            {"name": "w", "replicas": 1, "image": "i", "gpus": 1, "tolerations": [GPU, DEDICATED]}
        ],
    }
    created = client.post("/api/v1/jobs/", body, format="json")
    assert created.status_code == HTTPStatus.CREATED, created.json()
    assert created.json()["tasks"][0]["tolerations"] == [GPU, DEDICATED]
    assert Job.objects.get().tasks.get().tolerations == [GPU, DEDICATED]


def test_the_api_answers_400_naming_the_field(api, nlp_queue):
    client = api
    body = {
        "queue": "nlp-train",
        "name": "tolerant",
        "tasks": [
            {
                "name": "w",
                "replicas": 1,
                "image": "i",
                "tolerations": [{"key": "a", "effect": "Never"}],
            }
        ],
    }
    response = client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    errors = response.json()["errors"]
    assert list(errors) == ["tasks[0].tolerations"]
    assert "[0].effect" in errors["tasks[0].tolerations"][0]


def test_the_form_syntax_round_trips():
    text = "nvidia.com/gpu:NoSchedule\ndedicated=ml:NoExecute\n# comment\n\n*\nzone=a"
    parsed = tolerations_parse(text)
    assert parsed == [
        GPU,
        DEDICATED,
        {"key": "", "operator": "Exists"},
        {"key": "zone", "operator": "Equal", "value": "a"},
    ]
    assert toleration_errors(parsed) == []
    assert tolerations_parse(tolerations_text(parsed)) == parsed


def test_a_line_the_form_cannot_read_is_named():
    with pytest.raises(ValueError, match="line 2"):
        tolerations_parse("a:NoSchedule\n=x")


def _form(queue, tolerations: str) -> dict[str, str]:
    return {
        "queue": queue.pk,
        "name": "tolerant",
        "priority": "0",
        "tasks-TOTAL_FORMS": "1",
        "tasks-INITIAL_FORMS": "0",
        "tasks-MIN_NUM_FORMS": "1",
        "tasks-MAX_NUM_FORMS": "20",
        "tasks-0-name": "worker",
        "tasks-0-replicas": "1",
        "tasks-0-image": "trainer:1",
        "tasks-0-gpus": "1",
        "tasks-0-tolerations": tolerations,
    }


def test_the_form_submits_tolerations(researcher_client, nlp_queue):
    response = researcher_client.post(
        reverse("jobs:job_submit"), _form(nlp_queue, "nvidia.com/gpu:NoSchedule")
    )
    assert response.status_code == HTTPStatus.FOUND
    assert Job.objects.get().tasks.get().tolerations == [GPU]


def test_a_form_toleration_the_validator_refuses_lands_on_the_field(researcher_client, nlp_queue):
    response = researcher_client.post(reverse("jobs:job_submit"), _form(nlp_queue, "a:Never"))
    assert response.status_code == HTTPStatus.OK
    errors = response.context["formset"].forms[0].errors["tolerations"]
    assert "[0].effect" in errors[0]
    assert not Job.objects.exists()


def _manifest(tolerations: str) -> bytes:
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: yaml-job}}
spec:
  queue: nlp-train
  tasks:
  - name: worker
    template:
      spec:
        tolerations: {tolerations}
        containers:
        - {{name: main, image: trainer:1}}
""".encode()


def test_the_yaml_upload_maps_tolerations(researcher_client, nlp_queue):
    manifest = _manifest("[{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]")
    upload = SimpleUploadedFile("job.yaml", manifest)
    response = researcher_client.post(reverse("jobs:job_upload"), {"manifest": upload})
    assert response.status_code == HTTPStatus.FOUND
    assert Job.objects.get().tasks.get().tolerations == [GPU]


def test_a_bad_yaml_toleration_names_the_manifest_path(researcher_client, nlp_queue):
    upload = SimpleUploadedFile("job.yaml", _manifest("[{key: a, operator: Maybe}]"))
    response = researcher_client.post(reverse("jobs:job_upload"), {"manifest": upload})
    errors = response.context["errors"]
    assert any(
        line.startswith("spec.tasks[0].template.spec.tolerations: [0].operator") for line in errors
    ), errors
    assert not Job.objects.exists()
