"""One ORM -> core mapping: the quota preview gives the core the nodes and the queue tree the
scheduling cycle's snapshot has, field by field, and counts demand as the cycle does."""

import dataclasses
from datetime import UTC, datetime

import pytest

from portal.jobs.models import Job
from portal.queues import preview as preview_module
from portal.queues.models import Queue
from portal.queues.preview import current_demand, queue_preview, tenant_preview
from portal.scheduling.mapping import capacity_nodes, device_memory_mib
from portal.tenants.quota import tenant_node_name
from scheduler.adapters.snapshot import snapshot_build
from scheduler.core.config import DEFAULT_CONF_TEXT
from scheduler.core.cycle import run_cycle
from tests.factories import (
    JobFactory,
    JobTaskFactory,
    NodeFactory,
    PlacementFactory,
    QueueFactory,
    SchedulerConfigFactory,
    TenantFactory,
)

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
FLAT_CONF = DEFAULT_CONF_TEXT.replace("    enableHierarchy: true\n", "")
GiB = 1024**3


@pytest.fixture
def world(nlp, vision, nlp_queue, vision_queue):
    """Nodes with every field the core reads set to something other than its default, quotas
    on both levels, a closed queue, a tenant without queues, pending and running jobs."""
    NodeFactory(
        name="a-mars",
        gpu_resource_name="mars-tech.com/gpu",
        gpu_model="MTT-S4000",
        gpu_memory_mib=49152,
        labels={"pool": "train", "gpu-model": "MTT-S4000"},
        topology_labels={"topology.kubernetes.io/zone": "rack-b", "volcano.sh/hypernode": "s1"},
        taints=[{"key": "dedicated", "value": "nlp", "effect": "NoSchedule"}, {"key": "gpu"}],
        pods_capacity=64,
        used_by_others={"cpu": 2000, "mars-tech.com/gpu": 1, "hugepages-2Mi": 5},
    )
    NodeFactory(name="b-cordoned", schedulable=False, gpu_model="A100", gpu_memory_mib=40960)
    NodeFactory(name="c-plain", gpu_model="", gpu_memory_mib=0, labels={}, topology_labels={})
    NodeFactory(name="d-not-ready", ready=False)
    NodeFactory(name="e-deleted", in_cluster=False)
    for tenant, values in (
        (nlp, {"weight": 3, "guarantee_gpus": 8, "capability_gpus": 24}),
        (vision, {"borrowing_limit_gpus": 4, "capability_cpu_millis": 500_000}),
    ):
        for field, value in values.items():
            setattr(tenant, field, value)
        tenant.save()
    TenantFactory(name="quiet", guarantee_gpus=2)  # no queues
    QueueFactory(tenant=nlp, name="nlp-dev", weight=5, capability_gpus=8, priority=7)
    QueueFactory(tenant=vision, name="vision-old", state=Queue.State.CLOSED, reclaimable=False)
    running = JobFactory(queue=vision_queue, status=Job.Status.RUNNING)
    task = JobTaskFactory(job=running, replicas=1, gpus=2)
    PlacementFactory(task=task, job=running, node=None, node_name="c-plain")
    JobTaskFactory(job=JobFactory(queue=nlp_queue), replicas=3, gpus=1)
    JobTaskFactory(
        job=JobFactory(queue=nlp_queue), replicas=2, gpus=0, gpu_milli=0, gpu_memory_mib=12288
    )


def _preview_snapshots(monkeypatch, run):
    """The snapshots the preview hands the core: before and after the edit."""
    seen = []
    real = preview_module.run_cycle

    def spy(snapshot, conf):
        seen.append(snapshot)
        return real(snapshot, conf)

    monkeypatch.setattr(preview_module, "run_cycle", spy)
    run()
    return seen


def _fields(item):
    return {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}


def _assert_same_cluster(preview, cycle):
    assert [n.name for n in preview.nodes] == [n.name for n in cycle.nodes]
    for mine, theirs in zip(preview.nodes, cycle.nodes, strict=True):
        assert _fields(mine) == _fields(theirs), mine.name
    assert [q.name for q in preview.queues] == [q.name for q in cycle.queues]
    for mine, theirs in zip(preview.queues, cycle.queues, strict=True):
        assert _fields(mine) == _fields(theirs), mine.name


