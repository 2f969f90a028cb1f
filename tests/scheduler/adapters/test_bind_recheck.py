"""The bind pass rechecks a gang's nodes just before creating its pods: a node another
scheduler filled after the cycle read the cluster gets none of the gang, the job gives its
placements back and avoids that node (never counted toward its cap), and the normal path
creates as before. The rule alone (gangs_taken), then whole cycles on the emulated API server
(listing the node's pods, and through the watch cache) and on the simulated cluster."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta

import kmock
import pytest
from kubernetes import client
from prometheus_client import REGISTRY

from jobspec.labels import JOB_ID, MANAGED
from jobspec.pods import DesiredPod
from portal.cluster.models import Placement, SimulatedPod
from portal.jobs.models import Job
from portal.tenants.models import Membership
from scheduler.adapters import orchestrator
from scheduler.adapters.bind_recheck import gangs_taken
from scheduler.adapters.cluster.base import NodeRoom, TransientClusterError
from scheduler.adapters.cluster.kubernetes import KubernetesBackend, RetryPolicy
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.cluster.watch_cache import ClusterCache, manifests_translation
from scheduler.adapters.reconcile import ReconcilePlan, apply
from tests.factories import MembershipFactory, NodeFactory, UserFactory
from tests.scheduler.adapters.cluster.fakes import EmptyCluster
from tests.scheduler.conftest import other_workload_pod, submit_job

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
GPU = "nvidia.com/gpu"
GPU_NODE = {"cpu": "64", "memory": "512Gi", GPU: "8", "pods": "110"}


# -- the rule -------------------------------------------------------------------------------


def pod(job: str, node: str, gpus: int, replica: int = 0) -> DesiredPod:
    return DesiredPod(
        name=f"gp-{job}-worker-{replica}",
        namespace=NAMESPACE,
        node_name=node,
        image="x",
        command=[],
        env={},
        requests={"cpu": 1000, "memory": 2**30, GPU: gpus},
        labels={JOB_ID: job},
        annotations={},
    )


def room(free: int, *, others: int = 0, portal: int = 0) -> NodeRoom:
    return NodeRoom(
        allocatable={"cpu": 64000, "memory": 2**40, GPU: free + others + portal},
        used_by_others={GPU: others} if others else {},
        used_by_portal={GPU: portal} if portal else {},
    )


def test_a_gang_that_fits_its_nodes_is_not_taken():
    gangs = {"7": [pod("7", "gpu-a", 4, 0), pod("7", "gpu-a", 4, 1), pod("7", "gpu-b", 8, 2)]}

    assert gangs_taken(gangs, {"gpu-a": room(8, others=0), "gpu-b": room(8)}) == {}


def test_a_node_short_of_the_gangs_gpus_takes_the_whole_gang_and_says_by_how_much():
    gangs = {"7": [pod("7", "gpu-a", 4, 0), pod("7", "gpu-b", 4, 1)]}
    rooms = {"gpu-a": room(8), "gpu-b": room(2, others=4, portal=2)}

    (error,) = gangs_taken(gangs, rooms).values()

    assert (error.node, error.pod, error.namespace) == ("gpu-b", "gp-7-worker-1", NAMESPACE)
    assert error.words == (
        "2 of 8 nvidia.com/gpu free, 4 needed (other workloads' pods hold 4, the portal's 2)"
    )


def test_gangs_of_one_pass_are_reserved_in_job_order_on_a_shared_node():
    gangs = {"8": [pod("8", "gpu-a", 4)], "7": [pod("7", "gpu-a", 4)], "9": [pod("9", "gpu-a", 2)]}

    taken = gangs_taken(gangs, {"gpu-a": room(6)})

    assert list(taken) == ["8"]  # 7 reserved 4 of 6; 9's 2 still fit after 8 was refused
    assert taken["8"].words.endswith(", gangs bound before it this pass 4)")


def test_only_resources_the_node_advertises_are_rechecked_and_unknown_nodes_not_at_all():
    shared = pod("7", "gpu-a", 0)
    shared.requests.update({"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 4096})
    rooms = {"gpu-a": NodeRoom(allocatable={"cpu": 1, "volcano.sh/vgpu-number": 4})}
    # cpu is the cycle's view's alone; the node advertises no vgpu-memory (a scheduler's
    # resource, as the kubelet ignores it); a node the backend does not know is left alone.
    assert gangs_taken({"7": [shared], "8": [pod("8", "gpu-x", 8)]}, rooms) == {}

    rooms["gpu-a"].used_by_others["volcano.sh/vgpu-number"] = 4
    assert list(gangs_taken({"7": [shared]}, rooms)) == ["7"]


# -- the pass ------------------------------------------------------------------------------


class RoomsAsked(EmptyCluster):
    """Creates and binds anything; answers `rooms` (or raises `fails`) and records the asks."""

    def __init__(self, rooms=None, fails: Exception | None = None) -> None:
        self.rooms, self.fails, self.asked, self.made = rooms or {}, fails, [], []

    def nodes_room(self, names, ignore=()):
        self.asked.append(list(names))
        if self.fails is not None:
            raise self.fails
        return self.rooms

    def create_pod(self, pod):
        self.made.append(pod.name)

    def bind_pod(self, name, namespace, node_name):
        pass


def gang(job: str, *nodes: str, gpus: int = 4) -> list[DesiredPod]:
    return [
        dataclasses.replace(pod(job, node, gpus, i), min_available=len(nodes))
        for i, node in enumerate(nodes)
    ]


def test_only_gangs_bound_this_pass_are_rechecked_one_read_of_their_nodes_in_all():
    complete, waiting = gang("7", "gpu-a", "gpu-b"), gang("8", "gpu-c", "gpu-c", "gpu-c")
    backend = RoomsAsked({"gpu-a": room(8), "gpu-b": room(2, others=6)})
    # Job 8 has one of its three pods to make: it is not bound this pass, so not rechecked.
    passing = ReconcilePlan(create=[*complete, waiting[0]], present={"8": 1})

    report = apply(passing, backend)

    assert backend.asked == [["gpu-a", "gpu-b"]]
    assert backend.made == [waiting[0].name]  # nothing of job 7
    assert report.bound == []
    assert list(report.job_errors) == ["7"]
    assert report.job_error_pods == {"7": ("gp-7-worker-1", NAMESPACE)}
    assert report.errors == []  # a decision, not a failure of the cluster


def test_a_recheck_that_cannot_read_leaves_the_pass_as_it_was():
    backend = RoomsAsked(fails=TransientClusterError("list the pods on node gpu-a: gave up"))

    report = apply(ReconcilePlan(create=gang("7", "gpu-a", "gpu-a")), backend)

    assert backend.made == ["gp-7-worker-0", "gp-7-worker-1"]
    assert report.bound == [f"{NAMESPACE}/gp-7-worker-0", f"{NAMESPACE}/gp-7-worker-1"]
    assert report.job_errors == {}


# -- whole cycles ---------------------------------------------------------------------------


@pytest.fixture
def user(nlp):
    researcher = UserFactory(username="alice")
    MembershipFactory(user=researcher, tenant=nlp, role=Membership.Role.RESEARCHER)
    return researcher


def intrude_before_reconcile(monkeypatch, bind_foreign) -> list[str]:
    """Between the cycle's reads (phases 1-2) and its reconcile (phase 6), another scheduler
    binds a pod onto the node the job's first placement went to; returns that node."""
    nodes: list[str] = []
    reconcile = orchestrator.cluster_reconcile

    def racing(**kwargs):
        if not nodes:
            placement = Placement.objects.filter(state="bound").order_by("id").first()
            nodes.append(placement.node_name)
            bind_foreign(placement.node_name)
        return reconcile(**kwargs)

    monkeypatch.setattr(orchestrator, "cluster_reconcile", racing)
    return nodes


