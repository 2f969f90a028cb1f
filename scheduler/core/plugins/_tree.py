"""The queue tree the quota plugins share: who is whose parent, read from ``QueueInfo.parent``.

Volcano's hierarchical queues (volcano-sh/volcano pkg/scheduler/api/queue_info.go ``Parent``,
pkg/scheduler/plugins/capacity/capacity.go ``updateAncestors``) hang every queue without a
parent under the queue named ``root``; the hierarchical proportion has no root queue (the
cluster is the root). Either way a parent that does not exist, or a cycle, is a problem the
caller decides about: capacity refuses to schedule, as upstream; proportion lifts the queue to
the top level.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.core.types import QueueInfo


def parent_of(info: QueueInfo, root: str | None) -> str | None:
    """The stated parent, or ``root`` for a queue that names none (``root`` itself has none)."""
    if info.parent:
        return info.parent
    return None if info.name == root else root


def tree_problem(infos: Mapping[str, QueueInfo], root: str | None) -> str | None:
    """The first (in name order) parent that does not exist or cycle in the tree, else None."""
    for name in sorted(infos):
        seen = {name}
        parent = parent_of(infos[name], root)
        while parent is not None:
            if parent not in infos:
                return f"queue {name} names parent {parent}, which does not exist"
            if parent in seen:
                return f"queue {name} is in a cycle of parents"
            seen.add(parent)
            parent = parent_of(infos[parent], root)
    return None


def effective_parents(infos: Mapping[str, QueueInfo]) -> dict[str, str | None]:
    """Parents for a tree rooted at the cluster: a queue whose parent does not exist, or that
    is on a cycle of parents, becomes a top-level queue (None), so the result is a forest."""
    parents: dict[str, str | None] = {}
    for name in sorted(infos):
        parent = infos[name].parent or None
        if parent is not None and (parent not in infos or _on_cycle(infos, name)):
            parent = None
        parents[name] = parent
    return parents


def _on_cycle(infos: Mapping[str, QueueInfo], name: str) -> bool:
    seen: set[str] = set()
    parent = infos[name].parent
    while parent and parent in infos and parent not in seen:
        if parent == name:
            return True
        seen.add(parent)
        parent = infos[parent].parent
    return False


def paths(parents: Mapping[str, str | None]) -> dict[str, tuple[str, ...]]:
    """Each queue's path from its top-level ancestor down to itself (``parents`` acyclic)."""
    out: dict[str, tuple[str, ...]] = {}

    def path(name: str) -> tuple[str, ...]:
        found = out.get(name)
        if found is None:
            parent = parents[name]
            found = out[name] = (name,) if parent is None else (*path(parent), name)
        return found

    for name in parents:
        path(name)
    return out


def children_of(parents: Mapping[str, str | None]) -> dict[str | None, list[str]]:
    """Children in name order; key None lists the top-level queues."""
    out: dict[str | None, list[str]] = {}
    for name in sorted(parents):
        out.setdefault(parents[name], []).append(name)
    return out
