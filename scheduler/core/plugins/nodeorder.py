"""nodeorder: kube-scheduler's resource scores, weighted.

Source: volcano-sh/volcano pkg/scheduler/plugins/nodeorder/nodeorder.go, which sums
``score * weight`` of kube-scheduler plugins. Implemented: leastrequested (default weight 1),
mostrequested (0) and balancedresource (1) over cpu and memory, with kube-scheduler's integer
arithmetic (noderesources/least_allocated.go, most_allocated.go, balanced_allocation.go).
The other weights are accepted; node affinity, taint toleration, pod affinity, image locality
and topology spread scores are not computed (they add the same amount to every node here).
"""

from __future__ import annotations

from typing import Any

from scheduler.core.config import ConfigError, int_arg
from scheduler.core.resources import CPU, MEMORY
from scheduler.core.session import Session
from scheduler.core.state import Node, Task

PLUGIN_NAME = "nodeorder"
MAX_NODE_SCORE = 100
_WEIGHTS = {
    "leastrequested.weight": 1,
    "mostrequested.weight": 0,
    "balancedresource.weight": 1,
    "nodeaffinity.weight": 1,
    "tainttoleration.weight": 1,
    "podaffinity.weight": 1,
    "podtopologyspread.weight": 1,
    "imagelocality.weight": 1,
    "selectorspread.weight": 0,
    "volumebinding.weight": 1,
}


def build(arguments: dict[str, Any]) -> NodeOrderPlugin:
    weights = {}
    for key, default in _WEIGHTS.items():
        weights[key] = int_arg(arguments, key, default)
        if weights[key] < 0:
            raise ConfigError(key, f"expected a non-negative weight, got {weights[key]}")
    return NodeOrderPlugin(weights)


def _requested(task: Task, node: Node, name: str) -> int:
    return int(node.used.get(name) + task.resreq.get(name))


def least_requested(task: Task, node: Node) -> int:
    total = 0
    for name in (CPU, MEMORY):
        capacity, requested = int(node.allocatable.get(name)), _requested(task, node, name)
        if capacity == 0 or requested > capacity:
            continue
        total += (capacity - requested) * MAX_NODE_SCORE // capacity
    return total // 2


def most_requested(task: Task, node: Node) -> int:
    total = 0
    for name in (CPU, MEMORY):
        capacity, requested = int(node.allocatable.get(name)), _requested(task, node, name)
        if capacity == 0:
            continue
        total += min(requested, capacity) * MAX_NODE_SCORE // capacity
    return total // 2


def balanced_resource(task: Task, node: Node) -> int:
    fractions = []
    for name in (CPU, MEMORY):
        capacity = node.allocatable.get(name)
        fraction = _requested(task, node, name) / capacity if capacity else 0.0
        fractions.append(min(fraction, 1.0))
    std = abs(fractions[0] - fractions[1]) / 2
    return int((1 - std) * MAX_NODE_SCORE)


class NodeOrderPlugin:
    name = PLUGIN_NAME

    def __init__(self, weights: dict[str, int]):
        self.least = weights["leastrequested.weight"]
        self.most = weights["mostrequested.weight"]
        self.balanced = weights["balancedresource.weight"]

    def on_session_open(self, ssn: Session) -> None:
        ssn.add_node_order_fn(self.name, self.score, state_only=True)

    def score(self, task: Task, node: Node) -> float:
        """Depends only on the task and the node's allocatable and used resources."""
        score = 0
        if self.least:
            score += least_requested(task, node) * self.least
        if self.most:
            score += most_requested(task, node) * self.most
        if self.balanced:
            score += balanced_resource(task, node) * self.balanced
        return float(score)
