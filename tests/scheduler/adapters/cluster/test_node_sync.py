"""The cycle's node sync on the Kubernetes backend writes only what changed: a steady cycle
neither locks nor rewrites node rows, and a node that changed, vanished or was edited by
someone else is still written. Whole cycles over HTTP against the emulated API server."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from kubernetes import client

from portal.cluster.models import Node
from portal.cluster.services import node_inventory_sync
from scheduler.adapters.cluster.kubernetes import KubernetesBackend
from scheduler.adapters.cluster.watch_cache import ClusterCache, manifests_translation
from scheduler.adapters.orchestrator import scheduling_cycle_run

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
GPU_RESOURCE_NAMES = ["nvidia.com/gpu"]
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
TABLE = Node._meta.db_table
LAST_SEEN_ONLY = re.compile(rf'^UPDATE "{TABLE}" SET "last_seen_at" = [^,]+ WHERE ')


def node_statements(queries: CaptureQueriesContext) -> list[str]:
    return [query["sql"] for query in queries.captured_queries if f'"{TABLE}"' in query["sql"]]


def rows() -> dict[str, tuple]:
    return {
        node.name: (node.updated_at, node.labels, node.in_cluster, node.schedulable)
        for node in Node.objects.all()
    }


def test_a_steady_cycle_locks_and_writes_no_node_row(cluster, kube_cycle):
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        cluster.add_node(name, GPU_NODE)
    kube_cycle()
    kube_cycle()
    before = rows()

    with CaptureQueriesContext(connection) as queries:
        kube_cycle()

    statements = node_statements(queries)
    # Whole rows (labels and all) are read once, by the snapshot; the sync reads none.
    assert len([sql for sql in statements if f'"{TABLE}"."labels"' in sql]) == 1, statements
    assert not [sql for sql in statements if sql.startswith(("INSERT", "DELETE"))]
    # The only UPDATE is the "last seen" mark, which sets nothing else.
    updates = [sql for sql in statements if sql.startswith("UPDATE")]
    assert all(LAST_SEEN_ONLY.match(sql) for sql in updates), updates
    assert not [sql for sql in statements if "FOR UPDATE" in sql]
    assert rows() == before


def test_a_fresh_backend_each_cycle_shares_the_memo_through_its_watch_cache(
    cluster, backend, cycle_clock
):
    """As in the cycle worker: a new backend per cycle, one watch cache per process."""
    for name in ("gpu-a", "gpu-b"):
        cluster.add_node(name, GPU_NODE)
    backend.cache = ClusterCache(backend.core_v1, manifests_translation())
    backend.cache.start()

    def fresh() -> KubernetesBackend:
        again = KubernetesBackend.from_configuration(
            client.Configuration(host=cluster.url), NAMESPACE, GPU_RESOURCE_NAMES
        )
        again.cache = backend.cache
        return again

    try:
        scheduling_cycle_run(backend=fresh(), now=cycle_clock)
        with CaptureQueriesContext(connection) as queries:
            scheduling_cycle_run(backend=fresh(), now=cycle_clock)
    finally:
        backend.cache.stop()

    statements = node_statements(queries)
    assert len([sql for sql in statements if f'"{TABLE}"."labels"' in sql]) == 1, statements


def test_a_changed_vanished_or_new_node_is_still_written(cluster, kube_cycle):
    for name in ("gpu-a", "gpu-b"):
        cluster.add_node(name, GPU_NODE)
    kube_cycle()
    kube_cycle()

    cluster.on_loop(
        lambda: cluster.store.patch(
            "nodes", None, "gpu-a", {"metadata": {"labels": {"gpu-model": "H100"}}}, validate=False
        )
    )
    cluster.delete_node("gpu-b")
    cluster.add_node("gpu-c", GPU_NODE)
    kube_cycle()

    assert Node.objects.get(name="gpu-a").gpu_model == "H100"
    assert Node.objects.get(name="gpu-b").in_cluster is False
    assert Node.objects.get(name="gpu-c").in_cluster is True

    cluster.add_node("gpu-b", GPU_NODE)  # back again
    kube_cycle()
    assert Node.objects.get(name="gpu-b").in_cluster is True


def test_a_row_written_by_someone_else_is_compared_again(cluster, kube_cycle):
    cluster.add_node("gpu-a", GPU_NODE)
    kube_cycle()
    kube_cycle()
    node = Node.objects.get(name="gpu-a")
    node.gpu_count, node.labels = 2, {"edited": "by-hand"}
    node.save()  # an admin's edit: the table's latest updated_at moves

    kube_cycle()

    node.refresh_from_db()
    assert (node.gpu_count, node.labels) == (8, {})


def test_a_deleted_row_is_created_again(cluster, kube_cycle):
    cluster.add_node("gpu-a", GPU_NODE)
    cluster.add_node("gpu-b", GPU_NODE)
    kube_cycle()
    kube_cycle()
    Node.objects.filter(name="gpu-a").delete()

    kube_cycle()

    assert sorted(Node.objects.filter(in_cluster=True).values_list("name", flat=True)) == [
        "gpu-a",
        "gpu-b",
    ]


def test_current_nodes_are_neither_read_nor_compared_but_count_as_listed():
    node_inventory_sync(nodes=[{"name": "a", "gpu_count": 8}, {"name": "b", "gpu_count": 8}])
    Node.objects.filter(name="a").update(gpu_count=1)  # not what the caller vouches for

    result = node_inventory_sync(
        nodes=[{"name": "b", "gpu_count": 4}, {"name": "c"}], absent_gone=True, current={"a"}
    )

    assert result == {"created": ["c"], "updated": ["b"], "unschedulable": [], "gone": []}
    assert dict(Node.objects.values_list("name", "gpu_count")) == {"a": 1, "b": 4, "c": 0}
    assert set(Node.objects.filter(in_cluster=True).values_list("name", flat=True)) == {
        "a",
        "b",
        "c",
    }


def test_an_absent_node_is_marked_gone_once_with_current_names():
    node_inventory_sync(nodes=[{"name": "a"}, {"name": "b"}])

    first = node_inventory_sync(nodes=[], absent_gone=True, current={"a"})
    again = node_inventory_sync(nodes=[], absent_gone=True, current={"a"})

    assert first["gone"] == ["b"]
    assert again["gone"] == []
    assert Node.objects.get(name="a").in_cluster is True
    assert Node.objects.get(name="b").in_cluster is False
