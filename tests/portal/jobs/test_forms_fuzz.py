"""Hostile values in the job submit form and hostile manifests in the upload form.

Properties, for every generated request: never a 500 (the test client re-raises it); either
the job is stored whole (redirect to its page) or nothing is written and the page names the
field at fault.
"""

import re
from http import HTTPStatus

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import resolve, reverse
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jobspec.limits import task_limit_errors
from portal.common.validators import DNS_LABEL_RE
from portal.jobs.limits import job_limits
from portal.jobs.models import Job, JobTask
from tests.nested import copy_at, paths
from tests.portal.common.fuzzing import FORM_FUZZ, form_error_keys, form_text, form_values
from tests.portal.common.pages import build_world, job_form_data

pytestmark = pytest.mark.django_db

JOB_KEYS = ["queue", "name", "priority", "min_available", "expected_duration_seconds", "gpu_model"]
TASK_KEYS = [f"tasks-0-{field}" for field in ("name", "replicas", "image", "command", "gpus")]
TASK_KEYS += ["tasks-0-cpu", "tasks-0-memory", "tasks-0-DELETE"]
MANAGEMENT_KEYS = ["tasks-TOTAL_FORMS", "tasks-INITIAL_FORMS", "tasks-MIN_NUM_FORMS"]
MANAGEMENT_KEYS += ["tasks-MAX_NUM_FORMS"]
ALL_KEYS = JOB_KEYS + TASK_KEYS + MANAGEMENT_KEYS


@pytest.fixture
def world(db):
    return build_world()


@pytest.fixture
def researcher_client(world):
    client = Client()
    client.force_login(world["a_researcher"])
    return client


def _counts() -> tuple[int, int]:
    return Job.objects.count(), JobTask.objects.count()


def _expected_error_keys(key: str) -> set[str]:
    """Where a bad value in `key` may be reported."""
    if key in MANAGEMENT_KEYS or key == "tasks-0-DELETE":
        return {"tasks-management"}
    if key in ("min_available", "tasks-0-replicas"):
        # The gang size is checked against the replicas: either side may carry it; the
        # replicas of the whole job are the formset's.
        return {key, "min_available", "tasks-management"}
    return {key}


def _assert_names_are_labels(job: Job) -> None:
    """What reaches the database is a DNS label, whole (no line break after it)."""
    assert DNS_LABEL_RE.fullmatch(job.name), job.name
    for task in job.tasks.all():
        assert DNS_LABEL_RE.fullmatch(task.name), task.name


def assert_within_limits(job: Job) -> None:
    """What the form stores, the limits allow (it once stored 200,000 replicas and 2**62
    GPUs per pod, which the API refused)."""
    limits = job_limits()
    tasks = list(job.tasks.all())
    assert len(tasks) <= limits.tasks_per_job
    assert sum(task.replicas for task in tasks) <= limits.replicas_per_job
    for task in tasks:
        assert task_limit_errors(task, limits=limits, prefix="") == {}


def _submit(client, data):
    before = _counts()
    response = client.post(reverse("jobs:job_submit"), data)
    after = _counts()
    if response.status_code == HTTPStatus.FOUND:
        assert resolve(response.url).view_name == "jobs:job_detail"
        job = Job.objects.get(pk=resolve(response.url).kwargs["job_id"])
        assert after == (before[0] + 1, before[1] + job.tasks.count())
        assert job.tasks.count() >= 1
        _assert_names_are_labels(job)
        assert_within_limits(job)
        return response, set()
    assert response.status_code == HTTPStatus.OK
    assert after == before, "a refused submission wrote rows"
    errors = form_error_keys(response, formset_prefix="tasks")
    assert errors, "refused without saying why"
    return response, errors


