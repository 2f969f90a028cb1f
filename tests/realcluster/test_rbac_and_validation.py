"""The real API server's RBAC and validation on what the portal does and makes: every grant of
deploy/rbac.yaml is one the server's authorizer allows the portal's ServiceAccount, calls outside
them are refused by the server, and every object the portal renders (the Volcano examples it
runs, and jobs from the form with each kind of pod-level setting) passes the server's own
validation and admission (server-side dry run, as the portal's ServiceAccount)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from jobspec.podsecurity import BASELINE, ENFORCE_LABEL, PRIVILEGED
from jobspec.volcano import documents_split
from portal.jobs.dry_run import job_render
from tests.factories import NodeFactory
from tests.realcluster.conftest import NAMESPACE, PORTAL_SA
from tests.scheduler.adapters.test_rbac_verbs import granted

EXAMPLES = Path(__file__).resolve().parents[1] / "portal" / "jobs" / "volcano_examples"
SERVICE_ACCOUNT_USER = f"system:serviceaccount:{PORTAL_SA[0]}:{PORTAL_SA[1]}"


def allowed_for_portal(admin: client.CoreV1Api, group: str, resource: str, verb: str, namespace):
    resource, _, subresource = resource.partition("/")
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=SERVICE_ACCOUNT_USER,
            groups=["system:serviceaccounts", f"system:serviceaccounts:{PORTAL_SA[0]}"],
            resource_attributes=client.V1ResourceAttributes(
                group=group,
                resource=resource,
                subresource=subresource or None,
                verb=verb,
                namespace=namespace,
            ),
        )
    )
    answer = client.AuthorizationV1Api(admin.api_client).create_subject_access_review(review)
    return answer.status.allowed


def test_every_grant_of_deploy_rbac_is_allowed_by_the_servers_authorizer(admin, portal_rbac):
    grants = granted()
    assert grants, "deploy/rbac.yaml grants the portal nothing?"
    refused = [grant for grant in sorted(grants, key=str) if not allowed_for_portal(admin, *grant)]
    assert refused == []


@pytest.mark.parametrize(
    ("what", "call"),
    [
        ("get a Secret", lambda api: api.read_namespaced_secret("anything", NAMESPACE)),
        ("list the jobs namespace's Secrets", lambda api: api.list_namespaced_secret(NAMESPACE)),
        ("patch a node", lambda api: api.patch_node("anything", {"metadata": {"labels": {"a": "b"}}})),
        ("list Secrets cluster-wide", lambda api: api.list_secret_for_all_namespaces()),
        ("delete a pod outside the jobs namespace", lambda api: api.delete_namespaced_pod("x", "default")),
        ("create a pod outside the jobs namespace",
         lambda api: api.create_namespaced_pod("default", {"metadata": {"name": "x"},
                                                           "spec": {"containers": [{"name": "c", "image": "x"}]}})),
        ("delete a node", lambda api: api.delete_node("anything")),
    ],
)  # fmt: skip
def test_calls_outside_the_grants_are_refused_by_the_server(portal_api, what, call):
    with pytest.raises(ApiException) as refused:
        call(portal_api)
    assert refused.value.status == 403, what


def rendered_examples() -> list[tuple[str, dict[str, Any]]]:
    """(example file, object) for each object the portal renders from the Volcano examples it
    runs (the ones it refuses are test_render's business)."""
    rendered = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
        for _, data in documents_split(documents).jobs:
            result = job_render(data, namespace=NAMESPACE)
            rendered += [(str(path.relative_to(EXAMPLES)), obj) for obj in result.objects]
    return rendered


FORM_JOBS = {
    "plain": {},
    "gpu share": {"limits": {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-cores": 25}},
    "gpu memory": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10240}},
    "tolerations": {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    },
    "env and command": {"env": {"EPOCHS": "3"}, "command": ["python", "train.py"]},
}


def form_manifest(name: str, extra: dict[str, Any]) -> dict[str, Any]:
    """A one-task Volcano Job as the form would build it, with `extra` pod settings."""
    container: dict[str, Any] = {
        "name": "main",
        "image": "ghcr.io/example/train:1",
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    spec: dict[str, Any] = {"containers": [container]}
    if "limits" in extra:
        container["resources"] = {"limits": extra["limits"]}
    if "tolerations" in extra:
        spec["tolerations"] = extra["tolerations"]
    if "env" in extra:
        container["env"] = [{"name": k, "value": v} for k, v in extra["env"].items()]
    if "command" in extra:
        container["command"] = extra["command"]
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name.replace(" ", "-")},
        "spec": {
            "queue": "default",
            "minAvailable": 2,
            "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": spec}}],
        },
    }


