"""Gangs on the real API server: pods created unbound for the portal's scheduler name, bound
through pods/binding once the whole gang exists, run by the kubelet, and what the server's own
refusals (ResourceQuota, validation) leave behind: no partial gang, the server's words on the
job. The portal runs as its ServiceAccount under deploy/rbac.yaml."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from kubernetes import client

from portal.cluster.models import Placement
from portal.jobs.lifecycle import WAITING
from portal.jobs.models import Job, JobTask
from portal.tenants.models import Membership
from tests.factories import MembershipFactory, UserFactory
from tests.realcluster.conftest import NAMESPACE, ROOT
from tests.scheduler.conftest import submit_job, wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def user(nlp):
    researcher = UserFactory(username="alice")
    MembershipFactory(user=researcher, tenant=nlp, role=Membership.Role.RESEARCHER)
    return researcher


def gang_pods(admin: client.CoreV1Api, instance: str) -> dict[str, client.V1Pod]:
    pods = admin.list_namespaced_pod(NAMESPACE, label_selector=f"gpuportal.io/instance={instance}")
    return {pod.metadata.name: pod for pod in pods.items}


def active_placements(job: Job) -> dict[str, str]:
    return dict(
        Placement.objects.filter(job=job, state__in=Placement.ACTIVE_STATES).values_list(
            "pod_name", "node_name"
        )
    )


def test_deploy_smoke_sh_passes_as_the_portals_service_account(kubelet, portal_kubeconfig):
    kubelet.register_nodes(["smoke-a", "smoke-b"], gpus=8)
    env = {**os.environ, "KUBECONFIG": str(portal_kubeconfig), "PYTHON": sys.executable}
    answer = subprocess.run(  # noqa: S603
        ["/bin/bash", str(ROOT / "deploy" / "smoke.sh"), "--gpus", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert answer.returncode == 0, answer.stdout + answer.stderr


def test_a_gang_is_created_unbound_then_bound_whole_and_runs(
    kubelet, admin, backend, real_cycle, user, nlp_queue, instance
):
    kubelet.register_nodes(["gang-a", "gang-b"], gpus=8)
    job = submit_job(user, nlp_queue, "train", gpus=4, replicas=4)

    real_cycle()

    placed = active_placements(job)
    assert len(placed) == 4
    assert set(placed.values()) == {"gang-a", "gang-b"}
    pods = gang_pods(admin, instance)
    assert {name: pod.spec.node_name for name, pod in pods.items()} == placed
    for pod in pods.values():
        assert pod.spec.scheduler_name == "gpuportal"
        assert pod.metadata.owner_references[0].kind == "ConfigMap"
    wait_for(
        lambda: all(pod.status.phase == "Running" for pod in gang_pods(admin, instance).values()),
        "the kubelet to run the gang",
        timeout=30,
    )
    real_cycle()
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING


def test_a_quota_refusal_on_one_pod_of_a_gang_starts_none_of_it_and_the_job_waits_its_backoff(
    kubelet, admin, backend, real_cycle, user, nlp_queue, instance, settings
):
    # A namespace quota clears when other pods end: the job is not failed, it waits in the
    # queue for its backoff (portal.jobs.backoff) and says which quota and when it retries.
    settings.START_BACKOFF_BASE_SECONDS = 120  # longer than two cycles on a loaded machine
    kubelet.register_nodes(["quota-a", "quota-b"], gpus=8)
    quota = client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name=f"pods-{instance}"),
        spec=client.V1ResourceQuotaSpec(hard={"requests.nvidia.com/gpu": "12"}),
    )
    admin.create_namespaced_resource_quota(NAMESPACE, quota)
    try:
        wait_for(
            lambda: admin.read_namespaced_resource_quota(f"pods-{instance}", NAMESPACE).status.hard,
            "the quota controller to count the namespace",
            timeout=30,
        )
        job = submit_job(user, nlp_queue, "train", gpus=4, replicas=4)

        real_cycle(errors=True)

        bound = [pod for pod in gang_pods(admin, instance).values() if pod.spec.node_name]
        assert bound == []
        job.refresh_from_db()
        assert job.status in WAITING, job.status
        assert f"namespace quota pods-{instance} exceeded" in job.pending_reason
        assert "exceeded quota" in job.pending_reason, job.pending_reason  # the server's words
        assert "will retry at" in job.pending_reason, job.pending_reason
        assert [attempt["kind"] for attempt in job.start_attempts] == ["quota"]
        assert not Placement.objects.filter(
            job=job, state__in=[Placement.State.BOUND, Placement.State.RUNNING]
        ).exists()

        real_cycle()  # within the backoff: nothing of the job is created again

        job.refresh_from_db()
        assert job.status in WAITING, job.status
        assert len(job.start_attempts) == 1
        wait_for(
            lambda: gang_pods(admin, instance) == {},
            "the gang's unbound pods to be cleaned up",
            timeout=30,
        )
    finally:
        admin.delete_namespaced_resource_quota(f"pods-{instance}", NAMESPACE)


def test_the_servers_validation_refusal_reaches_the_job_in_its_words(
    kubelet, admin, backend, real_cycle, user, nlp_queue, instance
):
    kubelet.register_nodes(["invalid-a"], gpus=8)
    # An image reference the API server refuses (whitespace). The portal refuses it at submit
    # too now (jobspec.names); a job stored before that check, or one the check misses, still
    # reaches the server, whose refusal must reach the job in its words.
    job = submit_job(user, nlp_queue, "train", gpus=1, replicas=2, image="ghcr.io/x/y:1")
    JobTask.objects.filter(job=job).update(image="ghcr.io/x/y:1 ")

    real_cycle(errors=True)

    job.refresh_from_db()
    assert gang_pods(admin, instance) == {} or all(
        not pod.spec.node_name for pod in gang_pods(admin, instance).values()
    )
    assert "must not have leading or trailing whitespace" in job.pending_reason, job.pending_reason


def test_a_pod_another_scheduler_binds_before_the_bind_keeps_the_gang_off_that_node(
    kubelet, admin, backend, real_cycle, user, nlp_queue, instance, monkeypatch
):
    from scheduler.adapters import orchestrator

    kubelet.register_nodes(["race-a"], gpus=8)
    job = submit_job(user, nlp_queue, "train", gpus=4, replicas=2, min_available=2)
    reconcile = orchestrator.cluster_reconcile

    def racing(**kwargs):
        # After the cycle read the nodes and pods, another scheduler binds a pod there (as a
        # binding does: spec.nodeName set, no scheduler of the portal's asked).
        gpus = {"nvidia.com/gpu": "8"}
        admin.create_namespaced_pod(
            NAMESPACE,
            client.V1Pod(
                metadata=client.V1ObjectMeta(name=f"other-{instance}"),
                spec=client.V1PodSpec(
                    node_name="race-a",
                    containers=[
                        client.V1Container(
                            name="c",
                            image="x",
                            resources=client.V1ResourceRequirements(requests=gpus, limits=gpus),
                        )
                    ],
                ),
            ),
        )
        return reconcile(**kwargs)

    monkeypatch.setattr(orchestrator, "cluster_reconcile", racing)

    real_cycle()

    assert gang_pods(admin, instance) == {}  # none of the gang, bound or not
    job.refresh_from_db()
    assert job.status in WAITING, job.status
    assert [(a["kind"], a["node"]) for a in job.start_attempts] == [("node-taken", "race-a")]
    assert job.pending_reason.startswith("node race-a's GPUs were taken before the bind"), (
        job.pending_reason
    )
    assert "0 of 8 nvidia.com/gpu free, 8 needed" in job.pending_reason, job.pending_reason
    assert not Placement.objects.filter(
        job=job, state__in=[Placement.State.BOUND, Placement.State.RUNNING]
    ).exists()
