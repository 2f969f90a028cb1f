"""A job's reason is never blank while it waits (pending or preempted), after any requeue: each
path that sends a job back to the queue is walked on the emulated API server, and after every
cycle a waiting job's reason names the cause (or, once the core has looked at it again, why it
still waits)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from portal.cluster.models import Node, Placement
from portal.jobs.models import Job, JobTask
from portal.jobs.services import job_quarantine, job_quarantine_release
from portal.tenants.models import Membership
from scheduler.adapters.observe import cluster_observe
from tests.factories import MembershipFactory, UserFactory
from tests.scheduler.conftest import other_workload_pod, submit_job

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
QUOTA = "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=8"
# What the core says of a job it looked at and could not place (scheduler.core.reasons).
CORE_WORDS = (
    "no node can take",
    "node refused this job's pod recently",
    "can never run",
    "deserves",
)


@pytest.fixture
def user(nlp):
    researcher = UserFactory(username="alice")
    MembershipFactory(user=researcher, tenant=nlp, role=Membership.Role.RESEARCHER)
    return researcher


def pod_of(job: Job) -> str:
    return Placement.objects.filter(job=job).order_by("-id").values_list("pod_name", flat=True)[0]


def running(cluster, kube_cycle, job: Job) -> None:
    kube_cycle()
    cluster.advance(1)
    kube_cycle()
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING


def vanish(cluster, kube_cycle, job, ctx):
    running(cluster, kube_cycle, job)
    cluster.delete_pod(NAMESPACE, pod_of(job), 0)
    cluster.advance(1)
    return "disappeared from node"


def node_leaves(cluster, kube_cycle, job, ctx):
    running(cluster, kube_cycle, job)
    cluster.delete_node("gpu-a")
    Node.objects.filter(name="gpu-a").update(in_cluster=False)  # what the node sync writes
    return "left the cluster"


def owner_deleted(cluster, kube_cycle, job, ctx):
    running(cluster, kube_cycle, job)
    cluster.on_loop(lambda: cluster.store.delete("configmaps", NAMESPACE, f"{job.object_name}"))
    cluster.advance(60)
    return "owner object ConfigMap"


def kubelet_refuses(cluster, kube_cycle, job, ctx):
    cluster.fail_admission("gpu-a", "nvidia.com/gpu")
    kube_cycle()
    cluster.advance(1)
    return "refused"


def image_does_not_pull(cluster, kube_cycle, job, ctx):
    ctx.settings.START_BLOCKED_GRACE_SECONDS = 0
    cluster.fail_image_pull("ghcr.io/example/train:1")
    kube_cycle()
    cluster.advance(1)
    return "could not pull its image"


def init_container_does_not_pull(cluster, kube_cycle, job, ctx):
    ctx.settings.START_BLOCKED_GRACE_SECONDS = 0
    image = "ghcr.io/example/fetch:missing"
    cluster.fail_image_pull(image)
    JobTask.objects.filter(job=job).update(
        pod_template={
            "spec": {
                "initContainers": [{"name": "fetch", "image": image}],
                "containers": [{"name": "worker", "image": "ghcr.io/example/train:1"}],
            }
        }
    )
    kube_cycle()
    cluster.advance(1)
    return "init container fetch"


def never_starts(cluster, kube_cycle, job, ctx):
    ctx.settings.KUBERNETES_POD_START_TIMEOUT_SECONDS = 10
    cluster.on_loop(lambda: setattr(cluster.store.kubelet, "start_seconds", 10_000))
    kube_cycle(seconds=11)
    cluster.advance(1)
    return "did not start"


def quota_refuses(cluster, kube_cycle, job, ctx):
    cluster.reject_create(f"{job.object_name}-worker-0", status=403, message=QUOTA)
    return "namespace quota gpu-quota exceeded"


def name_taken(cluster, kube_cycle, job, ctx):
    pod = other_workload_pod("x", "gpu-a", namespace=NAMESPACE, gpus=0)
    pod["metadata"]["name"] = f"{job.object_name}-worker-0"
    pod["metadata"]["labels"] = {"gpuportal.io/managed": "true", "gpuportal.io/job-id": "77"}
    cluster.add_pod(pod)
    return "name taken by a portal's object from before objects carried their instance"


def policy_restarts(cluster, kube_cycle, job, ctx):
    Job.objects.filter(pk=job.pk).update(
        policies=[{"events": ["PodFailed"], "action": "RestartJob"}]
    )
    running(cluster, kube_cycle, job)
    cluster.finish_pod(NAMESPACE, pod_of(job), exit_code=3)
    return "policy PodFailed -> RestartJob"


def reclaimed(cluster, kube_cycle, job, ctx):
    running(cluster, kube_cycle, job)
    submit_job(ctx.lead, ctx.vision_queue, "share", gpus=4)
    return "reclaim"


def quarantine_released(cluster, kube_cycle, job, ctx):
    job_quarantine(job_id=job.pk, phase="snapshot", error="boom")
    kube_cycle()
    job_quarantine_release(job=Job.objects.get(pk=job.pk), actor=ctx.staff)
    return "released from quarantine"


# path -> (what makes the job wait, which step requeues it: "observe" (the cycle's observe
# alone, before a cycle places it again), "cycle" (a whole cycle) or "done" (the path did)).
PATHS: dict[str, tuple[Callable, str]] = {
    "pod vanished": (vanish, "observe"),
    "node left": (node_leaves, "observe"),
    "owner deleted": (owner_deleted, "observe"),
    "kubelet refused": (kubelet_refuses, "observe"),
    "image pull": (image_does_not_pull, "observe"),
    "init container image pull": (init_container_does_not_pull, "observe"),
    "start timeout": (never_starts, "observe"),
    "quota 403": (quota_refuses, "cycle"),
    "name taken": (name_taken, "cycle"),
    "restart policy": (policy_restarts, "observe"),
    "reclaimed": (reclaimed, "cycle"),
    "quarantine released": (quarantine_released, "done"),
}


class _Context:
    def __init__(self, settings, staff, lead, vision_queue) -> None:
        self.settings, self.staff, self.lead, self.vision_queue = (
            settings,
            staff,
            lead,
            vision_queue,
        )


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_waiting_job_always_says_why(
    path,
    cluster,
    kube_cycle,
    backend,
    cycle_clock,
    user,
    nlp_queue,
    staff,
    settings,
    lead,
    vision_queue,
):
    cluster.add_node("gpu-a", GPU_NODE)
    job = submit_job(user, nlp_queue, "train", gpus=8)
    make_it_wait, step = PATHS[path]
    cause = make_it_wait(cluster, kube_cycle, job, _Context(settings, staff, lead, vision_queue))
    if step == "observe":
        cluster_observe(
            pods=backend.list_pods(), now=cycle_clock.now, owners_gone=backend.owners_deleted()
        )
    elif step == "cycle":
        kube_cycle(errors=True)

    job.refresh_from_db()
    assert job.status in (Job.Status.PENDING, Job.Status.PREEMPTED), (path, job.status)
    assert cause in job.pending_reason, (path, job.pending_reason)
    for _ in range(5):
        kube_cycle(errors=True, seconds=2)
        cluster.advance(1)
        for waiting in Job.objects.filter(status__in=[Job.Status.PENDING, Job.Status.PREEMPTED]):
            assert waiting.pending_reason, (path, waiting.name, waiting.status)
            if waiting.pk == job.pk:
                assert cause in waiting.pending_reason or any(
                    words in waiting.pending_reason for words in CORE_WORDS
                ), (path, waiting.pending_reason)
