from http import HTTPStatus

import pytest
from django.urls import reverse

from portal.cluster.models import Placement
from tests.factories import JobTaskFactory, PlacementFactory, held_by_others

pytestmark = pytest.mark.django_db


def test_nodes_page_shows_gpu_used_and_free(staff_client, cluster, nlp_queue):
    task = JobTaskFactory(job__queue=nlp_queue, gpus=3)
    PlacementFactory(task=task, node=cluster[0], state=Placement.State.RUNNING)
    PlacementFactory(task=task, replica=1, node=cluster[0], state=Placement.State.SUCCEEDED)
    response = staff_client.get(reverse("cluster:node_list"))
    assert response.status_code == HTTPStatus.OK
    node = response.context["nodes"][0]
    assert (node.name, node.gpus_used, node.gpus_free) == ("gpu-worker-1", 3, 5)
    assert response.context["totals"] == {
        "gpus": 32, "used": 3, "others": 0, "free": 29, "nodes": 4,
    }  # fmt: skip


def test_nodes_page_counts_what_other_workloads_hold(staff_client, cluster, nlp_queue):
    """Another team's whole GPU (cards unknown) and another scheduler's half card (named by
    its device assignment) are neither the portal's nor free."""
    node = cluster[0]
    held_by_others(node, whole=1, card=5, cores=50, memory_mib=20480)
    task = JobTaskFactory(job__queue=nlp_queue, gpus=3)
    PlacementFactory(task=task, node=node, state=Placement.State.RUNNING)
    response = staff_client.get(reverse("cluster:node_list"))
    shown = response.context["nodes"][0]
    assert (shown.gpus_used, shown.gpus_others, shown.gpus_free) == (3, 1.5, 3.5)
    assert (shown.used_percent, shown.others_percent) == (38, 19)
    assert response.context["totals"] == {
        "gpus": 32, "used": 4.5, "others": 1.5, "free": 27.5, "nodes": 4,
    }  # fmt: skip
    assert "(1.5 by other workloads)" in response.content.decode()


@pytest.mark.parametrize("who", ["researcher_client", "lead_client"])
def test_nodes_page_is_admin_only(request, who):
    response = request.getfixturevalue(who).get(reverse("cluster:node_list"))
    assert response.status_code == HTTPStatus.FORBIDDEN


def test_nodes_page_speaks_cores_gib_and_when_each_node_was_seen(staff_client, cluster):
    from django.utils import timezone

    from portal.cluster.services import node_seen_mark

    node_seen_mark(at=timezone.now(), names=["gpu-worker-1"])
    body = staff_client.get(reverse("cluster:node_list")).content.decode()
    assert "96 cores" in body
    assert "1024 GiB" in body
    assert "96000m" not in body
    assert "just now" in body  # gpu-worker-1
    assert ">never<" in body  # the others: the cluster never reported them
