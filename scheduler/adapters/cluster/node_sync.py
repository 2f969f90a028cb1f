"""A real cluster's nodes into the portal's Node rows: what row each node makes, and a memo of
what the sync last wrote, so a steady cycle does not re-read every node row.

A node's row follows from the node (allocatable, labels, taints, Ready, what other workloads
hold) and two settings: the GPU resource names, and the GPU sharing stack, whose registration
of the node's cards wins over allocatable. The list is the cluster's own: a node missing from
it was deleted, and its capacity with it.

At thousands of nodes, reading the rows back to compare them (decoding their labels, taints
and usage) cost more than the rest of a quiet cycle, while almost nothing changes between two
cycles. The memo keeps each node as this process last synced it, with a token of the table
(row count, highest id, latest updated_at); a node observed as it was last synced, in a table
no one else has written since, is known current and skipped (its row is neither built, read
nor compared). Anything else, any doubt, is compared with its row.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from django.conf import settings
from django.db.models import Count, Max

from jobspec.gpushare import SHARING_NONE
from scheduler.adapters.cluster.base import ClusterBackend, ObservedNode
from scheduler.adapters.cluster.gpushare import registered_cards
from scheduler.adapters.portal_port import GPU_MODEL_LABEL, Node, gpu_sharing, node_inventory_sync

GPU_MODEL_LABELS = (GPU_MODEL_LABEL, "nvidia.com/gpu.product")
TOPOLOGY_PREFIXES = ("topology.kubernetes.io/", "volcano.sh/hypernode", "network.topology/")


def nodes_sync(observed: list[ObservedNode], memo: NodeSyncMemo | None = None) -> None:
    """Write `observed` into the Node rows: each node's row, and no row for a node the list
    lacks (marking it unschedulable would keep its capacity in every queue's deserved share)."""
    stack = gpu_sharing()
    gpu_names = set(settings.GPU_RESOURCE_NAMES)
    context = (stack, frozenset(gpu_names))
    current = memo.current(observed, context) if memo else set()
    specs = [
        node_row(node, stack=stack, gpu_names=gpu_names)
        for node in observed
        if node.name not in current
    ]
    written = node_inventory_sync(nodes=specs, absent_gone=True, current=current)
    if memo:
        memo.synced(observed, context, wrote=any(written.values()))


def node_row(node: ObservedNode, *, stack: str, gpu_names: set[str]) -> dict[str, Any]:
    """The Node row's fields an observed node makes, under the GPU sharing stack `stack`."""
    gpu_name = next((n for n in sorted(node.allocatable) if n in gpu_names), None)
    model = next((node.labels[k] for k in GPU_MODEL_LABELS if k in node.labels), "")
    return {
        "name": node.name,
        "gpu_resource_name": gpu_name or "nvidia.com/gpu",
        "gpu_count": node.allocatable.get(gpu_name, 0) if gpu_name else 0,
        "gpu_model": model,
        **registered_gpus(node, stack, model),
        "cpu_millis": node.allocatable.get("cpu", 0),
        "memory_bytes": node.allocatable.get("memory", 0),
        "pods_capacity": node.allocatable.get("pods", 110),
        "labels": dict(node.labels),
        "topology_labels": {
            k: v for k, v in node.labels.items() if k.startswith(TOPOLOGY_PREFIXES)
        },
        "schedulable": not node.unschedulable,
        "taints": [dict(taint) for taint in node.taints],
        "ready": node.ready,
        "used_by_others": dict(node.used_by_others),
    }


def registered_gpus(node: ObservedNode, stack: str, model: str) -> dict[str, Any]:
    """The node's cards as the GPU sharing stack registered them (count, memory, UUIDs by
    index), which win over allocatable: HAMi inflates its nvidia.com/gpu to cards x split."""
    cards = registered_cards(stack, node.annotations) if stack != SHARING_NONE else None
    if not cards:
        return {"gpu_memory_mib": 0, "gpu_uuids": []}
    return {
        "gpu_count": len(cards),
        "gpu_model": model or cards[0].model,
        # One memory per node: the smallest card's, so a request never over-fills one.
        "gpu_memory_mib": min(card.memory_mib for card in cards),
        "gpu_uuids": [card.uuid for card in cards],
    }


class NodeSyncMemo:
    def __init__(self) -> None:
        self._token: tuple | None = None
        self._context: Any = None
        self._nodes: dict[str, ObservedNode] = {}

    def current(self, observed: list[ObservedNode], context: Any) -> set[str]:
        """The names among `observed` whose rows hold what that node, under `context` (the
        settings its row also depends on), would write."""
        if self._token is None or context != self._context or self._token != table_token():
            # Another writer (an inventory upload, an admin, a rolled back sync): trust nothing.
            self._token, self._nodes = None, {}
            return set()
        # The watch cache hands out the same object for a node that did not change.
        return {node.name for node in observed if self._nodes.get(node.name) == node}

    def synced(self, observed: list[ObservedNode], context: Any, *, wrote: bool = True) -> None:
        """The rows now hold `observed` (call after the sync, in its transaction; `wrote`:
        whether it wrote any row, else the token read before it still holds)."""
        self._nodes = {node.name: node for node in observed}
        self._context = context
        if wrote or self._token is None:
            self._token = table_token()


def table_token() -> tuple:
    """Changes with any node row created, deleted or saved (updated_at is auto_now)."""
    figures = Node.objects.aggregate(rows=Count("id"), last_id=Max("id"), changed=Max("updated_at"))
    return (figures["rows"], figures["last_id"], figures["changed"])


# One memo per source of nodes: the backend's watch cache, which the cycle worker keeps from
# cycle to cycle while each cycle gets a fresh backend (scheduler.adapters.backends), or the
# backend itself when it reads without a cache. A new cache (another cluster, a test) starts
# from the rows.
_MEMOS: WeakKeyDictionary[Any, NodeSyncMemo] = WeakKeyDictionary()


def node_sync_memo(backend: ClusterBackend) -> NodeSyncMemo:
    source = backend.cache or backend
    memo = _MEMOS.get(source)
    if memo is None:
        memo = _MEMOS[source] = NodeSyncMemo()
    return memo
