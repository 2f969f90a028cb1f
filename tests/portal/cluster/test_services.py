from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from portal.cluster import services
from portal.cluster.models import Node, Placement
from portal.cluster.services import (
    node_inventory_load,
    node_inventory_sync,
    placement_create,
    placement_set_state,
)
from tests.factories import JobTaskFactory, NodeFactory

pytestmark = pytest.mark.django_db


def node_spec(name, **overrides):
    spec = {
        "name": name,
        "gpu_count": 8,
        "gpu_model": "H100",
        "cpu_millis": 96000,
        "memory_bytes": 1024**4,
        "labels": {"gpu-model": "H100"},
        "topology_labels": {"topology.kubernetes.io/zone": "rack-a"},
    }
    spec.update(overrides)
    return spec


class TestDemoInventory:
    def test_demo_file_has_four_nodes_of_eight_gpus(self):
        nodes = node_inventory_load(path=settings.SIMULATED_CLUSTER_FILE)
        assert [node["name"] for node in nodes] == [f"gpu-worker-{i}" for i in range(1, 5)]
        assert {node["gpu_count"] for node in nodes} == {8}
        assert [node["gpu_model"] for node in nodes] == ["H100", "H100", "A100", "A100"]
        zones = [node["topology_labels"]["topology.kubernetes.io/zone"] for node in nodes]
        assert zones == ["rack-a", "rack-a", "rack-b", "rack-b"]
        assert {node["memory_bytes"] for node in nodes} == {1024**4}

    def test_load_refuses_malformed_file(self, tmp_path: Path):
        path = tmp_path / "bad.yaml"
        path.write_text("- just a list\n")
        with pytest.raises(ValidationError) as info:
            node_inventory_load(path=path)
        assert info.value.message_dict == {"nodes": [services.INVENTORY_INVALID]}


class TestNodeInventorySync:
    def test_creates_nodes(self):
        result = node_inventory_sync(nodes=[node_spec("a"), node_spec("b", gpu_model="A100")])
        assert result == {"created": ["a", "b"], "updated": [], "unschedulable": [], "gone": []}
        node = Node.objects.get(name="b")
        assert (node.gpu_model, node.gpu_resource_name, node.schedulable) == (
            "A100",
            "nvidia.com/gpu",
            True,
        )
        assert node.last_seen_at is None

    def test_second_sync_is_a_no_op(self):
        node_inventory_sync(nodes=[node_spec("a")])
        before = Node.objects.get().updated_at
        result = node_inventory_sync(nodes=[node_spec("a")])
        assert result == {"created": [], "updated": [], "unschedulable": [], "gone": []}
        assert Node.objects.get().updated_at == before

    def test_updates_changed_nodes(self):
        node_inventory_sync(nodes=[node_spec("a")])
        result = node_inventory_sync(nodes=[node_spec("a", gpu_count=4)])
        assert result["updated"] == ["a"]
        assert Node.objects.get().gpu_count == 4

    def test_missing_nodes_become_unschedulable_and_return(self):
        node_inventory_sync(nodes=[node_spec("a"), node_spec("b")])
        result = node_inventory_sync(nodes=[node_spec("a")])
        assert result["unschedulable"] == ["b"]
        assert Node.objects.get(name="b").schedulable is False
        result = node_inventory_sync(nodes=[node_spec("a"), node_spec("b")])
        assert result["updated"] == ["b"]
        assert Node.objects.get(name="b").schedulable is True

    def test_seen_at_recorded(self):
        now = timezone.now()
        node_inventory_sync(nodes=[node_spec("a")], seen_at=now)
        assert Node.objects.get().last_seen_at == now

    def test_field_errors_carry_node_paths(self):
        with pytest.raises(ValidationError) as info:
            node_inventory_sync(
                nodes=[node_spec("a"), node_spec("b", gpus=8), {"gpu_count": 1}, node_spec("a")]
            )
        assert set(info.value.message_dict) == {"nodes[1].gpus", "nodes[2].name", "nodes[3].name"}
        assert info.value.message_dict["nodes[3].name"] == [
            services.NODE_NAME_DUPLICATE.format(name="a")
        ]
        assert not Node.objects.exists()

    def test_invalid_values_rolled_back(self):
        with pytest.raises(ValidationError) as info:
            node_inventory_sync(nodes=[node_spec("a"), node_spec("b", gpu_count=-1)])
        assert set(info.value.message_dict) == {"nodes[1].gpu_count"}
        assert not Node.objects.exists()


class TestPlacement:
    def test_create_names_pod(self):
        task = JobTaskFactory(name="worker", replicas=2, gpus=4, job__name="bert")
        node = NodeFactory(name="gpu-worker-1")
        placement = placement_create(task=task, replica=1, node=node)
        assert placement.pod_name == f"gp-{task.job_id}-worker-1"
        assert (placement.node_name, placement.gpus, placement.state) == (
            "gpu-worker-1",
            4,
            "bound",
        )

    def test_one_active_placement_per_task_replica(self):
        task = JobTaskFactory(replicas=2)
        node = NodeFactory()
        placement_create(task=task, replica=0, node=node)
        with pytest.raises(ValidationError):
            placement_create(task=task, replica=0, node=node)
        assert Placement.objects.count() == 1

    def test_replica_can_be_placed_again_after_deletion(self):
        task = JobTaskFactory(replicas=1, name="worker", job__name="bert")
        node = NodeFactory()
        first = placement_create(task=task, replica=0, node=node)
        placement_set_state(placement=first, state=Placement.State.DELETED)
        second = placement_create(task=task, replica=0, node=node)
        assert second.pod_name == f"{first.pod_name}-a1"
        assert Placement.objects.filter(state__in=Placement.ACTIVE_STATES).get() == second

    def test_replica_out_of_range(self):
        task = JobTaskFactory(replicas=2)
        with pytest.raises(ValidationError) as info:
            placement_create(task=task, replica=2, node=NodeFactory())
        assert info.value.message_dict == {
            "replica": [services.PLACEMENT_REPLICA_OUT_OF_RANGE.format(max_replica=1)]
        }

    def test_database_constraint_backs_the_rule(self):
        from django.db import IntegrityError, transaction

        task = JobTaskFactory(replicas=1)
        node = NodeFactory()
        placement_create(task=task, replica=0, node=node)
        with pytest.raises(IntegrityError), transaction.atomic():
            Placement.objects.create(
                job=task.job, task=task, replica=0, node_name=node.name, pod_name="other"
            )


def test_node_seen_mark_writes_each_node_at_most_once_a_minute(cluster):
    from datetime import UTC, datetime, timedelta

    from portal.cluster.models import Node
    from portal.cluster.services import node_seen_mark

    at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert node_seen_mark(at=at) == 4
    assert node_seen_mark(at=at + timedelta(seconds=30)) == 0
    assert set(Node.objects.values_list("last_seen_at", flat=True)) == {at}
    later = at + timedelta(seconds=61)
    assert node_seen_mark(at=later, names=["gpu-worker-2"]) == 1
    assert Node.objects.get(name="gpu-worker-2").last_seen_at == later
    assert Node.objects.get(name="gpu-worker-1").last_seen_at == at