def dry_run_create(api_client: client.ApiClient, obj: dict[str, Any]) -> None:
    kind, namespace = obj["kind"], obj["metadata"].get("namespace") or NAMESPACE
    core = client.CoreV1Api(api_client)
    creators = {
        "Pod": core.create_namespaced_pod,
        "Service": core.create_namespaced_service,
        "ConfigMap": core.create_namespaced_config_map,
        "Secret": core.create_namespaced_secret,
        "NetworkPolicy": client.NetworkingV1Api(api_client).create_namespaced_network_policy,
    }
    creators[kind](namespace, obj, dry_run="All")


@pytest.fixture
def example_priority_classes(admin_client: client.ApiClient) -> Iterator[None]:
    """The PriorityClasses written beside a Job in an example file (the priority-class
    guide's), created as the cluster admin whose object they are: the server's Priority
    admission refuses a pod that names a class it does not know."""
    scheduling = client.SchedulingV1Api(admin_client)
    created = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
        if not documents_split(documents).jobs:
            continue
        for doc in documents:
            if doc.get("kind") == "PriorityClass":
                scheduling.create_priority_class(doc)
                created.append(doc["metadata"]["name"])
    try:
        yield
    finally:
        for name in created:
            scheduling.delete_priority_class(name)


def test_every_object_rendered_from_the_volcano_examples_passes_the_servers_validation(
    portal_api, example_priority_classes
):
    rendered = rendered_examples()
    assert len({name for name, _ in rendered}) >= 6, "most examples should render"
    refused = {}
    for name, obj in rendered:
        try:
            dry_run_create(portal_api.api_client, obj)
        except ApiException as error:
            refused[f"{name}: {obj['kind']} {obj['metadata']['name']}"] = error.body
    assert refused == {}


@pytest.mark.django_db  # a GPU-memory request is turned into a share of the known cards
@pytest.mark.parametrize("label", sorted(FORM_JOBS))
def test_form_jobs_pods_pass_the_servers_validation(portal_api, label):
    NodeFactory(gpu_memory_mib=40960)  # a card whose memory a GPU-memory request is measured by
    result = job_render(form_manifest(label, FORM_JOBS[label]), namespace=NAMESPACE)
    assert result.errors == {}, result.errors
    assert result.objects
    for obj in result.objects:
        dry_run_create(portal_api.api_client, obj)


def test_the_jobs_namespace_enforces_the_baseline_pod_security_level(admin, portal_rbac):
    labels = admin.read_namespace(NAMESPACE).metadata.labels or {}
    assert labels.get(ENFORCE_LABEL) == BASELINE


PRIVILEGED_POD_SETTINGS = {
    "privileged container": {"privileged": True},
    "SYS_ADMIN": {"capabilities": {"add": ["SYS_ADMIN"]}},
}


@pytest.mark.parametrize("label", sorted(PRIVILEGED_POD_SETTINGS))
def test_a_pod_the_portal_let_through_is_refused_by_pod_security_admission(portal_api, label):
    """The second line: a pod the portal's own check passed (here rendered at level
    privileged, as if the check had been bypassed) is refused by the API server in a
    namespace labelled baseline, as the portal's portal.jobs checks refuse it at submit."""
    manifest = form_manifest(label.replace(" ", "-").replace("_", "-").lower(), {})
    container = manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    container["securityContext"] = PRIVILEGED_POD_SETTINGS[label]
    assert job_render(manifest, namespace=NAMESPACE).errors, "the portal refuses it itself"
    result = job_render(manifest, namespace=NAMESPACE, security_level=PRIVILEGED)
    assert result.errors == {}, result.errors
    pods = [obj for obj in result.objects if obj["kind"] == "Pod"]
    assert pods
    with pytest.raises(ApiException) as refused:
        dry_run_create(portal_api.api_client, pods[0])
    assert refused.value.status == 403
    message = json.loads(refused.value.body)["message"]
    assert 'violates PodSecurity "baseline:latest"' in message, message