@FORM_FUZZ
@given(data=st.data(), key=st.sampled_from(ALL_KEYS), value=form_values)
@example(data=None, key="tasks-0-memory", value="9" * 5000)
@example(data=None, key="tasks-0-cpu", value="1" + "0" * 30)
@example(data=None, key="tasks-TOTAL_FORMS", value="1000000")
@example(data=None, key="tasks-0-command", value="python 'unclosed")
@example(data=None, key="priority", value="9" * 30)
@example(data=None, key="name", value="nl-name\n")
@example(data=None, key="name", value="ｈostile")
@example(data=None, key="tasks-0-name", value="worker\r\n")
@example(data=None, key="tasks-0-name", value="𝐰𝐨𝐫𝐤𝐞𝐫")
@example(data=None, key="tasks-0-gpus", value=str(2**62))
@example(data=None, key="tasks-0-gpus", value="9" * 5000)
@example(data=None, key="tasks-0-replicas", value="200000")
@example(data=None, key="tasks-0-replicas", value="1000000")
@example(data=None, key="tasks-0-cpu", value="9" * 40)
@example(data=None, key="tasks-0-memory", value="9" * 40 + "Ti")
@example(data=None, key="tasks-0-command", value="x " * 300_000)
@example(data=None, key="expected_duration_seconds", value="9" * 12)
def test_one_hostile_field_is_refused_on_that_field(world, researcher_client, data, key, value):
    if key == "queue" and data is not None:
        value = data.draw(
            st.one_of(st.just(value), st.sampled_from([str(world["b_queue"].pk), "0", "-5"]))
        )
    body = job_form_data(world["a_queue"].pk) | {key: value}
    _, errors = _submit(researcher_client, body)
    if errors:
        assert errors & _expected_error_keys(key), (key, value, errors)


@settings(FORM_FUZZ, max_examples=25)
@given(changes=st.dictionaries(st.sampled_from(ALL_KEYS), form_values, max_size=6))
def test_many_hostile_fields_never_break_the_page(world, researcher_client, changes):
    _submit(researcher_client, job_form_data(world["a_queue"].pk) | changes)


@settings(FORM_FUZZ, max_examples=15)
@given(dropped=st.sets(st.sampled_from(ALL_KEYS), min_size=1, max_size=5))
def test_missing_fields_are_refused_or_defaulted(world, researcher_client, dropped):
    body = {k: v for k, v in job_form_data(world["a_queue"].pk).items() if k not in dropped}
    _submit(researcher_client, body)


# --- the Volcano YAML upload ------------------------------------------------------------------

VALID_MANIFEST = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "fuzz-upload", "annotations": {"priority": "3"}},
    "spec": {
        "queue": "alpha-queue",
        "minAvailable": 1,
        "tasks": [
            {
                "name": "worker",
                "replicas": 1,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "image": "trainer:1",
                                "command": ["python", "train.py"],
                                "env": [{"name": "LR", "value": "3e-4"}],
                                "resources": {
                                    "limits": {"nvidia.com/gpu": 1},
                                    "requests": {"cpu": "4", "memory": "16Gi"},
                                },
                            }
                        ]
                    }
                },
            }
        ],
    },
}


MANIFEST_PATHS = list(paths(VALID_MANIFEST))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(),
    form_text,
    st.sampled_from(["bravo-queue", "0.5", "1e400", "-1", "16Ei", "a\x00b", "nvidia.com/gpu"]),
)
yaml_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(form_text, children, max_size=3)
    ),
    max_leaves=8,
)
# One manifest error line: a manifest path (keys are the user's, so any text), a message.
ERROR_LINE = re.compile(r"^\S.*: \S")


def _upload(client, content: bytes):
    before = _counts()
    upload = SimpleUploadedFile("job.yaml", content, content_type="application/yaml")
    response = client.post(reverse("jobs:job_upload"), {"manifest": upload})
    after = _counts()
    if response.status_code == HTTPStatus.FOUND:
        assert after[0] == before[0] + 1
        _assert_names_are_labels(Job.objects.order_by("-pk").first())
        return
    assert response.status_code == HTTPStatus.OK
    assert after == before, "a refused upload wrote rows"
    field_errors = response.context["form"].errors.get("manifest", [])
    lines = response.context["errors"]
    assert field_errors or lines, "refused without saying why"
    for line in lines:
        assert ERROR_LINE.match(line), line


