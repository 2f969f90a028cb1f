"""deploy/: every manifest valid against the Kubernetes schema (kubernetes-validate, offline),
and the facts the portal depends on: one solo cycle worker with the scheduler's account, one
beat, probes on the paths the app answers, requests on every container, the same command
lines as docker-compose.yml (which CI runs), and only settings the portal reads."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES_VERSION = "1.31.0"
NAMESPACE = "gpu-portal"


def kustomize(directory: Path) -> list[dict]:
    """The resources `kubectl apply -k` would send, with the kustomization's image set (the
    only transformer used here)."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    documents: list[dict] = []
    for entry in kustomization["resources"]:
        path = (directory / entry).resolve()
        assert path.is_relative_to(DEPLOY), f"{entry} is outside deploy/"
        if path.is_dir():
            documents += kustomize(path)
        else:
            documents += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    for image in kustomization.get("images", []):
        for container in containers(documents, init=True):
            if container["image"] == image["name"]:
                container["image"] = f"{image['newName']}:{image['newTag']}"
    return documents


def pod_specs(documents: list[dict]) -> list[tuple[str, dict]]:
    return [
        (doc["metadata"]["name"], doc["spec"]["template"]["spec"])
        for doc in documents
        if doc["kind"] in ("Deployment", "Job")
    ]


def containers(documents: list[dict], *, init: bool = False) -> list[dict]:
    found = []
    for _, spec in pod_specs(documents):
        found += spec["containers"] + (spec.get("initContainers", []) if init else [])
    return found


def deployments(documents: list[dict]) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in documents if doc["kind"] == "Deployment"}


@pytest.fixture(scope="module")
def documents() -> list[dict]:
    return kustomize(DEPLOY)


