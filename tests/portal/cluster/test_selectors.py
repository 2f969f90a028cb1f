import pytest

from portal.cluster.models import Placement
from portal.cluster.selectors import (
    ClusterTotals,
    node_list,
    node_list_with_usage,
    node_schedulable_totals,
    placement_list_active,
)
from tests.factories import NodeFactory, PlacementFactory

pytestmark = pytest.mark.django_db


def test_schedulable_totals(cluster):
    NodeFactory(schedulable=False, gpu_count=8)
    assert node_schedulable_totals() == ClusterTotals(
        gpus=32, cpu_millis=4 * 96000, memory_bytes=4 * 1024**4
    )


def test_totals_of_empty_cluster_are_zero():
    assert node_schedulable_totals() == ClusterTotals(gpus=0, cpu_millis=0, memory_bytes=0)


def test_node_list_filter(cluster, researcher):
    cordoned = NodeFactory(name="z-cordoned", schedulable=False)
    assert list(node_list(user=researcher, schedulable=False)) == [cordoned]
    assert len(node_list(user=researcher)) == 5


def test_node_lists_are_empty_for_a_user_in_no_tenant(cluster, user, staff):
    assert not node_list(user=user).exists()
    assert not node_list_with_usage(user=user).exists()
    assert len(node_list_with_usage(user=staff)) == 4


def test_placement_list_active():
    active = PlacementFactory()
    PlacementFactory(state=Placement.State.SUCCEEDED)
    assert list(placement_list_active()) == [active]
    assert list(placement_list_active(job_id=active.job_id)) == [active]
