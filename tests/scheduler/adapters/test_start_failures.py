"""A refusal that clears by itself is a failed start attempt: a namespace quota exceeded waits
in the queue with its backoff and never fails the job; a pod name another portal's object holds
releases the job's GPUs at once; a Pod Security 403 stays final. Whole cycles against the
emulated API server."""

from __future__ import annotations

import pytest

from portal.cluster.models import Placement
from portal.jobs.models import Job
from portal.tenants.models import Membership
from tests.factories import MembershipFactory, UserFactory
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
QUOTA = (
    "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=8, "
    "used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8"
)


@pytest.fixture
def user(nlp):
    researcher = UserFactory(username="alice")
    MembershipFactory(user=researcher, tenant=nlp, role=Membership.Role.RESEARCHER)
    return researcher


@pytest.fixture
def node(cluster):
    cluster.add_node("gpu-a", GPU_NODE)
    return "gpu-a"


def holds_gpus(job: Job) -> bool:
    return Placement.objects.filter(job=job, state__in=["bound", "running"]).exists()


def test_a_quota_refusal_waits_with_backoff_never_fails_and_runs_once_it_clears(
    cluster, kube_cycle, user, nlp_queue, node, settings
):
    settings.START_BACKOFF_BASE_SECONDS, settings.START_BACKOFF_MAX_SECONDS = 2, 8
    job = submit_job(user, nlp_queue, "train", gpus=8)
    name = f"{job.object_name}-worker-0"
    # Each new try of the replica is a new pod (-a1, -a2, ...): the quota refuses four, one
    # more than the cap of any other kind of failure.
    for attempt in ("", "-a1", "-a2", "-a3"):
        cluster.reject_create(f"{name}{attempt}", status=403, message=QUOTA)

    kube_cycle(errors=True, seconds=1)

    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED
    assert job.pending_reason.startswith(
        f'namespace quota gpu-quota exceeded: pods "{name}" is forbidden: {QUOTA} (will retry at '
    )
    assert job.pending_reason.endswith(" UTC)")
    assert not holds_gpus(job)
    creates = 1
    for _ in range(40):  # 40 s: four refusals, backing off 2, 4, 8, 8 s after them
        kube_cycle(errors=True, seconds=1)
        job.refresh_from_db()
        assert job.status != Job.Status.FAILED
        if job.status in (Job.Status.PENDING, Job.Status.PREEMPTED):
            assert "namespace quota gpu-quota exceeded" in job.pending_reason
            assert not holds_gpus(job)
        creates = len(job.start_attempts)
        if job.status == Job.Status.ADMITTED:
            break
    assert creates == 4
    assert [a["kind"] for a in job.start_attempts] == ["quota"] * 4
    assert [a["quota"] for a in job.start_attempts] == ["gpu-quota"] * 4
    cluster.advance(1)
    kube_cycle()
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING


def test_a_pod_security_403_stays_final(cluster, kube_cycle, user, nlp_queue, node):
    job = submit_job(user, nlp_queue, "train", gpus=8)
    refusal = 'violates PodSecurity "restricted:latest": privileged (container "main")'
    cluster.reject_create(f"{job.object_name}-worker-0", status=403, message=refusal)

    kube_cycle(errors=True)

    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    assert refusal in job.pending_reason
    assert job.start_attempts == []


def test_a_pod_name_another_portal_holds_gives_the_gpus_back_at_once(
    cluster, kube_cycle, user, nlp_queue, node
):
    job = submit_job(user, nlp_queue, "train", gpus=8)
    name = f"{job.object_name}-worker-0"
    cluster.add_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": NAMESPACE,
                "labels": {
                    "gpuportal.io/managed": "true",
                    "gpuportal.io/instance": "other-portal",
                    "gpuportal.io/job-id": "77",
                    "gpuportal.io/task": "worker",
                    "gpuportal.io/replica": "0",
                },
            },
            "spec": {"containers": [{"name": "main", "image": "x"}]},
            "status": {"phase": "Pending"},
        }
    )

    kube_cycle(errors=True)

    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED
    assert not holds_gpus(job)
    # Whose the name is, and nothing of the other portal's job (its id, task, replica).
    assert job.pending_reason.startswith(
        f"pod {name} was not made: a name it needs is taken: create pod {NAMESPACE}/{name}: "
        "name taken by an object of portal instance other-portal (will retry at "
    )
    assert "(will retry at " in job.pending_reason
    assert [a["kind"] for a in job.start_attempts] == ["name-taken"]
    for _ in range(3):
        kube_cycle(errors=True, seconds=5)
    # The other portal's pod is not the portal's to delete.
    kept = cluster.pod(NAMESPACE, name)
    assert kept is not None
    assert kept["metadata"]["labels"]["gpuportal.io/instance"] == "other-portal"


def test_a_quota_refusal_of_one_pod_of_a_gang_starts_none_of_it(
    cluster, kube_cycle, user, nlp_queue, node
):
    cluster.add_node("gpu-b", GPU_NODE)
    job = submit_job(user, nlp_queue, "train", gpus=4, replicas=4)
    cluster.reject_create(f"{job.object_name}-worker-2", status=403, message=QUOTA)

    kube_cycle(errors=True)

    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED
    assert "namespace quota gpu-quota exceeded" in job.pending_reason
    assert not holds_gpus(job)
    ours = [
        cluster.pod(NAMESPACE, n)
        for n in cluster.pod_names()
        if n.startswith(f"{job.object_name}-")
    ]
    assert ours  # the pods created before the refusal, unbound
    assert all(not (pod or {}).get("spec", {}).get("nodeName") for pod in ours)
    kube_cycle(errors=True, seconds=1)  # within the backoff: the created pods are removed
    cluster.advance(1)
    assert [n for n in cluster.pod_names() if n.startswith(f"{job.object_name}-")] == []
