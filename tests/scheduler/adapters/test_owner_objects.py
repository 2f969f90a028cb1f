"""Each job the portal starts on Kubernetes has one owner object (a ConfigMap named as the job) that
its pods and plugin objects name in their ownerReferences: deleting it garbage-collects them,
and the portal deletes only its own instance's. Against the emulated API server."""

from __future__ import annotations

import kmock
import pytest

from jobspec import labels
from portal.cluster.models import Placement
from portal.jobs.models import Job
from portal.jobs.services import job_cancel
from portal.tenants.models import Membership
from scheduler.adapters.cluster.owner import owner_manifest
from scheduler.adapters.observe import cluster_observe
from tests.factories import MembershipFactory, UserFactory
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
CONFIG_MAPS = kmock.resource("v1/configmaps")


@pytest.fixture
def user(nlp):
    researcher = UserFactory(username="alice")
    MembershipFactory(user=researcher, tenant=nlp, role=Membership.Role.RESEARCHER)
    return researcher


@pytest.fixture
def node(cluster):
    cluster.add_node("gpu-a", GPU_NODE)
    return "gpu-a"


def stored(cluster, resource: str) -> dict:
    return cluster.on_loop(lambda: dict(cluster.store.table(resource)))


def owner_of(cluster, job: Job) -> dict | None:
    return stored(cluster, "configmaps").get((NAMESPACE, f"{job.object_name}"))


def pods_of(job: Job) -> list[str]:
    return sorted(Placement.objects.filter(job=job).values_list("pod_name", flat=True))


def add_config_map(cluster, body: dict) -> dict:
    return cluster.on_loop(lambda: cluster.store.create("configmaps", NAMESPACE, body))


def test_every_pod_and_plugin_object_of_a_job_names_its_one_owner(
    cluster, kube_cycle, user, nlp_queue, node
):
    job = submit_job(user, nlp_queue, "ddp", gpus=4, replicas=2, plugins={"svc": []})

    kube_cycle()

    owner = owner_of(cluster, job)
    assert owner["metadata"]["labels"][labels.INSTANCE] == "gpuportal"
    reference = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": f"{job.object_name}",
         "uid": owner["metadata"]["uid"]}
    ]  # fmt: skip
    for pod in pods_of(job):
        assert cluster.pod(NAMESPACE, pod)["metadata"]["ownerReferences"] == reference
    assert (
        stored(cluster, "services")[(NAMESPACE, f"{job.object_name}")]["metadata"][
            "ownerReferences"
        ]
        == reference
    )
    assert (
        stored(cluster, "configmaps")[(NAMESPACE, f"{job.object_name}-svc")]["metadata"][
            "ownerReferences"
        ]
        == reference
    )
    # One owner per job, made once: the second pod reused it.
    creates = [
        r for r in cluster.requests(kmock.action.CREATE, CONFIG_MAPS)
        if f"{job.object_name}" == (r.data or {}).get("metadata", {}).get("name")
    ]  # fmt: skip
    assert len(creates) == 1


def test_deleting_the_owner_collects_the_pods_and_the_job_is_requeued_with_the_reason(
    cluster, kube_cycle, backend, cycle_clock, user, nlp_queue, node
):
    job = submit_job(user, nlp_queue, "train", gpus=4, replicas=2)
    kube_cycle()
    cluster.advance(1)
    kube_cycle()
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    first_uid = owner_of(cluster, job)["metadata"]["uid"]

    # kubectl delete configmap gp-<id>
    cluster.on_loop(lambda: cluster.store.delete("configmaps", NAMESPACE, f"{job.object_name}"))
    cluster.advance(60)  # the kubelet confirms the pods' deletion
    assert [p for p in pods_of(job) if cluster.pod(NAMESPACE, p)] == []

    # The cycle's observe step, on its own, so the requeue is seen before the job is placed
    # again in the same cycle.
    pods = backend.list_pods()
    cluster_observe(pods=pods, now=cycle_clock.now, owners_gone=backend.owners_deleted())

    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED
    assert job.pending_reason == (
        f"owner object ConfigMap {NAMESPACE}/{job.object_name} was deleted, and the job's pods "
        "with it; the job was requeued"
    )
    assert not Placement.objects.filter(job=job, state__in=["bound", "running"]).exists()
    assert backend.owners_deleted() == {}  # reported once

    kube_cycle()  # placed again (admitted, not left "preempted"): a new owner for its pods
    cluster.advance(1)
    kube_cycle()
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    owner = owner_of(cluster, job)
    assert owner["metadata"]["uid"] != first_uid
    live = Placement.objects.filter(job=job, state__in=["bound", "running"])
    for pod in live.values_list("pod_name", flat=True):
        assert (
            cluster.pod(NAMESPACE, pod)["metadata"]["ownerReferences"][0]["uid"]
            == (owner["metadata"]["uid"])
        )