def ours(names, job: Job) -> list[str]:
    return [name for name in names if name.startswith(f"{job.object_name}-")]


def node_lists(cluster) -> list[str]:
    """The field selectors of the lists of one node's pods, the recheck's reads."""
    selectors = (r.params.get("fieldSelector") or "" for r in cluster.requests(kmock.action.LIST))
    return sorted(selector for selector in selectors if selector.startswith("spec.nodeName="))


def node_taken_count() -> float:
    labels = {"reason": "node-taken"}
    return REGISTRY.get_sample_value("gpuportal_start_failures_total", labels) or 0.0


def assert_gave_back(job: Job, node: str) -> None:
    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED  # back in the queue, not failed
    assert not Placement.objects.filter(job=job, state__in=["bound", "running"]).exists()
    assert job.pending_reason.startswith(
        f"node {node}'s GPUs were taken before the bind of pod {job.object_name}-worker-"
    )
    assert "8 needed (other workloads' pods hold 8, the portal's 0)" in job.pending_reason
    assert f"(avoiding node {node} until " in job.pending_reason
    assert [(a["kind"], a["node"]) for a in job.start_attempts] == [("node-taken", node)]


def test_a_pod_bound_by_another_scheduler_before_the_bind_gets_none_of_the_gang(
    cluster, kube_cycle, user, nlp_queue, monkeypatch
):
    for name in ("gpu-a", "gpu-b"):
        cluster.add_node(name, GPU_NODE)
    # maxRetry 1: a failure that counted toward the cap would end the job at once.
    job = submit_job(user, nlp_queue, "train", gpus=4, replicas=2, min_available=2, max_retry=1)
    taken = intrude_before_reconcile(
        monkeypatch, lambda node: cluster.add_pod(other_workload_pod("intruder", node, gpus=8))
    )
    counted = node_taken_count()

    kube_cycle()

    (node,) = taken
    assert ours(cluster.pod_names(), job) == []  # no pod of the gang, bound or not
    assert_gave_back(job, node)
    assert node_taken_count() == counted + 1
    events = cluster.on_loop(lambda: list(cluster.store.table("events").values()))
    ((reason, message),) = [
        (e["reason"], e["message"])
        for e in events
        if e["involvedObject"]["name"].startswith(f"{job.object_name}-")
    ]
    assert (reason, message) == ("BackOff", job.pending_reason)

    # Placed again at once, on the node it does not avoid, and started whole there.
    kube_cycle()
    other = ({"gpu-a", "gpu-b"} - {node}).pop()
    job.refresh_from_db()
    assert set(
        Placement.objects.filter(job=job, state="bound").values_list("node_name", flat=True)
    ) == {other}
    pods = [cluster.pod(NAMESPACE, name) for name in ours(cluster.pod_names(), job)]
    assert len(pods) == 2
    assert {p["spec"]["nodeName"] for p in pods} == {other}
    assert job.status != Job.Status.FAILED


