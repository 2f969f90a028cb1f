"""A task's pod template through the API: as JSON (`pod_template`) and in a Volcano manifest.
Bad input is a 400 naming the field, and nothing is written."""

import copy
from http import HTTPStatus

import pytest
import yaml
from django.test import override_settings
from rest_framework.test import APIClient

from portal.jobs.models import TASK_DEFAULT_CPU_MILLIS, TASK_DEFAULT_MEMORY_BYTES, Job, JobTask
from portal.tenants.models import Tenant

pytestmark = pytest.mark.django_db

T0 = "spec.tasks[0].template.spec"
MANIFEST = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "ddp"},
    "spec": {
        "queue": "nlp-train",
        "tasks": [
            {
                "name": "worker",
                "replicas": 2,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "trainer",
                                "image": "trainer:1",
                                "args": ["--epochs", "3"],
                                "env": [
                                    {
                                        "name": "HF_TOKEN",
                                        "valueFrom": {
                                            "secretKeyRef": {"name": "nlp-hf", "key": "token"}
                                        },
                                    }
                                ],
                                "resources": {"limits": {"nvidia.com/gpu": 2, "cpu": "4"}},
                                "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
                            },
                            {"name": "sidecar", "image": "exporter:1"},
                        ],
                        "volumes": [
                            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}
                        ],
                    }
                },
            }
        ],
    },
}


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.force_authenticate(researcher)
    return client


def _post_manifest(api, manifest):
    return api.post("/api/v1/jobs/", yaml.safe_dump(manifest), content_type="application/yaml")


def _rows():
    return Job.objects.count(), JobTask.objects.count()


