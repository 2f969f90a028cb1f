"""A Ray cluster as a Volcano job with the ray plugin, whole cycles on the emulated API server:
the head pod runs `ray start --head` with its three ports, each worker `ray start` at the head's
address (the svc plugin's name for head pod 0), and a Service of those ports selects the head."""

from __future__ import annotations

import pytest

from jobspec.labels import TASK
from portal.jobs.services import job_submit
from portal.tenants.models import Membership
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}


def _template(container: str) -> dict:
    return {"spec": {"containers": [
        {"name": container, "image": "rayproject/ray:2.40.0-gpu", "args": ["--verbose"],
         "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "2", "memory": "8Gi"}}},
        {"name": "log-shipper", "image": "fluent-bit:3",
         "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}},
    ]}}  # fmt: skip


@pytest.fixture
def alice(nlp):
    user = UserFactory(username="alice")
    MembershipFactory(user=user, tenant=nlp, role=Membership.Role.RESEARCHER)
    return user


def _pods(cluster, job) -> dict[str, dict]:
    found = cluster.on_loop(lambda: list(cluster.store.table("pods").values()))
    return {
        pod["metadata"]["name"]: pod
        for pod in found
        if pod["metadata"]["labels"].get("gpuportal.io/job-id") == str(job.pk)
    }


def _run(cluster, kube_cycle, alice, queue, name: str, flags: list[str], tasks: list[dict]):
    """A ray job of `tasks` submitted and one cycle run on a node with room for it."""
    cluster.add_node("gpu-a", GPU_NODE)
    job = job_submit(submitter=alice, queue=queue, name=name, tasks=tasks, plugins={"ray": flags})
    kube_cycle()
    return job


def _container(pod: dict, name: str) -> dict:
    return next(c for c in pod["spec"]["containers"] if c["name"] == name)


def test_a_ray_job_from_a_volcano_manifest_starts_its_head_and_workers(
    cluster, kube_cycle, alice, nlp_queue
):
    job = _run(cluster, kube_cycle, alice, nlp_queue, "tune", [], [
        {"name": "head", "replicas": 1, "pod_template": _template("head")},
        {"name": "worker", "replicas": 2, "pod_template": _template("worker")},
    ])  # fmt: skip

    pods = _pods(cluster, job)
    head = pods[f"{job.object_name}-head-0"]
    main = _container(head, "head")
    assert main["command"] == [
        "sh", "-c", "ray start --head --block --dashboard-host=0.0.0.0 --port=6379"
        " --dashboard-port=8265 --ray-client-server-port=10001",
    ]  # fmt: skip
    assert {(p["name"], p["containerPort"]) for p in main["ports"]} == {
        ("gcs", 6379), ("dashboard", 8265), ("client-server", 10001)
    }  # fmt: skip
    assert main["args"] == ["--verbose"]  # upstream sets the command only
    assert "command" not in _container(head, "log-shipper")  # other containers are left alone
    head_host = f"{head['spec']['hostname']}.{head['spec']['subdomain']}"
    for index in range(2):
        worker = _container(pods[f"{job.object_name}-worker-{index}"], "worker")
        assert worker["command"] == ["sh", "-c", f"ray start --block --address={head_host}:6379"]

    services = cluster.on_loop(lambda: dict(cluster.store.table("services")))
    ray = services[(NAMESPACE, f"{job.object_name}-ray")]
    selector = ray["spec"]["selector"]
    assert selector[TASK] == "head"
    assert {key: head["metadata"]["labels"].get(key) for key in selector} == selector
    assert (NAMESPACE, f"{job.object_name}") in services  # svc's headless Service: the head's name


def test_a_ray_job_given_by_its_fields_runs_ray_in_the_portals_own_container(
    cluster, kube_cycle, alice, nlp_queue
):
    job = _run(cluster, kube_cycle, alice, nlp_queue, "serve", ["--dashboardPort=8266"], [
        {"name": "head", "replicas": 1, "image": "rayproject/ray:2.40.0", "cpu_millis": 2000},
        {"name": "worker", "replicas": 1, "image": "rayproject/ray:2.40.0", "gpus": 1},
    ])  # fmt: skip

    pods = _pods(cluster, job)
    (head,) = pods[f"{job.object_name}-head-0"]["spec"]["containers"]
    assert head["command"][2].endswith("--dashboard-port=8266 --ray-client-server-port=10001")
    (worker,) = pods[f"{job.object_name}-worker-0"]["spec"]["containers"]
    assert worker["command"][2].startswith("ray start --block --address=serve-head-0.gp-")