@pytest.mark.parametrize("conf", [None, FLAT_CONF], ids=["tree", "flat"])
def test_the_preview_gives_the_core_the_cycles_nodes_and_queues(
    world, nlp_queue, monkeypatch, conf
):
    if conf is not None:
        SchedulerConfigFactory(text=conf, active=True)
    cycle = snapshot_build(now=NOW).snapshot
    now, after = _preview_snapshots(
        monkeypatch, lambda: queue_preview(queue=nlp_queue, changes={"weight": 9})
    )
    _assert_same_cluster(now, cycle)
    # The node the kubelet does not report Ready and the deleted one are no capacity.
    assert [n.name for n in now.nodes] == ["a-mars", "b-cordoned", "c-plain"]
    mars = now.nodes[0]
    assert mars.allocatable.get("gpu") == 8
    assert mars.allocatable.get("pods") == 64
    assert ("volcano.sh/hypernode", "s1") in mars.labels
    assert [t.key for t in mars.taints] == ["dedicated", "gpu"]
    # The edit changes the edited queue's weight and nothing else.
    changed = {
        q.name
        for q, before in zip(after.queues, now.queues, strict=True)
        if _fields(q) != _fields(before)
    }
    assert changed == {"nlp-train"}
    assert {q.name: q.weight for q in after.queues}["nlp-train"] == 9


def test_a_tenant_without_queues_is_shown_but_not_sent_to_the_core(world, nlp, monkeypatch):
    cycle = snapshot_build(now=NOW).snapshot
    shown = []
    snapshots = _preview_snapshots(
        monkeypatch, lambda: shown.extend(tenant_preview(tenant=nlp, changes={"weight": 1}))
    )
    rows = {row.name: row for row in shown}
    _assert_same_cluster(snapshots[0], cycle)
    assert "tenant quiet" not in {q.name for q in snapshots[0].queues}
    quiet = rows["quiet"]
    assert (quiet.guarantee_gpus, quiet.deserved_now, quiet.deserved_after) == (2, 0.0, 0.0)
    assert rows["nlp"].edited
    assert rows["nlp"].weight == 1


def test_demand_counts_gpu_memory_requests_as_the_cycle_does(world, nlp_queue):
    bundle = snapshot_build(now=NOW)
    demand = current_demand(device_memory_mib(capacity_nodes()))
    # Pending: 3 x 1 GPU, and 2 x 12 GiB of the smallest card (40 GiB): 2 x 0.3 of one.
    assert bundle.index.pending_gpus[nlp_queue.name] == pytest.approx(3.6)
    assert demand[nlp_queue.name].get("gpu") == pytest.approx(3.6)


@pytest.mark.parametrize("conf", [None, FLAT_CONF], ids=["tree", "flat"])
def test_the_preview_shows_the_shares_the_cycle_computes(world, nlp_queue, vision_queue, conf):
    if conf is not None:
        SchedulerConfigFactory(text=conf, active=True)
    # More than the cluster holds, so weights, guarantees and caps decide the shares.
    for queue in (nlp_queue, vision_queue, Queue.objects.get(name="nlp-dev")):
        JobTaskFactory(job=JobFactory(queue=queue), replicas=4, gpus=8)
    bundle = snapshot_build(now=NOW)
    cycle = run_cycle(bundle.snapshot, bundle.conf).queues
    rows = queue_preview(queue=nlp_queue, changes={})
    assert rows
    for row in rows:
        node = tenant_node_name(row.name) if row.kind == "tenant" else row.name
        expected = float(cycle[node].deserved.get("gpu")) if node in cycle else 0.0
        assert row.deserved_now == pytest.approx(expected), node
        assert row.deserved_after == row.deserved_now


def test_other_workloads_shares_are_booked_on_their_cards_and_counted_as_shares():
    from portal.scheduling.mapping import node_info

    node = NodeFactory(
        name="shared-node",
        gpu_count=2,
        gpu_memory_mib=81920,
        gpu_uuids=["GPU-0", "GPU-1"],
        used_by_others={
            "cpu": 2000,
            "nvidia.com/gpu": 1,  # a pod of unknown cards: one whole GPU in the count
            "gpu-card-cores/GPU-1": 25,
            "gpu-card-mib/GPU-1": 40960,  # half the card's memory: it costs 500 milli-GPU
            "gpu-card-cores/GPU-9": 10,  # a card the node did not register: counted only
            "gpu-card-mib/GPU-9": 0,
        },
    )
    info = node_info(node)
    assert info.gpus_used_by_others == ((1, 500, 40960 * 1024**2),)
    assert info.used_by_others.get("gpu") == pytest.approx(1 + 0.5 + 0.1)
    assert info.used_by_others.get("cpu") == 2000
