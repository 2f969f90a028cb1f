"""A portal deletes only its own instance's objects: another instance's pods (sharing the
namespace, or left by a portal whose database was restored) and pods from before the instance
label are never cleaned up, and count as other workloads' use of their node. Two instances
whose job ids overlap ask for different names (jobspec.labels), so both run; a job from before
names carried the instance keeps its names; a name someone else holds gives the job's GPUs
back at once."""

from __future__ import annotations

import kmock
import pytest
from kubernetes import client

from jobspec import labels
from jobspec.job_plugins import JobShape
from jobspec.pods import desired_pod, plugin_objects
from portal.cluster.models import Node, Placement
from portal.jobs.models import Job
from portal.jobs.services import job_cancel
from portal.tenants.models import Membership
from scheduler.adapters.cluster.kubernetes import KubernetesBackend, RetryPolicy
from tests.factories import MembershipFactory, UserFactory
from tests.scheduler.adapters.conftest import GPU_RESOURCE_NAMES
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}


def portal_pod(name: str, job_id: int, *, instance: str | None) -> dict:
    pod_labels = labels.replica_labels(
        job_id=job_id, task="worker", replica=0, queue="q", tenant="t"
    )
    if instance is None:
        del pod_labels[labels.INSTANCE]
    else:
        pod_labels[labels.INSTANCE] = instance
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": pod_labels},
        "spec": {
            "nodeName": "gpu-a",
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "resources": {
                        "requests": {"nvidia.com/gpu": "2"},
                        "limits": {"nvidia.com/gpu": "2"},
                    },
                }
            ],
        },
        "status": {"phase": "Running"},
    }


def test_an_empty_database_never_cleans_up_another_instances_pods(cluster, kube_cycle):
    cluster.add_node("gpu-a", GPU_NODE)
    cluster.add_pod(portal_pod("gp-41-worker-0", 41, instance="staging"))
    cluster.add_pod(portal_pod("gp-42-worker-0", 42, instance=None))  # before the label

    for _ in range(3):
        kube_cycle()

    assert cluster.pod(NAMESPACE, "gp-41-worker-0") is not None
    assert cluster.pod(NAMESPACE, "gp-42-worker-0") is not None
    assert not cluster.pod(NAMESPACE, "gp-41-worker-0")["metadata"].get("deletionTimestamp")
    assert Node.objects.get(name="gpu-a").used_by_others["nvidia.com/gpu"] == 4


def test_an_orphan_of_this_instance_is_cleaned_up(cluster, kube_cycle):
    cluster.add_node("gpu-a", GPU_NODE)
    cluster.add_pod(portal_pod("gp-43-worker-0", 43, instance=labels.DEFAULT_INSTANCE))

    kube_cycle()

    pod = cluster.pod(NAMESPACE, "gp-43-worker-0")
    assert pod is None or pod["metadata"].get("deletionTimestamp")


OTHER = "portal-b"
SVC = {"svc": []}
KINDS = {"ConfigMap": "configmaps", "Service": "services",
         "NetworkPolicy": "networkpolicies.networking.k8s.io"}  # fmt: skip


@pytest.fixture
def researcher(nlp):
    user = UserFactory(username="alice")
    MembershipFactory(user=user, tenant=nlp, role=Membership.Role.RESEARCHER)
    return user


def other_instance_runs(cluster, job_id: int) -> str:
    """What instance OTHER's worker sends for its own job `job_id` (one pod of 4 GPUs on
    gpu-a, with the svc plugin), through a backend of that instance; returns the pod's name."""
    backend = KubernetesBackend.from_configuration(
        client.Configuration(host=cluster.url),
        NAMESPACE,
        GPU_RESOURCE_NAMES,
        RetryPolicy(attempts=2, base_delay=0.0, max_delay=0.0, sleep=lambda _: None),
        instance=OTHER,
    )
    prefix = labels.object_prefix(OTHER)
    shape = JobShape(job_id=job_id, name="train", tasks=(("worker", 1),), prefix=prefix)
    pod = desired_pod(
        pod_name=labels.pod_name(job_id, "worker", 0, prefix=prefix),
        node_name="gpu-a",
        namespace=NAMESPACE,
        gpu_resource="nvidia.com/gpu",
        job_id=job_id,
        job_name="train",
        duration=None,
        queue="q",
        tenant="t",
        task="worker",
        replica=0,
        image="x",
        command=[],
        env={},
        gpus=4,
        cpu_millis=1000,
        memory_bytes=2**30,
        tolerations=[],
        pod_template={},
        min_available=1,
        plugins=SVC,
        shape=shape,
        instance=OTHER,
        object_prefix=prefix,
        job_objects=plugin_objects(SVC, shape, namespace=NAMESPACE, instance=OTHER),
    )
    assert backend.create_pods([pod]) == [None]
    assert backend.bind_pods([(pod.name, NAMESPACE, "gpu-a")]) == [None]
    return pod.name


def stored_names(cluster, kind: str) -> set[str]:
    table = cluster.on_loop(lambda: dict(cluster.store.table(KINDS[kind])))
    return {name for namespace, name in table if namespace == NAMESPACE}


def instance_of(cluster, kind: str, name: str) -> str:
    table = cluster.on_loop(lambda: dict(cluster.store.table(KINDS[kind])))
    return table[(NAMESPACE, name)]["metadata"]["labels"][labels.INSTANCE]