def test_the_owner_goes_once_the_job_wants_no_pods_and_no_finished_pod_is_kept(
    cluster, kube_cycle, user, nlp_queue, node, settings
):
    settings.FINISHED_POD_RETENTION_SECONDS = 600
    job = submit_job(user, nlp_queue, "train", gpus=8)
    kube_cycle()
    cluster.advance(1)
    kube_cycle()
    (pod,) = pods_of(job)
    # The container exits 0.
    cluster.on_loop(
        lambda: cluster.store.patch("pods", NAMESPACE, pod, {"status": {"phase": "Succeeded"}})
    )
    kube_cycle()
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    kube_cycle()
    assert cluster.pod(NAMESPACE, pod) is not None  # kept for its logs
    assert owner_of(cluster, job) is not None  # and its owner with it

    kube_cycle(seconds=601)
    kube_cycle()  # the finished pod was deleted; now nothing is left to own

    assert cluster.pod(NAMESPACE, pod) is None
    assert owner_of(cluster, job) is None


def test_a_cancelled_jobs_owner_is_deleted_and_no_one_elses(
    cluster, kube_cycle, user, nlp_queue, node
):
    other = owner_manifest(job_id="999", name="gp-999", namespace=NAMESPACE, instance="portal-b")
    add_config_map(cluster, other)
    unlabelled = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gp-998"}}
    add_config_map(cluster, unlabelled)
    job = submit_job(user, nlp_queue, "train", gpus=8)
    kube_cycle()
    assert owner_of(cluster, job) is not None

    cluster.advance(1)
    job_cancel(job=job, actor=user)
    for _ in range(3):
        kube_cycle()
        cluster.advance(60)

    assert owner_of(cluster, job) is None
    left = set(stored(cluster, "configmaps"))
    assert {(NAMESPACE, "gp-999"), (NAMESPACE, "gp-998")} <= left


def test_an_existing_owner_of_this_instance_is_adopted_by_its_uid(
    cluster, kube_cycle, user, nlp_queue, node
):
    job = submit_job(user, nlp_queue, "train", gpus=8)
    # Made by an earlier attempt whose answer was lost (or by a restarted worker).
    made = add_config_map(
        cluster,
        owner_manifest(
            job_id=str(job.pk), name=job.object_name, namespace=NAMESPACE, instance="gpuportal"
        ),
    )

    kube_cycle()

    (pod,) = pods_of(job)
    assert (
        cluster.pod(NAMESPACE, pod)["metadata"]["ownerReferences"][0]["uid"]
        == (made["metadata"]["uid"])
    )
    job.refresh_from_db()
    assert job.pending_reason == ""


def test_an_owner_name_held_by_another_instance_is_refused_not_adopted(
    cluster, kube_cycle, user, nlp_queue, node
):
    job = submit_job(user, nlp_queue, "train", gpus=8)
    add_config_map(
        cluster,
        owner_manifest(
            job_id=str(job.pk), name=job.object_name, namespace=NAMESPACE, instance="portal-b"
        ),
    )

    cycle = kube_cycle(errors=True)

    assert f"create ConfigMap {NAMESPACE}/{job.object_name}: name taken" in cycle.error
    (pod,) = pods_of(job)
    assert cluster.pod(NAMESPACE, pod) is None  # no pod that another instance's object owns
    assert owner_of(cluster, job)["metadata"]["labels"][labels.INSTANCE] == "portal-b"
    # Given back at once, not held until the start timeout, saying whose the name is.
    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED
    assert not Placement.objects.filter(job=job, state__in=["bound", "running"]).exists()
    assert (
        f"create ConfigMap {NAMESPACE}/{job.object_name}: name taken by an object of portal "
        "instance portal-b"
    ) in job.pending_reason
    assert [attempt["kind"] for attempt in job.start_attempts] == ["name-taken"]
