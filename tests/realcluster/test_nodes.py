"""What the real cluster says about its nodes and other workloads reaches the scheduler:
taints (and NoExecute eviction by the taint eviction controller), NotReady, deleted nodes (and
the pod garbage collector), other workloads' and other portal instances' pods, which the
portal counts and never deletes."""

from __future__ import annotations

import pytest
from kubernetes import client

from jobspec import labels
from portal.cluster.models import Placement
from portal.jobs.models import Job
from portal.tenants.models import Membership
from tests.factories import MembershipFactory, UserFactory
from tests.realcluster.conftest import NAMESPACE
from tests.scheduler.conftest import submit_job, wait_for

pytestmark = pytest.mark.django_db
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
DEDICATED = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}


@pytest.fixture
def user(nlp):
    researcher = UserFactory(username="alice")
    MembershipFactory(user=researcher, tenant=nlp, role=Membership.Role.RESEARCHER)
    return researcher


def placed_on(job: Job) -> list[str]:
    return sorted(
        Placement.objects.filter(job=job, state__in=Placement.ACTIVE_STATES).values_list(
            "node_name", flat=True
        )
    )


def other_pod(name: str, node: str, *, namespace: str = "default", gpus: int = 4, **meta) -> dict:
    gpu = {"nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, **meta},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": gpu, "limits": gpu}}
            ],
        },
    }


def running_pod_of(admin: client.CoreV1Api, job: Job) -> client.V1Pod:
    name = Placement.objects.get(job=job, state__in=Placement.ACTIVE_STATES).pod_name
    return wait_for_pod(admin, name, lambda pod: pod.status.phase == "Running")


def wait_for_pod(admin, name, check):
    found: list[client.V1Pod] = []

    def ready() -> bool:
        pods = admin.list_namespaced_pod(NAMESPACE, field_selector=f"metadata.name={name}").items
        found[:] = pods
        return bool(pods) and check(pods[0])

    wait_for(ready, f"pod {name}", timeout=30)
    return found[0]


def test_tainted_nodes_are_avoided_unless_tolerated(kubelet, real_cycle, user, nlp_queue):
    kubelet.register_node("taint-infra", gpus=8, taints=[DEDICATED])
    plain = submit_job(user, nlp_queue, "plain", gpus=8)
    tolerant = submit_job(user, nlp_queue, "tolerant", gpus=8)
    tolerant.tasks.update(
        tolerations=[
            {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}
        ]
    )

    real_cycle()

    assert placed_on(plain) == []
    assert placed_on(tolerant) == ["taint-infra"]


def test_a_not_ready_node_is_no_capacity(kubelet, admin, real_cycle, user, nlp_queue):
    kubelet.register_node("ready-no", gpus=8)
    kubelet.set_ready("ready-no", False)
    admin.patch_node("ready-no", {"spec": {"taints": [NOT_READY]}})
    job = submit_job(user, nlp_queue, "train", gpus=8)

    real_cycle()
    assert placed_on(job) == []

    kubelet.set_ready("ready-no", True)
    admin.patch_node("ready-no", {"spec": {"taints": None}})
    real_cycle()
    assert placed_on(job) == ["ready-no"]


def test_a_noexecute_taint_evicts_the_pod_and_the_job_is_requeued(
    kubelet, admin, real_cycle, user, nlp_queue
):
    kubelet.register_nodes(["drain-a", "drain-b"], gpus=8)
    job = submit_job(user, nlp_queue, "train", gpus=8)
    real_cycle()
    (first,) = placed_on(job)
    pod = running_pod_of(admin, job)
    real_cycle()
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING

    # The taint eviction controller deletes pods that do not tolerate a NoExecute taint.
    admin.patch_node(first, {"spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}})
    wait_for(
        lambda: (
            not any(
                seen.metadata.uid == pod.metadata.uid and not seen.metadata.deletion_timestamp
                for seen in admin.list_namespaced_pod(
                    NAMESPACE, field_selector=f"metadata.name={pod.metadata.name}"
                ).items
            )
        ),
        "the taint eviction controller to delete the pod",
        timeout=30,
    )

    def requeued_elsewhere() -> bool:
        real_cycle()
        return placed_on(job) == sorted({"drain-a", "drain-b"} - {first})

    wait_for(requeued_elsewhere, "the job to run on the other node", timeout=60)


def test_a_deleted_node_is_left_and_its_job_runs_elsewhere(
    kubelet, admin, real_cycle, user, nlp_queue
):
    kubelet.register_nodes(["gone-a", "gone-b"], gpus=8)
    job = submit_job(user, nlp_queue, "train", gpus=8)
    real_cycle()
    (first,) = placed_on(job)
    running_pod_of(admin, job)

    admin.delete_node(first)

    def runs_elsewhere() -> bool:
        real_cycle()
        return placed_on(job) == sorted({"gone-a", "gone-b"} - {first})

    # The pod on the gone node is the pod garbage collector's (orphans go after its 40 s
    # quarantine); the new pod of the same name can be made once it has gone.
    wait_for(runs_elsewhere, "the job to be placed on the node that is left", timeout=120)


def test_other_workloads_and_instances_are_counted_and_never_deleted(
    kubelet, admin, real_cycle, user, nlp_queue, instance
):
    kubelet.register_node("shared", gpus=8)
    foreign = other_pod("team-b-train", "shared", gpus=4)
    stranger_labels = labels.replica_labels(
        job_id=999, task="worker", replica=0, queue="q", tenant="t"
    )
    stranger_labels[labels.INSTANCE] = "another-portal"
    stranger = other_pod(
        "gp-999-worker-0", "shared", namespace=NAMESPACE, gpus=2, labels=stranger_labels
    )
    admin.create_namespaced_pod("default", foreign)
    admin.create_namespaced_pod(NAMESPACE, stranger)
    try:
        wants_all = submit_job(user, nlp_queue, "big", gpus=4)
        real_cycle()
        assert placed_on(wants_all) == []  # 4 + 2 of 8 are others': 2 are free
        fits = submit_job(user, nlp_queue, "small", gpus=2)
        real_cycle()
        real_cycle()
        assert placed_on(fits) == ["shared"]
        assert (
            admin.read_namespaced_pod("team-b-train", "default").metadata.deletion_timestamp is None
        )
        assert (
            admin.read_namespaced_pod("gp-999-worker-0", NAMESPACE).metadata.deletion_timestamp
            is None
        )
    finally:
        admin.delete_namespaced_pod("team-b-train", "default", grace_period_seconds=0)
        admin.delete_namespaced_pod("gp-999-worker-0", NAMESPACE, grace_period_seconds=0)
