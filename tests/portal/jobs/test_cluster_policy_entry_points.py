"""A hostile researcher's pod template through every entry point: the API (a Volcano manifest as
JSON and as YAML), the YAML upload page, the submit form's YAML pane, the dry-run render (its API
and `python -m portal.jobs.render`); the CLI's `submit -f` is in tests/portal/cli/test_cli.py.
Each refuses it with a 400 (or the page's errors), the error keyed by the field at fault and
naming the rule, and writes nothing. The rules are jobspec's (podsecurity, tenancy, podtemplate);
what is checked here is that every way in reaches them with the tenant's policy."""

import copy
import io
from collections.abc import Callable
from http import HTTPStatus

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from jobspec.names import STR_NUL
from portal.jobs.models import Job, JobTask
from portal.jobs.render import main as render_main
from tests.portal.common.pages import job_form_data

pytestmark = pytest.mark.django_db

TASK = "spec.tasks[0].template."
Spec = dict


def _caps(spec: Spec) -> None:
    spec["containers"][0]["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN", "ALL"]}}


def _privileged(spec: Spec) -> None:
    spec["containers"][0]["securityContext"] = {"privileged": True}


def _host_network(spec: Spec) -> None:
    spec["hostNetwork"] = True


def _host_path(spec: Spec) -> None:
    spec["volumes"] = [{"name": "root", "hostPath": {"path": "/"}}]


def _tolerate_all(spec: Spec) -> None:
    spec["tolerations"] = [{"operator": "Exists"}]


def _control_plane(spec: Spec) -> None:
    spec["tolerations"] = [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
    ]


def _node_name(spec: Spec) -> None:
    spec["nodeName"] = "control-plane-1"


def _system_priority(spec: Spec) -> None:
    spec["priorityClassName"] = "system-node-critical"


def _portal_secret(spec: Spec) -> None:
    spec["volumes"] = [{"name": "keys", "secret": {"secretName": "gp-3-ssh"}}]


def _other_tenants_claim(spec: Spec) -> None:
    spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "vision-data"}}]


def _other_tenants_pull_secret(spec: Spec) -> None:
    spec["imagePullSecrets"] = [{"name": "vision-registry"}]


def _other_tenants_env_secret(spec: Spec) -> None:
    spec["containers"][0]["envFrom"] = [{"secretRef": {"name": "vision-env"}}]


def _device_annotation(template: dict) -> None:
    template["metadata"] = {"annotations": {"hami.io/vgpu-devices-to-allocate": "GPU-0,1000"}}


def _apparmor_unconfined(template: dict) -> None:
    key = "container.apparmor.security.beta.kubernetes.io/trainer"
    template["metadata"] = {"annotations": {key: "unconfined"}}


def _spec(change: Callable[[Spec], None]) -> Callable[[dict], None]:
    return lambda template: change(template["spec"])


# (what the template does, the path of the field at fault under the template, a fragment of
# the message that names the rule)
HOSTILE = {
    "capabilities": (
        _spec(_caps),
        "spec.containers[0].securityContext.capabilities.add",
        "may not add ALL, SYS_ADMIN",
    ),
    "privileged": (
        _spec(_privileged),
        "spec.containers[0].securityContext.privileged",
        "may not be true at pod security level baseline",
    ),
    "hostNetwork": (_spec(_host_network), "spec.hostNetwork", "never share the node's network"),
    "hostPath": (_spec(_host_path), "spec.volumes[0].hostPath", "hostPath volumes are not allowed"),
    "tolerate everything": (
        _spec(_tolerate_all),
        "spec.tolerations",
        "tolerates every taint (operator Exists without a key), a control-plane node's too",
    ),
    "control-plane taint": (
        _spec(_control_plane),
        "spec.tolerations",
        "node-role.kubernetes.io/control-plane: not among the taints tenant nlp's jobs may",
    ),
    "nodeName": (_spec(_node_name), "spec.nodeName", "the portal's scheduler chooses the node"),
    "system priority class": (
        _spec(_system_priority),
        "spec.priorityClassName",
        "system-node-critical is reserved for the cluster's own pods",
    ),
    "the portal's ssh Secret": (
        _spec(_portal_secret),
        "spec.volumes[0].secret.secretName",
        "gp-3-ssh is one of the portal's own objects",
    ),
    "another tenant's claim": (
        _spec(_other_tenants_claim),
        "spec.volumes[0].persistentVolumeClaim.claimName",
        "vision-data is not tenant nlp's",
    ),
    "another tenant's pull secret": (
        _spec(_other_tenants_pull_secret),
        "spec.imagePullSecrets[0].name",
        "vision-registry is not tenant nlp's",
    ),
    "another tenant's env Secret": (
        _spec(_other_tenants_env_secret),
        "spec.containers[0].envFrom[0].secretRef.name",
        "vision-env is not tenant nlp's",
    ),
    "device-assignment annotation": (
        _device_annotation,
        "metadata.annotations.hami.io/vgpu-devices-to-allocate",
        "keys under hami.io are the portal's and the GPU sharing stack's own",
    ),
    "apparmor unconfined": (
        _apparmor_unconfined,
        "metadata.annotations.container.apparmor.security.beta.kubernetes.io/trainer",
        "may not be unconfined at pod security level baseline",
    ),
}
CASES = pytest.mark.parametrize(("change", "path", "rule"), HOSTILE.values(), ids=list(HOSTILE))


