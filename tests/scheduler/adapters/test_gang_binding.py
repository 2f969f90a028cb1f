"""Gangs start whole or not at all: pods are created unbound for the portal's scheduler name
and bound through pods/binding once the gang's pods all exist; a refused create or bind leaves
nothing of the gang running and puts the API server's words on the job. Whole cycles with the
Kubernetes backend over HTTP against the emulated API server."""

from __future__ import annotations

import kmock
import pytest

from portal.cluster.models import Placement
from portal.jobs.models import Job
from portal.tenants.models import Membership
from tests.factories import MembershipFactory, UserFactory
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}


@pytest.fixture
def user(nlp):
    researcher = UserFactory(username="alice")
    MembershipFactory(user=researcher, tenant=nlp, role=Membership.Role.RESEARCHER)
    return researcher


@pytest.fixture
def gang(cluster, user, nlp_queue) -> Job:
    """A 4-pod gang of 4 GPUs each over two 8-GPU nodes."""
    cluster.add_node("gpu-a", GPU_NODE)
    cluster.add_node("gpu-b", GPU_NODE)
    return submit_job(user, nlp_queue, "train", gpus=4, replicas=4)


def pod_names(job: Job) -> list[str]:
    return sorted(
        Placement.objects.filter(job=job, state__in=Placement.ACTIVE_STATES).values_list(
            "pod_name", flat=True
        )
    )


def bound_nodes(cluster, names: list[str]) -> dict[str, str | None]:
    """pod name -> its spec.nodeName, for the pods that exist."""
    return {
        name: (pod.get("spec") or {}).get("nodeName")
        for name in names
        if (pod := cluster.pod(NAMESPACE, name)) is not None
    }


def test_a_gang_is_created_unbound_then_bound_whole_through_pods_binding(cluster, kube_cycle, gang):
    kube_cycle()

    names = pod_names(gang)
    assert len(names) == 4
    placed = dict(Placement.objects.filter(job=gang).values_list("pod_name", "node_name"))
    assert bound_nodes(cluster, names) == placed
    for name in names:
        pod = cluster.pod(NAMESPACE, name)
        assert pod["spec"]["schedulerName"] == "gpuportal"
        assert {"type": "PodScheduled", "status": "True"}.items() <= pod["status"]["conditions"][
            0
        ].items()
    # Every create came before the first bind: no pod started while the gang was incomplete.
    posts = [
        request
        for request in cluster.on_loop(lambda: list(cluster.handler["post"]))
        if request.resource is not None and request.resource.plural == "pods"
    ]
    kinds = ["bind" if r.subresource == "binding" else "create" for r in posts]
    assert kinds == ["create"] * 4 + ["bind"] * 4


@pytest.mark.parametrize("status", [403, 422])
def test_a_refused_create_starts_nothing_and_fails_the_job_with_the_servers_words(
    cluster, kube_cycle, gang, status
):
    cluster.reject_create(f"{gang.object_name}-worker-2", status=status)

    kube_cycle(errors=True)

    kube_cycle_names = pod_names(gang) or sorted(
        Placement.objects.filter(job=gang).values_list("pod_name", flat=True)
    )
    # Three pods exist and none is bound: nothing of the gang runs.
    assert set(bound_nodes(cluster, kube_cycle_names).values()) == {None}
    gang.refresh_from_db()
    assert gang.status == Job.Status.FAILED
    assert "the cluster refused the job's pods" in gang.pending_reason
    assert f'pods "{gang.object_name}-worker-2" is forbidden: rejected' in gang.pending_reason
    assert f"HTTP {status}" in gang.pending_reason

    kube_cycle()
    kube_cycle()
    assert bound_nodes(cluster, kube_cycle_names) == {}  # the unbound pods were cleaned up
    creates = [
        r
        for r in cluster.requests(kmock.action.CREATE)
        if r.subresource is None and (r.data or {})["metadata"]["name"].endswith("worker-2")
    ]
    assert len(creates) == 1  # refused for good: never asked again


def test_a_server_that_fails_a_create_leaves_the_gang_unbound_until_it_answers(
    cluster, kube_cycle, gang, sleeps
):
    name = f"{gang.object_name}-worker-1"
    # Four attempts (the backend's retry policy) all answered 503, nothing stored.
    cluster.reject_create(name, status=503, times=4)

    kube_cycle(errors=True)

    names = pod_names(gang)
    assert set(bound_nodes(cluster, names).values()) == {None}
    gang.refresh_from_db()
    assert gang.status == Job.Status.ADMITTED
    assert gang.pending_reason.startswith("pods not started yet, retrying: create pod")

    kube_cycle()

    placed = dict(Placement.objects.filter(job=gang).values_list("pod_name", "node_name"))
    assert bound_nodes(cluster, names) == placed


def test_a_refused_bind_takes_back_the_binds_of_its_gang(cluster, kube_cycle, gang):
    cluster.reject_bind(f"{gang.object_name}-worker-3", status=403)

    kube_cycle(errors=True)

    gang.refresh_from_db()
    assert gang.status == Job.Status.FAILED
    assert f"bind pod {NAMESPACE}/{gang.object_name}-worker-3" in gang.pending_reason
    # The three pods bound in that pass were deleted at once: no partial gang runs.
    names = [f"{gang.object_name}-worker-{i}" for i in range(4)]
    left = bound_nodes(cluster, names)
    assert all(
        node is None or cluster.pod(NAMESPACE, name)["metadata"].get("deletionTimestamp")
        for name, node in left.items()
    ), left


def test_a_bind_the_server_fails_is_undone_and_the_gang_retried_whole(cluster, kube_cycle, gang):
    cluster.reject_bind(f"{gang.object_name}-worker-0", status=500, times=4)

    kube_cycle(errors=True)

    names = [f"{gang.object_name}-worker-{i}" for i in range(4)]
    running = {
        name: node
        for name, node in bound_nodes(cluster, names).items()
        if node and not cluster.pod(NAMESPACE, name)["metadata"].get("deletionTimestamp")
    }
    assert running == {}
    gang.refresh_from_db()
    assert gang.status == Job.Status.ADMITTED

    for _ in range(3):
        kube_cycle()
    placed = dict(Placement.objects.filter(job=gang).values_list("pod_name", "node_name"))
    assert bound_nodes(cluster, names) == placed


def test_binding_a_pod_already_on_that_node_is_success(cluster, backend):
    from jobspec import labels
    from jobspec.pods import DesiredPod
    from scheduler.adapters.cluster.base import ClusterError

    cluster.add_node("gpu-a", GPU_NODE)
    pod = DesiredPod(
        name=labels.pod_name(5, "worker", 0),
        namespace=NAMESPACE,
        node_name="gpu-a",
        image="x",
        command=[],
        env={},
        requests={"cpu": 1000},
        labels=labels.replica_labels(job_id=5, task="worker", replica=0, queue="q", tenant="t"),
        annotations={},
    )
    backend.create_pod(pod)
    backend.bind_pod(pod.name, NAMESPACE, "gpu-a")
    backend.bind_pod(pod.name, NAMESPACE, "gpu-a")  # 409 from the server: same node, fine
    with pytest.raises(ClusterError, match="already assigned"):
        backend.bind_pod(pod.name, NAMESPACE, "gpu-b")
