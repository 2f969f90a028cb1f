"""Pods that cannot start say so on their job at once, give their placement back after the
start timeout or a kubelet's admission refusal, and pods stuck Terminating on a node that
cannot confirm are force-deleted. Whole cycles against the emulated API server."""

from __future__ import annotations

from datetime import timedelta

import pytest

from portal.cluster.models import Placement
from portal.jobs.models import Job
from portal.jobs.services import job_cancel
from portal.tenants.models import Membership
from scheduler.adapters.observe import cluster_observe
from tests.factories import MembershipFactory, UserFactory
from tests.scheduler.conftest import other_workload_pod, submit_job

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
BAD_IMAGE = "registry.local/typo:1"


@pytest.fixture
def user(nlp):
    researcher = UserFactory(username="alice")
    MembershipFactory(user=researcher, tenant=nlp, role=Membership.Role.RESEARCHER)
    return researcher


@pytest.fixture
def node(cluster):
    cluster.add_node("gpu-a", GPU_NODE)
    return "gpu-a"


def pod_of(job: Job) -> str:
    return Placement.objects.filter(job=job).order_by("id").values_list("pod_name", flat=True)[0]


def test_an_image_that_does_not_pull_is_the_jobs_reason_at_once(
    cluster, kube_cycle, user, nlp_queue, node
):
    cluster.fail_image_pull(BAD_IMAGE)
    job = submit_job(user, nlp_queue, "typo", gpus=8, image=BAD_IMAGE)
    kube_cycle()
    cluster.advance(1)  # the kubelet tries to pull

    kube_cycle()

    job.refresh_from_db()
    assert job.status == Job.Status.ADMITTED
    assert job.pending_reason.startswith(f"pod {pod_of(job)} cannot start on node gpu-a: ")
    assert "ErrImagePull" in job.pending_reason
    assert BAD_IMAGE in job.pending_reason  # the kubelet's message names the image

    cluster.advance(1)
    kube_cycle()
    job.refresh_from_db()
    assert "ImagePullBackOff" in job.pending_reason


def test_a_pod_that_never_starts_gives_its_placement_back_after_the_timeout(
    cluster, kube_cycle, user, nlp_queue, node, settings
):
    settings.KUBERNETES_POD_START_TIMEOUT_SECONDS = 60
    cluster.fail_image_pull(BAD_IMAGE)
    job = submit_job(user, nlp_queue, "typo", gpus=8, image=BAD_IMAGE)
    kube_cycle(seconds=30)  # placed and bound at t=0
    pod = pod_of(job)
    cluster.advance(1)

    kube_cycle(seconds=30)  # t=30
    kube_cycle(seconds=30)  # t=60: not past the timeout yet
    job.refresh_from_db()
    assert job.status == Job.Status.ADMITTED
    assert "cannot start on node gpu-a: ErrImagePull" in job.pending_reason

    kube_cycle()  # t=90

    job.refresh_from_db()
    # Requeued, and placed again at once (the node is free): a new attempt of the replica.
    assert job.status == Job.Status.ADMITTED
    assert not Placement.objects.filter(job=job, pod_name=pod, state__in=["bound", "running"])
    assert Placement.objects.get(job=job, state="bound").pod_name == f"{pod}-a1"
    assert cluster.pod(NAMESPACE, pod) is None  # the unstarted pod is deleted


def test_the_timeout_reason_names_the_pod_and_what_it_last_said(
    cluster, kube_cycle, backend, user, nlp_queue, node, cycle_clock
):
    cluster.fail_image_pull(BAD_IMAGE)
    job = submit_job(user, nlp_queue, "typo", gpus=8, image=BAD_IMAGE)
    kube_cycle()
    cluster.advance(1)

    cluster_observe(
        pods=backend.list_pods(),
        now=cycle_clock.now + timedelta(seconds=61),
        start_timeout_seconds=60,
    )

    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED
    assert job.pending_reason == (
        f"pod {pod_of(job)} did not start within 60 s on node gpu-a (last: ErrImagePull); "
        "the job was requeued"
    )


def test_a_kubelet_admission_refusal_requeues_the_job_instead_of_failing_it(
    cluster, kube_cycle, backend, user, nlp_queue, node, cycle_clock
):
    job = submit_job(user, nlp_queue, "train", gpus=8)
    kube_cycle()
    # Another workload's pod got there first, after the snapshot: the kubelet says no.
    cluster.add_pod(other_workload_pod("other", "gpu-a"))
    cluster.advance(1)
    assert cluster.pod(NAMESPACE, pod_of(job))["status"]["reason"] == "OutOfnvidia.com/gpu"

    cluster_observe(pods=backend.list_pods(), now=cycle_clock.now)

    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED
    assert job.pending_reason == (
        f"node gpu-a refused pod {pod_of(job)} (OutOfnvidia.com/gpu); the job was requeued"
    )


def test_a_pod_terminating_on_a_node_that_stopped_reporting_is_force_deleted(
    cluster, kube_cycle, user, nlp_queue, node
):
    job = submit_job(user, nlp_queue, "train", gpus=8)
    kube_cycle()
    cluster.advance(1)
    kube_cycle()
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    pod = pod_of(job)
    cluster.set_node_ready("gpu-a", False)
    job_cancel(job=job, actor=user)

    kube_cycle(seconds=20)  # asks for a graceful deletion (30 s); nobody can confirm it
    assert cluster.pod(NAMESPACE, pod)["metadata"]["deletionTimestamp"]
    kube_cycle(seconds=20)
    assert cluster.pod(NAMESPACE, pod) is not None  # 20 s on: still within its grace period

    kube_cycle()  # 40 s on: past it
    assert cluster.pod(NAMESPACE, pod) is None
    kube_cycle()  # observes it gone
    assert not Placement.objects.filter(job=job, state__in=Placement.ACTIVE_STATES).exists()


def test_another_workloads_terminating_pod_is_never_force_deleted(
    cluster, kube_cycle, node, cycle_clock
):
    cluster.add_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "other", "namespace": "team-b"},
            "spec": {"nodeName": "gpu-a", "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Running"},
        }
    )
    cluster.set_node_ready("gpu-a", False)
    cluster.delete_pod("team-b", "other", 30)
    for _ in range(6):
        kube_cycle()
    assert cluster.pod("team-b", "other")["metadata"]["deletionTimestamp"]