def test_two_instances_with_the_same_job_id_in_one_namespace_both_run(
    cluster, kube_cycle, researcher, nlp_queue
):
    cluster.add_node("gpu-a", GPU_NODE)
    job = submit_job(researcher, nlp_queue, "train", gpus=4, plugins=SVC)
    theirs = other_instance_runs(cluster, job.pk)  # their job has our job's id

    kube_cycle()
    cluster.advance(1)
    kube_cycle()

    (ours,) = Placement.objects.filter(job=job).values_list("pod_name", flat=True)
    assert ours != theirs
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING, job.pending_reason
    assert job.start_attempts == []
    for name in (ours, theirs):
        assert cluster.pod(NAMESPACE, name)["status"]["phase"] == "Running"
    # Each instance has its own owner, Service, host list and NetworkPolicy for the same id,
    # and each Service selects only its own instance's pods.
    theirs_name = labels.job_object_name(job.pk, labels.object_prefix(OTHER))
    for kind, suffix in (("ConfigMap", ""), ("ConfigMap", "-svc"), ("Service", ""),
                         ("NetworkPolicy", "")):  # fmt: skip
        assert instance_of(cluster, kind, job.object_name + suffix) == labels.DEFAULT_INSTANCE
        assert instance_of(cluster, kind, theirs_name + suffix) == OTHER
    ours_pod = cluster.pod(NAMESPACE, ours)
    assert ours_pod["spec"]["subdomain"] == job.object_name
    assert ours_pod["metadata"]["ownerReferences"][0]["name"] == job.object_name


def test_the_sweep_never_deletes_the_other_instances_objects_of_the_same_job_id(
    cluster, kube_cycle, researcher, nlp_queue
):
    cluster.add_node("gpu-a", GPU_NODE)
    job = submit_job(researcher, nlp_queue, "train", gpus=4, plugins=SVC)
    theirs = other_instance_runs(cluster, job.pk)
    kube_cycle()
    cluster.advance(1)
    kube_cycle()
    before = {kind: stored_names(cluster, kind) for kind in KINDS}

    job_cancel(job=job, actor=researcher)
    for _ in range(3):
        kube_cycle()
        cluster.advance(60)

    theirs_name = labels.job_object_name(job.pk, labels.object_prefix(OTHER))
    assert stored_names(cluster, "ConfigMap") == before["ConfigMap"] - {
        job.object_name,
        f"{job.object_name}-svc",
    }
    assert {theirs_name, f"{theirs_name}-svc"} <= stored_names(cluster, "ConfigMap")
    assert stored_names(cluster, "Service") == {theirs_name}
    assert stored_names(cluster, "NetworkPolicy") == {theirs_name}
    kept = cluster.pod(NAMESPACE, theirs)
    assert kept["status"]["phase"] == "Running"
    assert not kept["metadata"].get("deletionTimestamp")


def test_a_job_from_before_names_carried_the_instance_keeps_its_names(
    cluster, kube_cycle, researcher, nlp_queue
):
    cluster.add_node("gpu-a", GPU_NODE)
    job = submit_job(researcher, nlp_queue, "ddp", gpus=4, replicas=2, plugins=SVC)
    Job.objects.filter(pk=job.pk).update(object_prefix="")  # as the migration leaves it
    job.refresh_from_db()

    kube_cycle()
    cluster.advance(1)
    kube_cycle()
    made = len(cluster.requests(kmock.action.CREATE))
    for _ in range(3):
        kube_cycle()
        cluster.advance(5)

    legacy = f"gp-{job.pk}"
    assert job.object_name == legacy
    assert sorted(Placement.objects.filter(job=job).values_list("pod_name", flat=True)) == [
        f"{legacy}-worker-0",
        f"{legacy}-worker-1",
    ]
    assert {legacy, f"{legacy}-svc"} <= stored_names(cluster, "ConfigMap")
    assert stored_names(cluster, "Service") == {legacy}
    pod = cluster.pod(NAMESPACE, f"{legacy}-worker-0")
    assert pod["metadata"]["ownerReferences"][0]["name"] == legacy
    assert pod["spec"]["subdomain"] == legacy
    # Steady: nothing is made again under another name.
    assert len(cluster.requests(kmock.action.CREATE)) == made
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING


def test_a_plugin_object_name_someone_holds_gives_the_gpus_back_at_once(
    cluster, kube_cycle, researcher, nlp_queue
):
    cluster.add_node("gpu-a", GPU_NODE)
    job = submit_job(researcher, nlp_queue, "train", gpus=8, plugins=SVC)
    hand_made = {"apiVersion": "v1", "kind": "Service",
                 "metadata": {"name": job.object_name, "namespace": NAMESPACE},
                 "spec": {"clusterIP": "None"}}  # fmt: skip
    cluster.on_loop(lambda: cluster.store.create("services", NAMESPACE, hand_made))

    kube_cycle(errors=True)

    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED
    assert not Placement.objects.filter(job=job, state__in=["bound", "running"]).exists()
    assert (
        f"create Service {NAMESPACE}/{job.object_name}: name taken by an object no portal made"
    ) in job.pending_reason
    assert [attempt["kind"] for attempt in job.start_attempts] == ["name-taken"]
    assert cluster.pod_names() == []
    assert stored_names(cluster, "Service") == {job.object_name}  # left alone