def test_a_manifest_with_sidecars_and_volumes_is_stored_whole(api, nlp_queue):
    response = _post_manifest(api, MANIFEST)
    assert response.status_code == HTTPStatus.CREATED, response.json()
    task = JobTask.objects.get()
    containers = task.pod_template["spec"]["containers"]
    assert [c["name"] for c in containers] == ["trainer", "sidecar"]
    # The secret is a reference in the database, never its value.
    assert (
        containers[0]["env"]
        == MANIFEST["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["env"]
    )
    assert (task.image, task.command, task.gpus, task.cpu_millis) == (
        "trainer:1",
        ["--epochs", "3"],
        2,
        4000,
    )
    assert response.json()["tasks"][0]["pod_template"] == task.pod_template


def test_the_json_api_takes_a_pod_template(api, nlp_queue):
    template = MANIFEST["spec"]["tasks"][0]["template"]
    body = {
        "queue": "nlp-train",
        "name": "ddp",
        "tasks": [{"name": "worker", "replicas": 1, "pod_template": template}],
    }
    response = api.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == HTTPStatus.CREATED, response.json()
    assert JobTask.objects.get().gpus == 2


def test_the_json_api_refuses_fields_beside_a_template(api, nlp_queue):
    template = MANIFEST["spec"]["tasks"][0]["template"]
    body = {
        "queue": "nlp-train",
        "name": "ddp",
        "tasks": [{"name": "w", "replicas": 1, "gpus": 8, "pod_template": template}],
    }
    response = api.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "tasks[0].gpus" in response.json()["errors"]
    assert _rows() == (0, 0)


def _bad(mutate):
    manifest = copy.deepcopy(MANIFEST)
    mutate(manifest["spec"]["tasks"][0]["template"]["spec"])
    return manifest


def _hundred_containers(spec):
    spec["containers"] = [{"name": f"c{i}", "image": "x"} for i in range(100)]


def _megabyte_env(spec):
    spec["containers"][0]["env"].append({"name": "BIG", "value": "x" * 2**20})


def _host_path(spec):
    spec["volumes"].append({"name": "node", "hostPath": {"path": "/var/lib"}})


def _undeclared_mount(spec):
    spec["containers"][0]["volumeMounts"].append({"name": "data", "mountPath": "/data"})


def _negative_size(spec):
    spec["volumes"][0]["emptyDir"]["sizeLimit"] = "-8Gi"


def _other_namespace(spec):
    spec["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["namespace"] = "kube-system"


def _preferred_affinity(spec):
    term = {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}
    spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (_hundred_containers, f"{T0}.containers"),
        (
            _preferred_affinity,
            f"{T0}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        ),
        (_host_path, f"{T0}.volumes[1].hostPath"),
        (_undeclared_mount, f"{T0}.containers[0].volumeMounts[1].name"),
        (_negative_size, f"{T0}.volumes[0].emptyDir.sizeLimit"),
        (_other_namespace, f"{T0}.containers[0].env[0].valueFrom.secretKeyRef.namespace"),
    ],
    ids=[
        "100-containers",
        "preferred-affinity",
        "hostPath",
        "undeclared-mount",
        "negative-size",
        "other-namespace",
    ],  # fmt: skip
)
def test_bad_templates_are_a_400_naming_the_field_and_nothing_is_written(
    api, nlp_queue, mutate, path
):
    response = _post_manifest(api, _bad(mutate))
    assert response.status_code == HTTPStatus.BAD_REQUEST
    errors = response.json()["errors"]
    assert path in errors, errors
    assert _rows() == (0, 0)


@override_settings(JOB_ALLOW_HOST_PATH=True)
def test_host_path_is_taken_when_an_admin_allows_it_for_a_privileged_tenant(api, nlp_queue):
    refused = _post_manifest(api, _bad(_host_path))
    assert refused.status_code == HTTPStatus.BAD_REQUEST
    message = refused.json()["errors"][f"{T0}.volumes[1].hostPath"][0]
    assert "pod security level baseline" in message
    Tenant.objects.filter(pk=nlp_queue.tenant_id).update(security_level="privileged")
    response = _post_manifest(api, _bad(_host_path))
    assert response.status_code == HTTPStatus.CREATED, response.json()
    volumes = JobTask.objects.get().pod_template["spec"]["volumes"]
    assert volumes[1] == {"name": "node", "hostPath": {"path": "/var/lib"}}


@override_settings(API_MAX_BODY_BYTES=4 * 2**20)
def test_a_1mb_env_value_is_a_400_naming_the_env_of_its_container(api, nlp_queue):
    response = _post_manifest(api, _bad(_megabyte_env))
    assert response.status_code == HTTPStatus.BAD_REQUEST
    messages = response.json()["errors"][f"{T0}.containers[0].env"]
    assert any("JOB_MAX_ENV_CHARS" in message for message in messages)
    assert _rows() == (0, 0)


def test_a_1mb_env_value_is_past_the_default_body_limit_before_any_parsing(api, nlp_queue):
    assert (
        _post_manifest(api, _bad(_megabyte_env)).status_code == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    )
    assert _rows() == (0, 0)


def test_a_template_that_states_no_cpu_or_memory_asks_the_pod_for_the_default(api, nlp_queue):
    manifest = copy.deepcopy(MANIFEST)
    manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 1}
    }
    assert _post_manifest(api, manifest).status_code == HTTPStatus.CREATED
    task = JobTask.objects.get()
    assert (task.cpu_millis, task.memory_bytes) == (
        TASK_DEFAULT_CPU_MILLIS,
        TASK_DEFAULT_MEMORY_BYTES,
    )
    # the pod asks the kubelet for what the scheduler counts
    requests = task.pod_template["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {
        "cpu": f"{TASK_DEFAULT_CPU_MILLIS}m",
        "memory": str(TASK_DEFAULT_MEMORY_BYTES),
    }


def test_one_answer_names_the_template_and_plugin_faults_alike(api, nlp_queue):
    manifest = _bad(_negative_size)
    manifest["spec"]["plugins"] = {"mpi": []}
    manifest["spec"]["policies"] = [{"event": "PodFailed", "action": "Resume"}]
    errors = _post_manifest(api, manifest).json()["errors"]
    assert {
        f"{T0}.volumes[0].emptyDir.sizeLimit",
        "spec.plugins.mpi",
        "spec.policies[0].action",
    } <= set(errors)
    assert _rows() == (0, 0)


@pytest.mark.parametrize("ttl", [-5, "soon", 10**9])
def test_a_bad_ttl_seconds_after_finished_is_a_400_naming_it(api, nlp_queue, ttl):
    manifest = copy.deepcopy(MANIFEST)
    manifest["spec"]["ttlSecondsAfterFinished"] = ttl
    response = _post_manifest(api, manifest)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "spec.ttlSecondsAfterFinished" in response.json()["errors"], response.json()
    assert _rows() == (0, 0)


def test_ttl_seconds_after_finished_is_stored_and_shown(api, nlp_queue):
    manifest = copy.deepcopy(MANIFEST)
    manifest["spec"]["ttlSecondsAfterFinished"] = 600
    response = _post_manifest(api, manifest)
    assert response.status_code == HTTPStatus.CREATED, response.json()
    assert response.json()["ttl_seconds_after_finished"] == 600
    assert Job.objects.get().ttl_seconds_after_finished == 600
