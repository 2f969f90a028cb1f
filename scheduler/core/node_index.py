"""Nodes grouped into classes whose members are interchangeable for one task.

Two nodes are in the same class when they have the same labels, taints, schedulability,
allocatable, used, releasing and pipelined resources. For a task without pod (anti-)affinity,
with only state-based scorers, every member of a class then gives the same fit, predicate and
score answers, so allocate evaluates one representative per class instead of every node: a
1,000-node cluster of a few node types in a few fill levels becomes a few dozen checks.
Members stay sorted by name order so "first node by name among the best" is kept.
"""

from __future__ import annotations

import bisect

from scheduler.core.state import Node


def _items(res) -> tuple:
    return tuple(sorted(res.explicit().items()))


class NodeIndex:
    def __init__(self, nodes: list[Node]):
        self.position = {node.name: i for i, node in enumerate(nodes)}
        self.classes: dict[tuple, list[tuple[int, Node]]] = {}
        self.key_of: dict[str, tuple] = {}
        for node in nodes:
            self._insert(node)

    def _key(self, node: Node) -> tuple:
        info = node.info
        static = (info.labels, info.taints, info.unschedulable, node.shape)
        return (static, _items(node.used), _items(node.releasing), _items(node.pipelined))

    def _insert(self, node: Node) -> None:
        key = self._key(node)
        self.key_of[node.name] = key
        bisect.insort(self.classes.setdefault(key, []), (self.position[node.name], node))

    def update(self, node: Node) -> None:
        old = self.key_of.get(node.name)
        if old is not None:
            members = self.classes[old]
            entry = (self.position[node.name], node)
            members.pop(bisect.bisect_left(members, entry))
            if not members:
                del self.classes[old]
        self._insert(node)

    def representatives(self) -> list[tuple[int, Node, int]]:
        """(position of the first member, that member, class size), in name order."""
        reps = [(members[0][0], members[0][1], len(members)) for members in self.classes.values()]
        reps.sort(key=lambda rep: rep[0])
        return reps
