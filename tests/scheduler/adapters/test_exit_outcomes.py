"""Each pod's exit code and reason are recorded on its placement when it is seen finished, on
the simulated backend and from a Kubernetes pod's status, and stay on the job page and in the
API after the pods are deleted."""

from datetime import UTC, datetime, timedelta
from http import HTTPStatus

import pytest
from django.test import override_settings
from kubernetes import client as k8s

from portal.cluster.models import Placement, SimulatedPod
from portal.jobs.services import job_submit
from scheduler.adapters.cluster.manifests import observed_pod_from
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.observe import cluster_observe
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import NodeFactory

pytestmark = pytest.mark.django_db
START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _job(user, queue, replicas=2):
    task = {"name": "worker", "replicas": replicas, "image": "t:1", "gpus": 1, "cpu_millis": 1000}
    return job_submit(submitter=user, queue=queue, name="ddp", tasks=[task])


def _cycles(clock, backend, count):
    for _ in range(count):
        scheduling_cycle_run(backend=backend, now=lambda: clock[0])
        clock[0] += timedelta(seconds=5)


@override_settings(FINISHED_POD_RETENTION_SECONDS=0)
def test_a_failed_jobs_exit_codes_outlive_its_pods(researcher, nlp_queue, client):
    NodeFactory(name="gpu-worker-1")
    clock = [START]
    backend = SimulatedBackend(default_run_seconds=600, now=lambda: clock[0])
    job = _job(researcher, nlp_queue)
    _cycles(clock, backend, 2)
    first, second = SimulatedPod.objects.order_by("name")
    first.phase, first.exit_code, first.reason = "Failed", 137, "OOMKilled"
    first.save()
    second.phase, second.exit_code = "Succeeded", 0
    second.save()
    _cycles(clock, backend, 2)

    assert not SimulatedPod.objects.exists()  # deleted: no retention
    outcomes = {p.pod_name: (p.state, p.exit_code, p.exit_reason) for p in Placement.objects.all()}
    assert outcomes == {
        first.name: ("failed", 137, "OOMKilled"),
        second.name: ("succeeded", 0, "Completed"),
    }

    client.force_login(researcher)
    response = client.get(f"/api/v1/jobs/{job.id}/")
    assert response.status_code == HTTPStatus.OK
    ended = {
        pod["pod"]: (pod["exit_code"], pod["exit_reason"]) for pod in response.json()["ended_pods"]
    }
    assert ended == {first.name: (137, "OOMKilled"), second.name: (0, "Completed")}
    page = client.get(f"/jobs/{job.id}/").content.decode()
    assert "exit code 137 (OOMKilled)" in page
    assert "exit code 0 (Completed)" in page


def _k8s_pod(name, *, phase, pod_reason=None, terminated=None):
    statuses = None
    if terminated is not None:
        code, reason = terminated
        state = k8s.V1ContainerState(
            terminated=k8s.V1ContainerStateTerminated(exit_code=code, reason=reason)
        )
        statuses = [
            k8s.V1ContainerStatus(
                name="trainer", state=state, image="t:1", image_id="", ready=False,
                restart_count=0,
            )
        ]  # fmt: skip
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name, namespace="gpu-jobs", labels={}),
        spec=k8s.V1PodSpec(node_name="gpu-worker-1", containers=[]),
        status=k8s.V1PodStatus(phase=phase, reason=pod_reason, container_statuses=statuses),
    )


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        ({"phase": "Failed", "terminated": (137, "OOMKilled")}, ("failed", 137, "OOMKilled")),
        ({"phase": "Failed", "terminated": (1, "Error")}, ("failed", 1, "Error")),
        ({"phase": "Failed", "pod_reason": "Evicted"}, ("failed", None, "Evicted")),
        ({"phase": "Succeeded", "terminated": (0, "Completed")}, ("succeeded", 0, "Completed")),
    ],
    ids=["oom", "error", "evicted", "completed"],
)
def test_a_kubernetes_pods_outcome_is_recorded(researcher, nlp_queue, pod, expected):
    NodeFactory(name="gpu-worker-1")
    clock = [START]
    _job(researcher, nlp_queue, replicas=1)
    _cycles(clock, SimulatedBackend(default_run_seconds=600, now=lambda: clock[0]), 2)
    placement = Placement.objects.get()
    observed = observed_pod_from(_k8s_pod(placement.pod_name, **pod))
    cluster_observe(pods=[observed], now=clock[0])
    placement.refresh_from_db()
    assert (placement.state, placement.exit_code, placement.exit_reason) == expected
