"""What the cluster says about its nodes reaches the scheduler: taints, Ready, deleted nodes
and what other workloads' pods hold. Whole cycles with the Kubernetes backend, over HTTP
against the emulated API server."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobspec import labels
from portal.cluster.models import Node, Placement
from portal.jobs.models import Job
from portal.tenants.models import Membership
from scheduler.adapters.observe import cluster_observe
from scheduler.adapters.snapshot import snapshot_build
from tests.factories import MembershipFactory, UserFactory
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}


@pytest.fixture
def user(nlp):
    researcher = UserFactory(username="alice")
    MembershipFactory(user=researcher, tenant=nlp, role=Membership.Role.RESEARCHER)
    return researcher


@pytest.fixture
def run(kube_cycle):
    return kube_cycle


def foreign_pod(name: str, node: str, *, namespace: str = "kube-system", **extra) -> dict:
    spec = {
        "nodeName": node,
        "containers": [
            {"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "4"}}}
        ],
        **extra,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"phase": "Running"},
    }


def placed_on(job: Job) -> list[str]:
    return sorted(
        Placement.objects.filter(job=job, state__in=Placement.ACTIVE_STATES).values_list(
            "node_name", flat=True
        )
    )


def test_list_nodes_reads_taints_ready_and_what_others_hold(cluster, backend):
    cluster.add_node("cp", {"cpu": "8", "memory": "32Gi"}, taints=[CONTROL_PLANE])
    cluster.add_node("down", GPU_NODE, ready=False, taints=[NOT_READY])
    cluster.add_node("new", GPU_NODE)
    no_conditions = {"status": {"conditions": []}}
    cluster.on_loop(
        lambda: cluster.store.patch("nodes", None, "new", no_conditions, validate=False)
    )
    cluster.add_node("gpu-a", GPU_NODE)
    # A DaemonSet pod in another namespace: init container larger than the main one, overhead.
    cluster.add_pod(
        foreign_pod(
            "dcgm-x",
            "gpu-a",
            containers=[
                {"name": "a", "image": "x", "resources": {"requests": {"cpu": "250m"}}},
                {"name": "b", "image": "x", "resources": {"limits": {"memory": "1Gi"}}},
            ],
            initContainers=[{"name": "i", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
            overhead={"cpu": "100m"},
        )
    )
    cluster.add_pod(foreign_pod("other-team", "gpu-a", namespace="team-b"))
    cluster.add_pod(foreign_pod("done", "gpu-a", status={"phase": "Succeeded"}))
    unbound = foreign_pod("waiting", "gpu-a")
    del unbound["spec"]["nodeName"]
    cluster.add_pod(unbound)
    ours = foreign_pod("gp-1-worker-0", "gpu-a", namespace=NAMESPACE)
    ours["metadata"]["labels"] = labels.replica_labels(
        job_id=1, task="worker", replica=0, queue="q", tenant="t"
    )
    cluster.add_pod(ours)
    cluster.patch_pod("kube-system", "done", {"status": {"phase": "Succeeded"}})

    nodes = {node.name: node for node in backend.list_nodes()}

    assert nodes["cp"].taints == [
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    ]
    assert (nodes["cp"].ready, nodes["down"].ready, nodes["new"].ready) == (True, False, False)
    # cpu: max(250m, init 1000m) + 100m overhead; memory from the limit; 4 GPUs of team-b.
    assert nodes["gpu-a"].used_by_others == {
        "cpu": 1100,
        "memory": 2**30,
        "nvidia.com/gpu": 4,
        "pods": 2,
    }
    assert nodes["cp"].used_by_others == {}


def test_tainted_nodes_are_avoided_unless_tolerated(cluster, run, user, nlp_queue):
    cluster.add_node("cp", {"cpu": "64", "memory": "256Gi"}, taints=[CONTROL_PLANE])
    cluster.add_node("small", {"cpu": "1", "memory": "256Gi"})
    cpu_job = submit_job(user, nlp_queue, "cpu", gpus=0)
    cpu_job.tasks.update(cpu_millis=8000)
    tolerant = submit_job(user, nlp_queue, "tolerant", gpus=0)
    tolerant.tasks.update(cpu_millis=8000, tolerations=[{"operator": "Exists"}])

    run()

    assert placed_on(cpu_job) == []
    assert placed_on(tolerant) == ["cp"]
    pod = cluster.pod(NAMESPACE, Placement.objects.get(job=tolerant).pod_name)
    assert {"operator": "Exists"} in pod["spec"]["tolerations"]


def test_a_node_selector_naming_a_tainted_node_leaves_the_job_pending(
    cluster, run, user, nlp_queue
):
    """Selecting a control-plane node by its label is no way onto it: its taint still needs
    a toleration, which a tenant's jobs have only by a site admin's list (jobspec.tenancy)."""
    role = "node-role.kubernetes.io/control-plane"
    cluster.add_node(
        "cp", {"cpu": "64", "memory": "256Gi"}, labels={role: ""}, taints=[CONTROL_PLANE]
    )
    cluster.add_node("small", {"cpu": "64", "memory": "256Gi"})
    pinned = submit_job(user, nlp_queue, "pinned", gpus=0)
    pinned.tasks.update(node_selector={role: ""})

    run()

    assert placed_on(pinned) == []
    assert Job.objects.get(pk=pinned.pk).status == Job.Status.PENDING


def test_not_ready_and_deleted_nodes_are_no_capacity(cluster, run, user, nlp_queue):
    cluster.add_node("down", GPU_NODE, ready=False, taints=[NOT_READY])
    cluster.add_node("gpu-a", GPU_NODE)
    cluster.add_node("gpu-gone", GPU_NODE)
    run()
    assert Node.objects.get(name="down").ready is False
    cluster.delete_node("gpu-gone")
    run()

    snapshot = snapshot_build(now=datetime.now(tz=UTC)).snapshot
    assert [node.name for node in snapshot.nodes] == ["gpu-a"]
    assert Node.objects.get(name="gpu-gone").in_cluster is False

    big = submit_job(user, nlp_queue, "big", gpus=8, replicas=2)
    run()
    assert placed_on(big) == []  # one 8-GPU node is left, not three
    cluster.add_node("gpu-gone", GPU_NODE)  # back again
    run()
    assert placed_on(big) == ["gpu-a", "gpu-gone"]


def test_a_job_on_a_deleted_node_is_requeued_and_never_recreated_there(
    cluster, run, user, nlp_queue
):
    cluster.add_node("gpu-a", GPU_NODE)
    job = submit_job(user, nlp_queue, "train", gpus=8)
    run()
    assert placed_on(job) == ["gpu-a"]
    pod_name = Placement.objects.get(job=job).pod_name
    cluster.delete_pod(NAMESPACE, pod_name, 0)
    cluster.delete_node("gpu-a")
    cluster.add_node("gpu-b", GPU_NODE)

    run()
    job.refresh_from_db()
    # Requeued and, gpu-b being free, placed again in the same cycle.
    assert job.status == Job.Status.ADMITTED
    assert cluster.pod(NAMESPACE, pod_name) is None  # not created again on the gone node

    run()
    assert placed_on(job) == ["gpu-b"]
    assert [
        cluster.pod(NAMESPACE, name)["spec"]["nodeName"]
        for name in Placement.objects.filter(
            job=job, state__in=Placement.ACTIVE_STATES
        ).values_list("pod_name", flat=True)
    ] == ["gpu-b"]


def test_the_requeue_names_the_node_that_left(cluster, run, backend, user, nlp_queue):
    cluster.add_node("gpu-a", GPU_NODE)
    job = submit_job(user, nlp_queue, "train", gpus=8)
    run()
    Node.objects.filter(name="gpu-a").update(in_cluster=False)  # what the node sync records

    cluster_observe(pods=backend.list_pods(), now=datetime.now(tz=UTC))

    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED
    pod_name = Placement.objects.get(job=job).pod_name
    assert job.pending_reason == (
        f"node gpu-a left the cluster with pod {pod_name}; the job was requeued"
    )


def test_what_other_workloads_hold_is_not_offered(cluster, run, user, nlp_queue):
    cluster.add_node("gpu-a", GPU_NODE)
    cluster.add_pod(foreign_pod("other-team", "gpu-a", namespace="team-b"))
    job = submit_job(user, nlp_queue, "train", gpus=8)
    run()
    assert placed_on(job) == []
    assert Node.objects.get(name="gpu-a").used_by_others["nvidia.com/gpu"] == 4
    job.refresh_from_db()
    # Held by others for now: a wait, not "can never run" (the node has 8 GPUs).
    assert "1 pod of 8 GPUs; 0 nodes have 8 free GPUs" in job.pending_reason

    cluster.patch_pod("team-b", "other-team", {"status": {"phase": "Succeeded"}})
    run()
    assert placed_on(job) == ["gpu-a"]