def test_without_a_race_the_gang_is_created_and_bound_after_one_list_per_node(
    cluster, kube_cycle, user, nlp_queue
):
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        cluster.add_node(name, GPU_NODE)
    cluster.add_pod(other_workload_pod("neighbour", "gpu-c", gpus=4))
    job = submit_job(user, nlp_queue, "train", gpus=8, replicas=2, min_available=2)

    kube_cycle()

    placed = dict(Placement.objects.filter(job=job).values_list("pod_name", "node_name"))
    assert {name: cluster.pod(NAMESPACE, name)["spec"]["nodeName"] for name in placed} == placed
    assert Job.objects.get(pk=job.pk).start_attempts == []
    assert node_lists(cluster) == sorted(f"spec.nodeName={n}" for n in set(placed.values()))


def test_through_the_watch_cache_the_recheck_reads_memory_and_sees_the_intruder(
    cluster, user, nlp_queue, monkeypatch
):
    for name in ("gpu-a", "gpu-b"):
        cluster.add_node(name, GPU_NODE)
    backend = KubernetesBackend.from_configuration(
        client.Configuration(host=cluster.url), NAMESPACE, (GPU,),
        RetryPolicy(attempts=3, base_delay=0.01, sleep=lambda _: None), request_timeout=(2.0, 5.0),
    )  # fmt: skip
    cache = ClusterCache(backend.core_v1, manifests_translation(), watch_seconds=5)
    backend.cache = cache
    try:
        job = submit_job(user, nlp_queue, "train", gpus=8, replicas=1, max_retry=1)

        def bind_foreign(node: str) -> None:
            cluster.add_pod(other_workload_pod("intruder", node, gpus=8))
            deadline = time.monotonic() + 10
            while cache.nodes_room([node])[node].used_by_others.get(GPU) != 8:
                assert time.monotonic() < deadline, "the watch never told the cache"
                time.sleep(0.02)

        taken = intrude_before_reconcile(monkeypatch, bind_foreign)
        now = datetime.fromtimestamp(cluster.store.now, tz=UTC)

        orchestrator.scheduling_cycle_run(backend=backend, now=lambda: now)

        (node,) = taken
        assert ours(cluster.pod_names(), job) == []
        assert_gave_back(job, node)
        assert node_lists(cluster) == []  # read from memory
    finally:
        cache.stop()


def test_on_the_simulated_cluster_another_workloads_pod_keeps_the_gang_off_the_node(
    user, nlp_queue, monkeypatch
):
    NodeFactory(name="gpu-a")
    NodeFactory(name="gpu-b")
    clock = [datetime(2026, 12, 1, 12, 0, tzinfo=UTC)]
    backend = SimulatedBackend(default_run_seconds=600, now=lambda: clock[0])
    job = submit_job(user, nlp_queue, "train", gpus=4, replicas=2, min_available=2, max_retry=1)

    def bind_foreign(node: str) -> None:
        SimulatedPod.objects.create(
            name="intruder", namespace="team-b", node_name=node, requests={GPU: 8}, phase="Running"
        )

    taken = intrude_before_reconcile(monkeypatch, bind_foreign)

    orchestrator.scheduling_cycle_run(backend=backend, now=lambda: clock[0])

    (node,) = taken
    assert not SimulatedPod.objects.filter(name__startswith=f"{job.object_name}-").exists()
    assert_gave_back(job, node)

    clock[0] += timedelta(seconds=1)
    orchestrator.scheduling_cycle_run(backend=backend, now=lambda: clock[0])
    nodes = set(
        SimulatedPod.objects.filter(name__startswith=f"{job.object_name}-").values_list(
            "node_name", flat=True
        )
    )
    assert nodes == {({"gpu-a", "gpu-b"} - {node}).pop()}


def test_on_the_simulated_cluster_the_gangs_own_pods_are_not_in_its_way(db):
    # An overlapping cycle may have made and bound the gang's pods since this pass listed the
    # cluster: the room for the gang leaves them out.
    NodeFactory(name="gpu-a")
    backend = SimulatedBackend(default_run_seconds=600)
    SimulatedPod.objects.create(
        name="gp-7-worker-0", namespace=NAMESPACE, node_name="gpu-a", requests={GPU: 8},
        phase="Running", labels={MANAGED: "true"},
    )  # fmt: skip

    assert backend.nodes_room(["gpu-a"])["gpu-a"].free(GPU) == 0
    assert backend.nodes_room(["gpu-a"], [(NAMESPACE, "gp-7-worker-0")])["gpu-a"].free(GPU) == 8
