"""Nodes grouped into classes whose members are interchangeable for one task.

Two nodes are in the same class when they have the same labels, taints, schedulability,
allocatable, used, releasing and pipelined resources, and (once a card is shared) the same
per-device books. For a task without pod (anti-)affinity,
with only state-based scorers, every member of a class then gives the same fit, predicate and
score answers, so allocate evaluates one representative per class instead of every node: a
1,000-node cluster of a few node types in a few fill levels becomes a few dozen checks.
Members stay sorted by name order so "first node by name among the best" is kept.

A second, coarser grouping leaves the labels out. Labels only matter to a task through its
node selector, node affinity or pod (anti-)affinity, so a task with none of them can use the
label-free classes: a cluster whose zone label splits every fill level 32 ways then becomes
one class per fill level. Every class gets a small integer id, stable for the key for the whole
session, so per-class answers can be memoised (see ``allocate._choose_by_class``).

A batch scorer that scores a node only by one property of it (network-topology-aware: its
domain) splits the label-free classes by that property: a ``split`` grouping, built on first
use and kept current like the other two. Label-keyed classes need no split: a domain is a label.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable
from operator import itemgetter
from typing import Any

from scheduler.core.resources import Resources
from scheduler.core.state import Node


def _items(res: Resources) -> tuple[tuple[str, float], ...]:
    items = res.explicit_items()
    return tuple(sorted(items)) if items else ()


_FIRST = itemgetter(0)  # a rep's first member position, the reps' sort key


# (first member's position, first member, the live members list, class id)
ClassRep = tuple[int, Node, list[tuple[int, Node]], int]


class _Grouping:
    """Classes keyed by a node key, members as sorted (position, node) lists, and the classes'
    representatives kept sorted as nodes move, so asking for them costs nothing: allocate asks
    once per placement, and rebuilding them (hashing every nested key) was its biggest cost."""

    __slots__ = ("classes", "key_of", "ids", "reps", "part_reps")

    def __init__(self, by_part: bool = False):
        self.classes: dict[Hashable, list[tuple[int, Node]]] = {}
        self.key_of: dict[str, Hashable] = {}
        self.ids: dict[Hashable, int] = {}
        # (first member's position, first member, the members list, class id), sorted by
        # position. The rep holds the live members list, so its size is always current and the
        # rep only changes when the class's first member does (most moves leave it).
        self.reps: list[ClassRep] = []
        # with by_part, the same again per key[0] (a split's value, e.g. one domain)
        self.part_reps: dict[Hashable, list[ClassRep]] | None = {} if by_part else None

    def move(self, node: Node, position: int, key: Hashable) -> None:
        old = self.key_of.get(node.name)
        if old == key:
            return
        entry = (position, node)
        if old is not None:
            members = self.classes[old]
            first = members[0][0]
            members.pop(bisect.bisect_left(members, entry))
            if not members:
                self._drop_rep(old, first)
                del self.classes[old]
            elif first == position:  # its first member left: the class's rep changes
                self._drop_rep(old, first)
                self._add_rep(old, members, self.ids[old])
        self.key_of[node.name] = key
        class_id = self.ids.get(key)
        if class_id is None:
            class_id = self.ids[key] = len(self.ids)
        joined = self.classes.get(key)
        if joined is None:
            members = self.classes[key] = [entry]
            self._add_rep(key, members, class_id)
        else:
            first = joined[0][0]
            bisect.insort(joined, entry)
            if position < first:
                self._drop_rep(key, first)
                self._add_rep(key, joined, class_id)

    def _drop_rep(self, key: Any, first_position: int) -> None:
        del self.reps[bisect.bisect_left(self.reps, first_position, key=_FIRST)]
        if self.part_reps is not None:
            reps = self.part_reps[key[0]]
            del reps[bisect.bisect_left(reps, first_position, key=_FIRST)]

    def _add_rep(self, key: Any, members: list[tuple[int, Node]], class_id: int) -> None:
        first_position, first = members[0]
        rep = (first_position, first, members, class_id)
        self.reps.insert(bisect.bisect_left(self.reps, first_position, key=_FIRST), rep)
        if self.part_reps is not None:
            reps = self.part_reps.setdefault(key[0], [])
            reps.insert(bisect.bisect_left(reps, first_position, key=_FIRST), rep)

    def representatives(self) -> list[ClassRep]:
        """The live list: read it before the next node changes."""
        return self.reps


class NodeIndex:
    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.position = {node.name: i for i, node in enumerate(nodes)}
        # Built on first use: only tasks with a node selector need label classes.
        self._full: _Grouping | None = None
        self.loose = _Grouping()
        # split function -> its grouping; functions are few (one per batch scorer set)
        self.splits: dict[Callable[[Node], Hashable], _Grouping] = {}
        # label-free class key -> a small int standing for it in every grouping's keys: the
        # key is a nested tuple, hashed once per change here instead of in every grouping
        self._loose_ids: dict[tuple[object, ...], int] = {}
        # called with every node whose state changed, after the groupings moved it
        self.listeners: list[Callable[[Node], None]] = []
        for node in nodes:
            self.update(node)

    @property
    def full(self) -> _Grouping:
        if self._full is None:
            self._full = _Grouping()
            for node in self.nodes:
                loose = self.loose.key_of[node.name]
                self._full.move(node, self.position[node.name], (node.info.labels, loose))
        return self._full

    @property
    def classes(self) -> dict[Hashable, list[tuple[int, Node]]]:
        return self.full.classes

    def update(self, node: Node) -> None:
        info = node.info
        state = (
            _items(node.used),
            _items(node.releasing),
            _items(node.pipelined),
            node.device_key(),
        )
        loose_key = (info.taints, info.unschedulable, node.shape, state)
        loose = self._loose_ids.get(loose_key)
        if loose is None:
            loose = self._loose_ids[loose_key] = len(self._loose_ids)
        position = self.position[node.name]
        if self._full is not None:
            self._full.move(node, position, (info.labels, loose))
        self.loose.move(node, position, loose)
        for split, grouping in self.splits.items():
            grouping.move(node, position, (split(node), loose))
        for listener in self.listeners:
            listener(node)

    def representatives(self) -> list[tuple[int, Node, int]]:
        """(position of the first member, that member, class size), in name order."""
        return [(position, node, len(members)) for position, node, members, _ in self.full.reps]

    def class_representatives(
        self, use_labels: bool, split: Callable[[Node], Hashable] | None = None
    ) -> list[ClassRep]:
        """(first member's position, that member, the class's members, class id), in name
        order (the live lists: read them before the next node changes); each
        grouping's ids are a separate space. ``split`` is ignored with labels (it must be a
        function of the labels)."""
        if use_labels:
            return self.full.representatives()
        if split is None:
            return self.loose.representatives()
        return self._split_grouping(split).representatives()

    def part_representatives(
        self, split: Callable[[Node], Hashable], part: Hashable
    ) -> list[ClassRep]:
        """Like ``class_representatives(False, split)``, only the classes whose nodes have
        ``split(node) == part`` (the live list)."""
        reps = self._split_grouping(split).part_reps
        return [] if reps is None else reps.get(part, [])

    def _split_grouping(self, split: Callable[[Node], Hashable]) -> _Grouping:
        grouping = self.splits.get(split)
        if grouping is None:
            grouping = self.splits[split] = _Grouping(by_part=True)
            for node in self.nodes:
                grouping.move(
                    node, self.position[node.name], (split(node), self.loose.key_of[node.name])
                )
        return grouping
