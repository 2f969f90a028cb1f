"""Whole scheduling cycles on the Kubernetes backend while the API server misbehaves.

The emulated API server (kmock, over HTTP; see conftest.py) answers 500s, 409s and stalls past
the client's read timeout for a few cycles, then recovers. Whatever it did, the cluster must
end up with exactly one pod per bound replica on the chosen node, running jobs must not be
mistaken for lost ones, and each cycle that could not finish says why in CycleRun.error.
"""

import asyncio

import kmock
import pytest

from jobspec.labels import replica_key
from portal.cluster.models import Placement
from portal.jobs.models import Job
from portal.scheduling.models import CycleRun
from portal.tenants.models import Membership
from scheduler.adapters import orchestrator as cycle_module
from scheduler.adapters.cluster.base import TransientClusterError
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import MembershipFactory, UserFactory
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"  # the conftest's, and settings.KUBERNETES_NAMESPACE
PODS = kmock.resource("v1/pods")
NODES = kmock.resource("v1/nodes")
SERVER_ERROR = kmock.KubernetesError(status=500, reason="InternalError", message="etcd timeout")


def stall():
    return asyncio.sleep(2)  # past the backend's 1 s read timeout


@pytest.fixture
def alice(nlp):
    user = UserFactory(username="alice")
    MembershipFactory(user=user, tenant=nlp, role=Membership.Role.RESEARCHER)
    return user


@pytest.fixture
def nodes(cluster):
    for name in ("gpu-a", "gpu-b"):
        cluster.add_node(name, {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"})


def submit(user, queue, name, *, replicas, gpus):
    return submit_job(
        user,
        queue,
        name,
        replicas=replicas,
        gpus=gpus,
        image="registry.local/train:1",
        min_available=replicas,
    )


def desired_pods() -> dict[str, str]:
    active = Placement.objects.filter(state__in=[Placement.State.BOUND, Placement.State.RUNNING])
    return dict(active.values_list("pod_name", "node_name"))


def emulated_pods(cluster) -> dict[str, str]:
    return {name: cluster.pod(NAMESPACE, name)["spec"]["nodeName"] for name in cluster.pod_names()}


def assert_converged(cluster):
    assert emulated_pods(cluster) == desired_pods()
    keys = [
        replica_key(cluster.pod(NAMESPACE, name)["metadata"]["labels"])
        for name in cluster.pod_names()
    ]
    assert len(keys) == len(set(keys)), "two pods serve one replica"


def start_running(cluster):
    for name in cluster.pod_names():
        cluster.patch_pod(NAMESPACE, name, {"status": {"phase": "Running"}})


def failing_cycle(backend) -> CycleRun:
    with pytest.raises(TransientClusterError):
        scheduling_cycle_run(backend=backend)
    return CycleRun.objects.order_by("-id").first()


def reject_creates_of_bound_pods(cluster, monkeypatch, *, status, times):
    """Before the next reconcile, make the API refuse each create of a bound pod `times` times
    with `status`, storing nothing (admission-style)."""
    reconcile = cycle_module.cluster_reconcile

    def with_rejections(**kwargs):
        for name in desired_pods():
            if cluster.pod(NAMESPACE, name) is None:
                cluster.reject_create(name, status=status, times=times)
        return reconcile(**kwargs)

    monkeypatch.setattr(cycle_module, "cluster_reconcile", with_rejections)


def test_cycles_through_500s_409s_and_timeouts_converge_to_one_pod_per_replica(
    cluster, backend, nodes, alice, nlp_queue, monkeypatch
):
    steady = submit(alice, nlp_queue, "steady", replicas=2, gpus=4)
    scheduling_cycle_run(backend=backend)
    assert_converged(cluster)
    start_running(cluster)
    scheduling_cycle_run(backend=backend)
    assert Job.objects.get(pk=steady.pk).status == Job.Status.RUNNING

    # Listing nodes fails for a whole cycle (500s), then listing pods stalls past the read
    # timeout: nothing is decided on a partial view, and the running job is not "lost".
    cluster.fail_next(kmock.action.LIST, SERVER_ERROR, times=4, resource=NODES)
    assert "HTTP 500" in failing_cycle(backend).error
    cluster.fail_next(kmock.action.LIST, stall, times=4)
    assert "gave up after 4 attempts" in failing_cycle(backend).error
    assert Job.objects.get(pk=steady.pk).status == Job.Status.RUNNING
    assert Placement.objects.filter(job=steady, state=Placement.State.RUNNING).count() == 2

    # New work while creates fail: a 500 after the pod was stored, a stall after it was
    # stored (both retried into a 409 that finds the same replica), and 409s for a name that
    # is then free (retried until the attempts run out: an error for this cycle).
    submit(alice, nlp_queue, "burst", replicas=2, gpus=2)
    cluster.fail_next(kmock.action.CREATE, SERVER_ERROR)
    cluster.fail_next(kmock.action.CREATE, stall)
    run = scheduling_cycle_run(backend=backend)
    assert run.error == ""
    assert_converged(cluster)

    late = submit(alice, nlp_queue, "late", replicas=1, gpus=4)
    reject_creates_of_bound_pods(cluster, monkeypatch, status=409, times=4)
    run = scheduling_cycle_run(backend=backend)
    late_pod = Placement.objects.get(job=late).pod_name
    assert f"create {NAMESPACE}/{late_pod}" in run.error
    assert "gave up after 4 attempts" in run.error
    assert cluster.pod(NAMESPACE, late_pod) is None
    monkeypatch.undo()

    # Healthy again: the next cycle finishes the job, and another one changes nothing.
    run = scheduling_cycle_run(backend=backend)
    assert run.error == ""
    assert_converged(cluster)
    creates_before = len(cluster.requests(kmock.action.CREATE))
    scheduling_cycle_run(backend=backend)
    assert len(cluster.requests(kmock.action.CREATE)) == creates_before

    # Every job is placed whole, once; the running one kept its first pods.
    for job, replicas in ((steady, 2), ("burst", 2), (late, 1)):
        rows = Placement.objects.filter(job__name=getattr(job, "name", job))
        assert rows.count() == replicas
        assert set(rows.values_list("state", flat=True)) <= {"bound", "running"}
    assert Job.objects.get(pk=steady.pk).status == Job.Status.RUNNING
    assert Job.objects.get(pk=steady.pk).preemption_count == 0


def test_an_unavailable_api_server_costs_a_cycle_a_few_writes_not_all_of_them(
    cluster, backend, nodes, alice, nlp_queue, monkeypatch
):
    job = submit(alice, nlp_queue, "wide", replicas=8, gpus=2)
    reject_creates_of_bound_pods(cluster, monkeypatch, status=503, times=4)

    run = scheduling_cycle_run(backend=backend)

    # Three pods tried four times each; the other five skipped at once and reported.
    assert len(cluster.requests(kmock.action.CREATE)) == 3 * 4
    assert run.error.count("gave up after 4 attempts: HTTP 503") == 3
    assert run.error.count("skipped, the API server failed 3 writes in a row") == 5
    assert cluster.pod_names() == []

    monkeypatch.undo()
    cluster.on_loop(cluster.handler.rejections.clear)
    run = scheduling_cycle_run(backend=backend)
    assert run.error == ""
    assert len(cluster.pod_names()) == 8
    assert Placement.objects.filter(job=job).count() == 8
    assert_converged(cluster)
