"""Pods that cannot start say so on their job at once, give their placement back after the
start timeout, their grace, or a kubelet's admission refusal, and the job backs off (its own
backoff, or the refusing node's) up to its cap; pods stuck Terminating on a node that cannot
confirm are force-deleted. Whole cycles against the emulated API server."""

from __future__ import annotations

from datetime import timedelta

import pytest

from portal.cluster.models import Placement
from portal.jobs.backoff import attempts_of, in_backoff
from portal.jobs.limits import start_backoff
from portal.jobs.models import Job
from portal.jobs.services import job_cancel, job_submit
from portal.tenants.models import Membership
from scheduler.adapters.observe import cluster_observe
from tests.factories import MembershipFactory, UserFactory
from tests.scheduler.conftest import submit_job

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


def test_an_image_that_does_not_pull_gives_the_gpus_back_after_its_grace_and_backs_off(
    cluster, kube_cycle, user, nlp_queue, node, settings
):
    settings.START_BLOCKED_GRACE_SECONDS = 20
    cluster.fail_image_pull(BAD_IMAGE)
    job = submit_job(user, nlp_queue, "typo", gpus=8, image=BAD_IMAGE)
    kube_cycle(seconds=15)  # placed and bound at t=0
    pod = pod_of(job)
    cluster.advance(1)
    kube_cycle(seconds=15)  # t=15: within the grace, the reason says why at once
    job.refresh_from_db()
    assert job.status == Job.Status.ADMITTED
    assert "cannot start on node gpu-a: ErrImagePull" in job.pending_reason

    kube_cycle(seconds=5)  # t=30: past it: the GPUs go back, the job backs off 10 s

    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED
    assert job.pending_reason.startswith(
        f"pod {pod} could not pull its image on node gpu-a: ErrImagePull"
    )
    assert "will retry at " in job.pending_reason
    assert job.pending_reason.endswith("; start failure 1 of 3)")
    assert [a["kind"] for a in job.start_attempts] == ["image-pull"]
    assert not Placement.objects.filter(job=job, state__in=["bound", "running"])
    cluster.advance(1)

    kube_cycle(seconds=5)  # t=35: it waits its backoff (until t=40)
    job.refresh_from_db()
    assert job.status in (Job.Status.PREEMPTED, Job.Status.PENDING)
    assert "will retry at " in job.pending_reason
    assert not Placement.objects.filter(job=job, state__in=["bound", "running"])

    kube_cycle()  # t=40: placed again, a new attempt of the replica
    job.refresh_from_db()
    assert job.status == Job.Status.ADMITTED
    assert Placement.objects.get(job=job, state="bound").pod_name == f"{pod}-a1"
    assert cluster.pod(NAMESPACE, pod) is None  # the unstarted pod is deleted


def test_an_init_containers_image_pull_failure_is_the_jobs_reason(
    cluster, kube_cycle, user, nlp_queue, node
):
    cluster.fail_image_pull(BAD_IMAGE)
    template = {
        "spec": {
            "initContainers": [{"name": "fetch", "image": BAD_IMAGE}],
            "containers": [
                {
                    "name": "main",
                    "image": "ghcr.io/example/train:1",
                    "resources": {"limits": {"nvidia.com/gpu": 8}},
                }
            ],
        }
    }
    job = job_submit(
        submitter=user,
        queue=nlp_queue,
        name="init",
        tasks=[{"name": "worker", "replicas": 1, "pod_template": template}],
    )
    kube_cycle()
    cluster.advance(1)

    kube_cycle()

    job.refresh_from_db()
    assert job.pending_reason.startswith(f"pod {pod_of(job)} cannot start on node gpu-a: ")
    assert f'ErrImagePull: init container fetch: Back-off pulling image "{BAD_IMAGE}"' in (
        job.pending_reason
    )


