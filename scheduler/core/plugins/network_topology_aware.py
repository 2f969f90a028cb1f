"""network-topology-aware: keep a gang inside one network domain, the tightest that fits.

Volcano's plugin (volcano-sh/volcano pkg/scheduler/plugins/network-topology-aware/) scores
HyperNodes; the snapshot has no HyperNode objects, so domains come from node labels instead.
``topology-keys`` (comma-separated, default ``volcano.sh/hypernode,topology.kubernetes.io/zone``)
lists label keys from the tightest domain to the widest. For a task, nodes in the domain that
already holds most of its job's pods score ``weight * 100``; when the job has no pod placed
yet, the smallest domain (fewest free GPUs, then cpu, then name) whose free resources can hold
all its pending pods scores instead. Other nodes score 0, so this only breaks ties the other
scorers leave, weighted by ``weight`` (default 1).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Hashable
from typing import Any

from scheduler.core.config import ConfigError, int_arg
from scheduler.core.hooks import KeyedBatchScorer
from scheduler.core.resources import CPU, GPU, MIN_RESOURCE, Resources, add_into, total
from scheduler.core.session import Session
from scheduler.core.state import Node, Task
from scheduler.core.types import OCCUPYING_STATUSES, TaskStatus

PLUGIN_NAME = "network-topology-aware"
MAX_NODE_SCORE = 100
DEFAULT_KEYS = ("volcano.sh/hypernode", "topology.kubernetes.io/zone")
_HOLDING = OCCUPYING_STATUSES | {TaskStatus.PIPELINED}


def build(arguments: dict[str, Any]) -> NetworkTopologyPlugin:
    weight = int_arg(arguments, "weight", 1)
    raw = arguments.get("topology-keys", ",".join(DEFAULT_KEYS))
    if isinstance(raw, str):
        keys = tuple(k.strip() for k in raw.split(",") if k.strip())
    elif isinstance(raw, list) and all(isinstance(k, str) for k in raw):
        keys = tuple(raw)
    else:
        raise ConfigError("topology-keys", f"expected a comma-separated string, got {raw!r}")
    return NetworkTopologyPlugin(weight, keys)


class NetworkTopologyPlugin:
    name = PLUGIN_NAME

    def __init__(self, weight: int, keys: tuple[str, ...]):
        self.weight = weight
        self.keys = keys

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        # Labels do not change during a session: resolve every node's domain once.
        self._node_domain = {node.name: self._domain(node) for node in ssn.node_list}
        self._free_cache: (
            tuple[
                dict[str, Resources],
                dict[tuple[str, str], dict[str, float]],
                dict[tuple[str, str], Resources],
            ]
            | None
        ) = None
        # Nodes changed since the last question; the session's NodeIndex reports every change.
        self._dirty: set[str] = set()
        ssn.node_index.listeners.append(self._node_changed)
        if self.weight and any(d is not None for d in self._node_domain.values()):
            ssn.add_batch_node_order_fn(
                self.name,
                KeyedBatchScorer(self._domain_of, self.scores_by_domain),
            )

    def _node_changed(self, node: Node) -> None:
        self._dirty.add(node.name)

    def _domain_of(self, node: Node) -> tuple[str, str] | None:
        return self._node_domain.get(node.name)

    def _domain(self, node: Node) -> tuple[str, str] | None:
        for key in self.keys:
            if key in node.labels:
                return key, node.labels[key]
        return None

    def scores_by_domain(self, task: Task) -> dict[Hashable, float]:
        """The preferred domain's nodes score ``weight * 100``, every other node 0."""
        chosen = self._preferred_domain(task)
        if chosen is None:
            return {}
        return {chosen: float(self.weight * MAX_NODE_SCORE)}

    def _preferred_domain(self, task: Task) -> tuple[str, str] | None:
        job = self.ssn.jobs[task.job]
        placed: dict[tuple[str, str], int] = {}
        for other in job.tasks.values():
            if other.status in _HOLDING and other.node in self.ssn.nodes:
                domain = self._node_domain[other.node]
                if domain is not None:
                    placed[domain] = placed.get(domain, 0) + 1
        if placed:
            return min(placed, key=lambda d: (-placed[d], d))
        pending = [t.resreq for t in job.tasks.values() if t.status is TaskStatus.PENDING]
        need = pending[0] if len(pending) == 1 else total(pending)
        free = self._free_per_domain()
        # The smallest domain that fits: walk domains from the smallest, starting at the first
        # with enough GPUs (the order is kept sorted as domains change).
        order = self._order
        at = bisect.bisect_left(order, (need.get(GPU) - MIN_RESOURCE,))
        for _, _, domain in itertools.islice(order, at, None):
            if need.less_equal(free[domain]):
                return domain
        return None

    def _free_per_domain(self) -> dict[tuple[str, str], Resources]:
        """Free resources summed per domain, updated by the nodes that changed since the last
        question. Preempt and allocate ask once per placement, and summing the whole cluster
        each time was most of a 1,000-node cycle. Resources are whole numbers (millicores,
        bytes, devices) far below 2**53, so subtracting a node's old future-idle vector and
        adding its new one is exact in floats."""
        if self._free_cache is None:
            futures = {node.name: node.future_idle() for node in self.ssn.node_list}
            sums: dict[tuple[str, str], dict[str, float]] = {}
            for node in self.ssn.node_list:
                domain = self._node_domain[node.name]
                if domain is not None:
                    add_into(sums.setdefault(domain, {}), futures[node.name])
            changed_domains = set(sums)
            free: dict[tuple[str, str], Resources] = {}
            self._order: list[tuple[float, float, tuple[str, str]]] = []
        else:
            futures, sums, free = self._free_cache
            changed_domains = set()
            for name in self._dirty:
                node = self.ssn.nodes[name]
                old, new = futures[name], node.future_idle()
                domain = self._node_domain[name]
                futures[name] = new
                if old is new or domain is None:
                    continue
                add_into(sums[domain], old, -1)
                add_into(sums[domain], new)
                changed_domains.add(domain)
        self._dirty.clear()
        order = self._order
        for domain in changed_domains:
            previous = free.get(domain)
            if previous is not None:
                del order[bisect.bisect_left(order, (previous.get(GPU), previous.get(CPU), domain))]
            new = free[domain] = Resources(sums[domain])
            bisect.insort(order, (new.get(GPU), new.get(CPU), domain))
        self._free_cache = (futures, sums, free)
        return free