def _template() -> dict:
    return {"spec": {"containers": [{"name": "trainer", "image": "trainer:1"}]}}


def _manifest(change: Callable[[dict], None]) -> dict:
    template = _template()
    change(template)
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "evil"},
        "spec": {
            "queue": "nlp-train",
            "tasks": [{"name": "worker", "replicas": 1, "template": template}],
        },
    }


def _refused(errors: dict, path: str, rule: str) -> None:
    assert path in errors, errors
    assert any(rule in message for message in errors[path]), errors[path]


def _nothing_stored() -> None:
    assert (Job.objects.count(), JobTask.objects.count()) == (0, 0)


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.force_authenticate(researcher)
    return client


@CASES
def test_the_api_refuses_it_as_json(api, nlp_queue, vision_queue, change, path, rule):
    response = api.post("/api/v1/jobs/", _manifest(change), format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    _refused(response.json()["errors"], TASK + path, rule)
    _nothing_stored()


@CASES
def test_the_api_refuses_it_as_yaml(api, nlp_queue, vision_queue, change, path, rule):
    text = yaml.safe_dump(_manifest(change))
    response = api.post("/api/v1/jobs/", text, content_type="application/yaml")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    _refused(response.json()["errors"], TASK + path, rule)
    _nothing_stored()


@CASES
def test_the_upload_page_refuses_it(researcher_client, nlp_queue, vision_queue, change, path, rule):
    text = yaml.safe_dump(_manifest(change)).encode()
    upload = SimpleUploadedFile("job.yaml", text, content_type="application/yaml")
    response = researcher_client.post(reverse("jobs:job_upload"), {"manifest": upload})
    assert response.status_code == HTTPStatus.OK
    assert any(
        line.startswith(f"{TASK}{path}: ") and rule in line for line in response.context["errors"]
    ), response.context["errors"]
    _nothing_stored()


@CASES
def test_the_forms_yaml_pane_refuses_it(
    researcher_client, nlp_queue, vision_queue, change, path, rule
):
    template = _template()
    change(template)
    data = job_form_data(nlp_queue.pk, **{"tasks-0-pod_template": yaml.safe_dump(template)})
    response = researcher_client.post(reverse("jobs:job_submit"), data)
    assert response.status_code == HTTPStatus.OK
    errors = response.context["formset"].forms[0].errors["pod_template"]
    assert any(line.startswith(f"{path}: ") and rule in line for line in errors), errors
    _nothing_stored()


@CASES
def test_the_render_api_refuses_it(api, nlp_queue, vision_queue, change, path, rule):
    response = api.post("/api/v1/jobs/render/", _manifest(change), format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    _refused(response.json()["errors"], TASK + path, rule)


@CASES
def test_the_render_cli_refuses_it(tmp_path, change, path, rule):
    manifest = tmp_path / "evil.yaml"
    manifest.write_text(yaml.safe_dump(_manifest(change)))
    out, err = io.StringIO(), io.StringIO()
    assert render_main([str(manifest), "--tenant", "nlp"], out=out, err=err) == 1
    assert out.getvalue() == ""
    assert any(
        line.startswith(f"{TASK}{path}: ") and rule in line for line in err.getvalue().splitlines()
    ), err.getvalue()


def test_a_tasks_own_tolerations_are_held_to_the_same_list(api, nlp_queue):
    """The API's plain task shape (no template) has a `tolerations` field of its own."""
    task = {
        "name": "w",
        "replicas": 1,
        "image": "trainer:1",
        "tolerations": [{"operator": "Exists"}],
    }
    response = api.post(
        "/api/v1/jobs/", {"queue": "nlp-train", "name": "evil", "tasks": [task]}, format="json"
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "tolerates every taint" in response.json()["errors"]["tasks[0].tolerations"][0]
    _nothing_stored()


def _as_root(template: dict) -> None:
    template["spec"]["containers"][0]["securityContext"] = {
        "runAsUser": 0,
        "allowPrivilegeEscalation": True,
    }


def test_root_and_escalation_pass_at_baseline_and_are_refused_at_restricted(api, nlp, nlp_queue):
    """As Kubernetes' baseline: root and privilege escalation are restricted's to refuse."""
    response = api.post("/api/v1/jobs/", _manifest(_as_root), format="json")
    assert response.status_code == HTTPStatus.CREATED, response.json()
    nlp.security_level = "restricted"
    nlp.save()
    response = api.post("/api/v1/jobs/", _manifest(_as_root), format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    errors = response.json()["errors"]
    context = TASK + "spec.containers[0].securityContext."
    _refused(errors, context + "runAsUser", "may not be 0 (root) at pod security level restricted")
    _refused(errors, context + "allowPrivilegeEscalation", "pod security level restricted")
    assert Job.objects.count() == 1


def test_rendered_pods_get_the_levels_defaults(api, nlp, nlp_queue):
    """No service-account token and seccomp RuntimeDefault at every level but privileged;
    restricted adds non-root and every capability dropped."""
    manifest = _manifest(lambda template: None)
    pod = _rendered_pod(api, manifest)
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    nlp.security_level = "restricted"
    nlp.save()
    pod = _rendered_pod(api, manifest)
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    container = pod["spec"]["containers"][0]["securityContext"]
    assert container["capabilities"]["drop"] == ["ALL"]
    assert container["allowPrivilegeEscalation"] is False


def _rendered_pod(api, manifest: dict) -> dict:
    response = api.post("/api/v1/jobs/render/", manifest, format="json")
    assert response.status_code == HTTPStatus.OK, response.json()
    (pod,) = [o for o in response.json()["objects"] if o["kind"] == "Pod"]
    return pod


@override_settings(KUBERNETES_NAMESPACE_PER_TENANT=True, KUBERNETES_NAMESPACE_PREFIX="gpu-")
def test_in_its_own_namespace_a_tenant_names_its_objects_freely_but_not_the_portals(api, nlp_queue):
    response = api.post("/api/v1/jobs/", _manifest(_spec(_other_tenants_claim)), format="json")
    assert response.status_code == HTTPStatus.CREATED, response.json()
    response = api.post("/api/v1/jobs/", _manifest(_spec(_portal_secret)), format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    _refused(response.json()["errors"], TASK + "spec.volumes[0].secret.secretName", "gp-3-ssh")


def test_what_an_admin_lists_for_the_tenant_or_its_queue_is_allowed(api, nlp, nlp_queue):
    control_plane = _manifest(_spec(_control_plane))
    priority = _manifest(lambda template: template["spec"].update(priorityClassName="urgent"))
    assert api.post("/api/v1/jobs/", control_plane, format="json").status_code == 400
    nlp_queue.allowed_tolerations = [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}
    ]
    nlp_queue.save()
    response = api.post("/api/v1/jobs/", control_plane, format="json")
    assert response.status_code == HTTPStatus.CREATED, response.json()
    # Any class but system-* with no list; only those listed once there is one.
    assert api.post("/api/v1/jobs/", priority, format="json").status_code == HTTPStatus.CREATED
    nlp.allowed_priority_classes = ["batch-low"]
    nlp.save()
    response = api.post("/api/v1/jobs/", priority, format="json")
    _refused(
        response.json()["errors"],
        TASK + "spec.priorityClassName",
        "urgent is not among the priority classes tenant nlp's jobs may use (batch-low)",
    )


def test_a_manifest_with_nul_is_400_naming_the_field(api, nlp_queue):
    manifest = copy.deepcopy(_manifest(lambda template: None))
    manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["args"] = ["a\x00b"]
    response = api.post("/api/v1/jobs/", manifest, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["errors"] == {
        f"{TASK}spec.containers[0].args[0]": [STR_NUL],
    }
    _nothing_stored()