def test_an_image_that_never_pulls_fails_the_job_at_its_cap_with_the_kubelets_words(
    cluster, kube_cycle, user, nlp_queue, node, settings, cycle_clock
):
    settings.START_BLOCKED_GRACE_SECONDS = 0
    cluster.fail_image_pull(BAD_IMAGE)
    job = submit_job(user, nlp_queue, "typo", gpus=8, image=BAD_IMAGE)
    held_in_backoff = []
    for _ in range(60):
        kube_cycle(seconds=2)
        cluster.advance(1)
        job.refresh_from_db()
        attempts = attempts_of(job.start_attempts)
        holding = Placement.objects.filter(job=job, state__in=["bound", "running"]).exists()
        if holding and in_backoff(attempts, start_backoff(), cycle_clock.now):
            held_in_backoff.append(cycle_clock.now)
        if job.status == Job.Status.FAILED:
            break

    assert job.status == Job.Status.FAILED
    assert job.pending_reason.startswith(f"pod {pod_of(job)}")
    assert "could not pull its image on node gpu-a: ErrImagePull" in job.pending_reason
    assert BAD_IMAGE in job.pending_reason  # the kubelet's words
    assert job.pending_reason.endswith("the job failed: 3 start failures of this kind (maxRetry 3)")
    assert held_in_backoff == []  # no GPU held while it backs off
    attempts = attempts_of(job.start_attempts)
    assert len(attempts) == 3
    gaps = [(b.at - a.at).total_seconds() for a, b in zip(attempts, attempts[1:], strict=False)]
    assert gaps[0] >= 10  # base 10 s, doubling
    assert gaps[1] >= 20
    assert not Placement.objects.filter(job=job, state__in=["bound", "running"])


def test_a_pod_that_never_starts_gives_its_placement_back_after_the_timeout(
    cluster, kube_cycle, backend, user, nlp_queue, node, cycle_clock
):
    cluster.on_loop(lambda: setattr(cluster.store.kubelet, "start_seconds", 10_000))
    job = submit_job(user, nlp_queue, "slow", gpus=8)
    kube_cycle()
    cluster.advance(1)

    cluster_observe(
        pods=backend.list_pods(),
        now=cycle_clock.now + timedelta(seconds=61),
        start_timeout_seconds=60,
    )

    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED
    assert job.pending_reason.startswith(
        f"pod {pod_of(job)} did not start on node gpu-a in time: not running after 60 s "
        "(ContainerCreating) (will retry at "
    )
    assert [a["kind"] for a in job.start_attempts] == ["start-timeout"]


def test_a_lost_pod_still_on_its_node_holds_its_gpus_until_it_is_gone(
    cluster, kube_cycle, backend, user, nlp_queue, node, cycle_clock
):
    cluster.on_loop(lambda: setattr(cluster.store.kubelet, "start_seconds", 10_000))
    job = submit_job(user, nlp_queue, "slow", gpus=8)
    kube_cycle()
    cluster.advance(1)
    pod = pod_of(job)

    cluster_observe(
        pods=backend.list_pods(),
        now=cycle_clock.now + timedelta(seconds=61),
        start_timeout_seconds=60,
    )

    # Its pod is still on gpu-a: the placement releases (the snapshot counts it on the node,
    # so its GPUs go to no one else) until the pod is gone.
    placement = Placement.objects.get(job=job, pod_name=pod)
    assert placement.state == Placement.State.RELEASING
    cluster.delete_pod(NAMESPACE, pod, grace_seconds=0)
    cluster_observe(pods=backend.list_pods(), now=cycle_clock.now + timedelta(seconds=62))
    placement.refresh_from_db()
    assert placement.state == Placement.State.DELETED


def test_a_kubelet_admission_refusal_keeps_the_job_off_that_node_and_it_runs_elsewhere(
    cluster, kube_cycle, backend, user, nlp_queue, node, cycle_clock
):
    cluster.fail_admission("gpu-a", "nvidia.com/gpu")
    job = submit_job(user, nlp_queue, "train", gpus=8)
    kube_cycle()
    cluster.advance(1)
    pod = pod_of(job)
    assert cluster.pod(NAMESPACE, pod)["status"]["reason"] == "OutOfnvidia.com/gpu"

    # Observed: the job is requeued, and gpu-a is avoided for 10 s.
    cluster_observe(pods=backend.list_pods(), now=cycle_clock.now)

    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED
    assert job.pending_reason.startswith(
        f"the kubelet of node gpu-a refused pod {pod}: OutOfnvidia.com/gpu"
    )
    assert "(avoiding node gpu-a until " in job.pending_reason
    assert job.pending_reason.endswith("; start failure 1 of 3)")
    kube_cycle(seconds=1)  # gpu-a alone would take it: it waits
    cluster.advance(1)
    kube_cycle(seconds=1)
    job.refresh_from_db()
    # The refused pod held its place until the reconcile deleted it; then the job is requeued
    # as an evicted one is, and waits.
    assert job.status == Job.Status.PENDING
    assert not Placement.objects.filter(job=job).exclude(state="deleted").exists()
    assert "node refused this job's pod recently; it may be tried again at " in (job.pending_reason)

    cluster.add_node("gpu-b", GPU_NODE)
    kube_cycle()

    job.refresh_from_db()
    assert job.status == Job.Status.ADMITTED
    assert Placement.objects.get(job=job, state="bound").node_name == "gpu-b"


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