@FORM_FUZZ
@given(path=st.sampled_from(MANIFEST_PATHS), value=yaml_values, delete=st.booleans())
@example(path=("spec", "tasks", 0, "name"), value="a\x00b", delete=False)
@example(path=("metadata", "name"), value=2**80, delete=False)
@example(path=("metadata", "name"), value="nl-name\n", delete=False)
@example(path=("metadata", "name"), value="ｊob", delete=False)
@example(path=("spec", "tasks", 0, "name"), value="worker\n", delete=False)
@example(
    path=("spec", "tasks", 0, "template", "spec", "containers", 0, "command"),
    value=["a\x00b"],
    delete=False,
)
@example(
    path=("spec", "tasks", 0, "template", "spec", "containers", 0, "env", 0, "value"),
    value="a\x00b",
    delete=False,
)
def test_mutated_manifest_is_stored_whole_or_refused_by_path(
    world, researcher_client, path, value, delete
):
    manifest, parent = copy_at(VALID_MANIFEST, path)
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    _upload(researcher_client, yaml.safe_dump(manifest, allow_unicode=True).encode())


@FORM_FUZZ
@given(text=st.text(max_size=300))
@example(text="spec: !!python/object/new:os.system [id]")
@example(text="a: &x [*x]")
def test_any_text_upload_is_refused_with_a_reason_or_stored(world, researcher_client, text):
    _upload(researcher_client, text.encode("utf-8", "surrogatepass"))


LIST_KEYS = ["status", "queue", "mine", "page"]


@settings(FORM_FUZZ, max_examples=30)
@given(query=st.dictionaries(st.sampled_from(LIST_KEYS), form_values, max_size=4))
@example(query={"page": "9" * 5000})
@example(query={"queue": "9" * 40})
@example(query={"page": "-1", "status": "pending"})
def test_job_list_filters_never_fail_nor_widen_the_scope(world, researcher_client, query):
    response = researcher_client.get(reverse("jobs:job_list"), query)
    assert response.status_code == HTTPStatus.OK
    assert {job.tenant_id for job in response.context["jobs"]} <= {world["alpha"].pk}


def test_a_huge_form_count_builds_at_most_the_allowed_roles(world, researcher_client):
    body = job_form_data(world["a_queue"].pk) | {"tasks-TOTAL_FORMS": "1000000"}
    response = researcher_client.post(reverse("jobs:job_submit"), body)
    assert response.status_code == HTTPStatus.OK
    formset = response.context["formset"]
    assert len(formset.forms) <= job_limits().tasks_per_job + 1
    assert formset.non_form_errors()


@settings(FORM_FUZZ, max_examples=30)
@given(
    replicas=st.lists(st.integers(min_value=1, max_value=10**7), min_size=1, max_size=20),
    gpus=st.integers(min_value=0, max_value=2**70),
)
@example(replicas=[10_000] * 20, gpus=1)  # tasks x replicas the API once took in 4 KB
@example(replicas=[1024, 1024, 1], gpus=1)  # each task within, the job one over
def test_huge_counts_through_the_form_are_refused_or_within_limits(
    world, researcher_client, replicas, gpus
):
    body = job_form_data(world["a_queue"].pk) | {"tasks-TOTAL_FORMS": str(len(replicas))}
    for index, count in enumerate(replicas):
        body |= {
            f"tasks-{index}-name": f"role-{index}",
            f"tasks-{index}-replicas": str(count),
            f"tasks-{index}-image": "trainer:1",
            f"tasks-{index}-gpus": str(gpus),
        }
    _, errors = _submit(researcher_client, body)
    limits = job_limits()
    over = (
        len(replicas) > limits.tasks_per_job
        or sum(replicas) > limits.replicas_per_job
        or max(replicas) > limits.replicas_per_task
        or gpus > limits.gpus_per_pod
    )
    assert bool(errors) == over, errors