def manifest_files() -> list[Path]:
    return sorted(DEPLOY.rglob("*.yaml"))


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_manifest_is_valid_against_the_kubernetes_schema(path):
    for document in yaml.safe_load_all(path.read_text()):
        if document is None or document.get("kind") == "Kustomization":
            continue
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_the_kustomization_installs_every_manifest_but_the_secret(documents):
    listed = {(doc["kind"], doc["metadata"]["name"]) for doc in documents}
    assert ("Secret", "gpu-portal-secrets") not in listed
    assert {
        ("Namespace", "gpu-portal"),
        ("ServiceAccount", "gpu-portal"),
        ("ConfigMap", "gpu-portal-config"),
        ("Job", "gpu-portal-migrate"),
        ("Service", "gpu-portal-web"),
    } <= listed
    assert set(deployments(documents)) == {
        "gpu-portal-web",
        "gpu-portal-worker",
        "gpu-portal-cycle-worker",
        "gpu-portal-plan-worker",
        "gpu-portal-beat",
    }
    for doc in documents:
        if doc["kind"] in ("Role", "RoleBinding"):
            # The scheduler's write access lives in the jobs namespace only.
            assert doc["metadata"]["namespace"] == "gpu-jobs", doc["metadata"]["name"]
        elif doc["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["metadata"]["name"]
    images = {c["image"] for c in containers(documents, init=True)}
    assert images == {"registry.example.org/gpu-quota-portal:0.1.0"}


def test_one_cycle_worker_single_process_with_the_schedulers_account(documents):
    cycle = deployments(documents)["gpu-portal-cycle-worker"]
    spec = cycle["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"]["type"] == "Recreate"
    command = spec["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("-Q") + 1] == "cycle"
    assert command[command.index("--pool") + 1] == "solo"
    accounts = {
        (doc["metadata"]["namespace"], doc["metadata"]["name"])
        for doc in documents
        if doc["kind"] == "ServiceAccount"
    }
    assert (NAMESPACE, spec["template"]["spec"]["serviceAccountName"]) in accounts
    # The web reads pod logs with an account of its own; nothing else carries credentials.
    web = deployments(documents)["gpu-portal-web"]["spec"]["template"]["spec"]
    assert (NAMESPACE, web["serviceAccountName"]) in accounts
    assert web["serviceAccountName"] != spec["template"]["spec"]["serviceAccountName"]
    for name, pod in pod_specs(documents):
        if name not in ("gpu-portal-cycle-worker", "gpu-portal-web"):
            assert pod["automountServiceAccountToken"] is False, name
            assert "serviceAccountName" not in pod, name


def test_one_beat_and_the_default_queue_workers(documents):
    found = deployments(documents)
    beat = found["gpu-portal-beat"]["spec"]
    assert beat["replicas"] == 1
    assert beat["strategy"]["type"] == "Recreate"
    worker = found["gpu-portal-worker"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert worker[worker.index("-Q") + 1] == "celery"


def test_plan_ahead_runs_in_a_worker_of_its_own_without_cluster_credentials(documents):
    pod = deployments(documents)["gpu-portal-plan-worker"]["spec"]["template"]["spec"]
    command = pod["containers"][0]["command"]
    assert command[command.index("-Q") + 1] == "plan"
    assert pod["automountServiceAccountToken"] is False


def test_probes_ask_the_paths_and_ports_the_processes_answer(documents):
    found = deployments(documents)
    web = found["gpu-portal-web"]["spec"]["template"]["spec"]["containers"][0]
    assert web["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert web["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert {p["name"]: p["containerPort"] for p in web["ports"]} == {"http": 8000}
    for name in ("gpu-portal-worker", "gpu-portal-cycle-worker", "gpu-portal-plan-worker"):
        container = found[name]["spec"]["template"]["spec"]["containers"][0]
        env = {item["name"]: item["value"] for item in container["env"]}
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        assert ports["metrics"] == int(env["WORKER_METRICS_PORT"])
    cycle = found["gpu-portal-cycle-worker"]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "WORKER_HEALTH_CYCLE_SECONDS", "value": "120"} in cycle["env"]


def test_every_container_asks_for_cpu_and_memory_and_runs_locked_down(documents):
    for name, pod in pod_specs(documents):
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        for container in pod["containers"] + pod.get("initContainers", []):
            assert {"cpu", "memory"} <= container["resources"]["requests"].keys(), name
            assert "memory" in container["resources"]["limits"], name
            assert container["securityContext"]["readOnlyRootFilesystem"] is True, name
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, name


def test_the_workers_and_beat_run_the_command_lines_ci_runs_from_the_compose_file(documents):
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    compose_commands = {
        tuple(shlex.split(service["command"]))
        for service in compose.values()
        if "command" in service
    }
    found = deployments(documents)
    for name in (
        "gpu-portal-worker",
        "gpu-portal-cycle-worker",
        "gpu-portal-plan-worker",
        "gpu-portal-beat",
    ):
        command = tuple(found[name]["spec"]["template"]["spec"]["containers"][0]["command"])
        assert command in compose_commands, name
    web = found["gpu-portal-web"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert shlex.join(web) in compose["web"]["command"]


def settings_read() -> set[str]:
    """Environment variables the portal, gunicorn and prometheus_client read."""
    sources = [*(ROOT / "portal" / "settings").glob("*.py"), ROOT / "gunicorn.conf.py"]
    names = set()
    for source in sources:
        text = source.read_text()
        names |= set(re.findall(r'env(?:\.\w+)?\(\s*"([A-Z_]+)"', text))
        names |= set(re.findall(r'environ\.get\(\s*"([A-Z_]+)"', text))
    return names | {"DJANGO_SETTINGS_MODULE", "PROMETHEUS_MULTIPROC_DIR"}


def test_every_configured_variable_is_one_the_portal_reads(documents):
    known = settings_read()
    config = next(doc for doc in documents if doc["kind"] == "ConfigMap")
    secret = yaml.safe_load((DEPLOY / "portal" / "secret.example.yaml").read_text())
    names = set(config["data"]) | set(secret["stringData"])
    for container in containers(documents, init=True):
        names |= {item["name"] for item in container.get("env", [])}
    assert names - known == set()
    assert {"SECRET_KEY", "DATABASE_URL", "REDIS_URL"} <= set(secret["stringData"])
