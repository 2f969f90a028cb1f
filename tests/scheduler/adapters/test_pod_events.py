"""Kubernetes Events on the portal's pods tell the story the portal tells: bound with the
gang, binding refused, evicted and why. Against the emulated API server."""

from __future__ import annotations

import pytest

from portal.cluster.models import Placement
from portal.jobs.models import Job
from portal.jobs.services import job_cancel
from portal.tenants.models import Membership
from tests.factories import MembershipFactory, PreemptionEventFactory, UserFactory
from tests.scheduler.conftest import other_workload_pod, submit_job

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}


@pytest.fixture
def user(nlp):
    researcher = UserFactory(username="alice")
    MembershipFactory(user=researcher, tenant=nlp, role=Membership.Role.RESEARCHER)
    return researcher


def events_of(cluster, pod: str) -> list[tuple[str, str, str, str]]:
    """(reason, type, message, reporting component) of the events on `pod`, in order."""
    table = cluster.on_loop(lambda: list(cluster.store.table("events").values()))
    return [
        (e["reason"], e["type"], e["message"], e["source"]["component"])
        for e in sorted(table, key=lambda e: int(e["metadata"]["resourceVersion"]))
        if e["involvedObject"]
        == {"apiVersion": "v1", "kind": "Pod", "name": pod, "namespace": NAMESPACE}  # fmt: skip
    ]


def test_a_bound_gang_and_a_cancelled_job_leave_their_story_on_the_pods(
    cluster, kube_cycle, user, nlp_queue
):
    cluster.add_node("gpu-a", GPU_NODE)
    job = submit_job(user, nlp_queue, "train", gpus=4, replicas=2)
    kube_cycle()
    pods = sorted(Placement.objects.filter(job=job).values_list("pod_name", flat=True))

    for pod in pods:
        assert events_of(cluster, pod) == [
            (
                "Scheduled",
                "Normal",
                f"Successfully assigned {NAMESPACE}/{pod} to gpu-a with its gang of 2",
                "gpuportal",
            )
        ]

    cluster.advance(1)
    job_cancel(job=job, actor=user)
    kube_cycle()
    assert events_of(cluster, pods[0])[-1] == (
        "Preempted",
        "Warning",
        "its job was cancelled",
        "gpuportal",
    )


def test_an_eviction_carries_the_preemption_sentence(cluster, kube_cycle, user, nlp_queue):
    cluster.add_node("gpu-a", GPU_NODE)
    job = submit_job(user, nlp_queue, "train", gpus=8)
    kube_cycle()
    pod = Placement.objects.get(job=job).pod_name
    cluster.advance(1)
    # What persist records when the core evicts the pod (here by hand: the job is cancelled
    # as an admin would, and the history says why).
    PreemptionEventFactory(
        victim_job=job, node_name="gpu-a", sentence="reclaimed for queue cv (guarantee 8)"
    )
    job_cancel(job=job, actor=user)
    kube_cycle()

    assert events_of(cluster, pod)[-1][:3] == (
        "Preempted",
        "Warning",
        "reclaimed for queue cv (guarantee 8)",
    )


def test_a_refused_bind_is_a_warning_on_the_pod(cluster, kube_cycle, user, nlp_queue):
    cluster.add_node("gpu-a", GPU_NODE)
    job = submit_job(user, nlp_queue, "train", gpus=8)
    cluster.reject_bind(f"{job.object_name}-worker-0", status=403)

    kube_cycle(errors=True)

    ((reason, kind, message, _),) = events_of(cluster, f"{job.object_name}-worker-0")
    assert (reason, kind) == ("FailedBinding", "Warning")
    assert "HTTP 403" in message


def test_a_pod_released_after_the_start_timeout_says_when_its_job_is_tried_again(
    cluster, kube_cycle, user, nlp_queue, settings
):
    settings.KUBERNETES_POD_START_TIMEOUT_SECONDS = 60
    cluster.add_node("gpu-a", GPU_NODE)
    cluster.on_loop(lambda: setattr(cluster.store.kubelet, "start_seconds", 10_000))
    job = submit_job(user, nlp_queue, "slow", gpus=8)
    kube_cycle(seconds=61)
    pod = Placement.objects.get(job=job).pod_name
    cluster.advance(1)
    assert [e[0] for e in events_of(cluster, pod)] == ["Scheduled"]

    kube_cycle()  # t=61: past the timeout

    job.refresh_from_db()
    reason, kind, message, _ = events_of(cluster, pod)[-1]
    assert (reason, kind) == ("BackOff", "Warning")
    assert message == job.pending_reason
    assert message.startswith(
        f"pod {pod} did not start on node gpu-a in time: not running after 60 s "
        "(ContainerCreating) (will retry at "
    )


def test_a_pod_the_kubelet_refused_says_which_node_its_job_avoids(
    cluster, kube_cycle, user, nlp_queue
):
    cluster.add_node("gpu-a", GPU_NODE)
    job = submit_job(user, nlp_queue, "train", gpus=8)
    kube_cycle()
    pod = Placement.objects.get(job=job).pod_name
    cluster.add_pod(other_workload_pod("other", "gpu-a"))
    cluster.advance(1)

    kube_cycle()

    reason, kind, message, _ = events_of(cluster, pod)[-1]
    assert (reason, kind) == ("BackOff", "Warning")
    assert message.startswith(f"the kubelet of node gpu-a refused pod {pod}: OutOfnvidia.com/gpu")
    assert "(avoiding node gpu-a until " in message


def test_a_pod_released_by_a_policy_that_fails_the_job_is_not_called_requeued(
    cluster, kube_cycle, user, nlp_queue
):
    cluster.add_node("gpu-a", GPU_NODE)
    job = submit_job(user, nlp_queue, "train", gpus=8)
    job.policies = [{"events": ["OutOfSync"], "action": "AbortJob"}]
    job.save(update_fields=["policies"])
    kube_cycle()
    pod = Placement.objects.get(job=job).pod_name
    cluster.add_pod(other_workload_pod("other", "gpu-a"))
    cluster.advance(1)

    kube_cycle()

    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    assert "Requeued" not in [e[0] for e in events_of(cluster, pod)]
