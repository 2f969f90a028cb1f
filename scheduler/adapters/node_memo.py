"""What the node sync last wrote from a cluster's nodes, so a steady cycle does not re-read every node row.

A cycle on a real cluster syncs every observed node into the database. At thousands of nodes,
reading the rows back to compare them (decoding their labels, taints and usage) cost more
than the rest of a quiet cycle, while almost nothing changes between two cycles. The memo keeps
each node as this process last synced it, with a token of the table (row count, highest id,
latest updated_at); a node observed as it was last synced, in a table no one else has written
since, is known current and skipped (its row is neither built, read nor compared). Anything
else, any doubt, is compared with its row as before.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from django.db.models import Count, Max

from scheduler.adapters.cluster.base import ObservedNode
from scheduler.adapters.portal_port import Node


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


def node_sync_memo(backend: Any) -> NodeSyncMemo:
    source = getattr(backend, "cache", None) or backend
    memo = _MEMOS.get(source)
    if memo is None:
        memo = _MEMOS[source] = NodeSyncMemo()
    return memo
