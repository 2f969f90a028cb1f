"""Pod logs on Kubernetes through the official client against the emulated API server: the
backend's pod_log, and GET /api/v1/jobs/{id}/logs/ end to end (settings.CLUSTER_BACKEND set to
kubernetes, KUBECONFIG pointing at the emulator, as the web process reads it)."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from rest_framework.test import APIClient

from jobspec.labels import replica_labels
from jobspec.pods import DesiredPod
from portal.cluster.models import Placement
from portal.jobs.models import Job
from scheduler.adapters.cluster.testing.emulator import write_kubeconfig
from tests.scheduler.conftest import submit_job

NAMESPACE = "gpu-jobs"
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}


def desired(name: str, *, image: str = "trainer:1", command=("sleep", "600")) -> DesiredPod:
    return DesiredPod(
        name=name,
        namespace=NAMESPACE,
        node_name="gpu-a",
        image=image,
        command=list(command),
        env={},
        requests={"cpu": 1000},
        labels=replica_labels(job_id=7, task="worker", replica=0, queue="q", tenant="t"),
        annotations={},
    )


@pytest.fixture
def node(cluster):
    cluster.add_node("gpu-a", GPU_NODE)
    return "gpu-a"


def started(cluster, backend, pod: DesiredPod) -> str:
    backend.create_pod(pod)
    backend.bind_pod(pod.name, NAMESPACE, "gpu-a")
    cluster.advance(1)
    return pod.name


def test_the_last_lines_of_a_running_pods_main_container(cluster, backend, node):
    name = started(cluster, backend, desired("gp-7-worker-0"))
    cluster.write_log(NAMESPACE, name, [f"epoch {index}" for index in range(10)])

    log = backend.pod_log(name, NAMESPACE, tail=3)

    assert log.lines == ["epoch 7", "epoch 8", "epoch 9"]
    assert (log.phase, log.exit_code) == ("Running", None)


def test_a_failed_pods_log_and_exit_code(cluster, backend, node):
    name = started(cluster, backend, desired("gp-7-worker-0"))
    cluster.write_log(NAMESPACE, name, ["loading", "CUDA error: out of memory"])
    cluster.finish_pod(NAMESPACE, name, exit_code=1)

    log = backend.pod_log(name, NAMESPACE, tail=200)

    assert log.lines == ["loading", "CUDA error: out of memory"]
    assert (log.phase, log.exit_code) == ("Failed", 1)


def test_a_pod_not_started_has_no_log_yet_and_says_why(cluster, backend, node):
    backend.create_pod(desired("gp-7-worker-0"))  # created, not bound yet

    log = backend.pod_log("gp-7-worker-0", NAMESPACE, tail=10)

    assert log.lines == []
    assert log.phase == "Pending"
    assert log.reason == "pod gp-7-worker-0 does not have a host assigned"


def test_a_pod_whose_image_cannot_be_pulled_has_no_log_and_its_waiting_reason(
    cluster, backend, node
):
    cluster.fail_image_pull("missing:1")
    name = started(cluster, backend, desired("gp-7-worker-0", image="missing:1"))

    log = backend.pod_log(name, NAMESPACE, tail=10)

    assert log.lines == []
    assert log.phase == "Pending"
    assert "ErrImagePull" in log.reason


def test_a_pod_that_is_gone_has_no_log(cluster, backend, node):
    log = backend.pod_log("gp-7-worker-0", NAMESPACE, tail=10)
    assert (log.lines, log.phase) == ([], None)


@pytest.mark.django_db
def test_the_job_logs_api_reads_the_pods_log_from_kubernetes(
    cluster, kube_cycle, researcher, nlp_queue, node, settings, tmp_path, monkeypatch
):
    job = submit_job(researcher, nlp_queue, "train", gpus=4)
    kube_cycle()
    cluster.advance(1)
    kube_cycle()
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    (pod,) = Placement.objects.filter(job=job).values_list("pod_name", flat=True)
    cluster.write_log(NAMESPACE, pod, ["step 1 loss 2.31", "step 2 loss 1.97", "step 3 loss 1.64"])
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, cluster.url)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    settings.CLUSTER_BACKEND = "kubernetes"
    api = APIClient()
    api.force_authenticate(researcher)

    response = api.get(f"/api/v1/jobs/{job.pk}/logs/?tail=2")

    assert response.status_code == HTTPStatus.OK, response.json()
    body = response.json()
    assert (body["pod"], body["phase"], body["exit_code"]) == (pod, "Running", None)
    assert body["lines"] == ["step 2 loss 1.97", "step 3 loss 1.64"]

    cluster.finish_pod(NAMESPACE, pod, exit_code=137)
    body = api.get(f"/api/v1/jobs/{job.pk}/logs/?tail=1").json()
    assert (body["phase"], body["exit_code"], body["lines"]) == (
        "Failed",
        137,
        ["step 3 loss 1.64"],
    )


@pytest.mark.django_db
def test_the_job_logs_api_says_503_when_the_api_server_is_unreachable(
    researcher, nlp_queue, settings, tmp_path, monkeypatch
):
    from tests.factories import JobFactory, PlacementFactory

    job = JobFactory(queue=nlp_queue, tenant=nlp_queue.tenant, submitter=researcher)
    PlacementFactory(task__job=job, pod_name=f"{job.object_name}-worker-0")
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    settings.CLUSTER_BACKEND = "kubernetes"
    api = APIClient()
    api.force_authenticate(researcher)

    response = api.get(f"/api/v1/jobs/{job.pk}/logs/")

    assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
