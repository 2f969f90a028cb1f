"""binpack: prefer nodes that are already busy, so whole nodes stay free for big jobs.

Source: volcano-sh/volcano pkg/scheduler/plugins/binpack/binpack.go (BinPackingScore,
ResourceBinPackingScore). Arguments: ``binpack.weight`` (1), ``binpack.cpu`` (1),
``binpack.memory`` (1), ``binpack.resources`` (comma-separated extra names) and
``binpack.resources.<name>`` (1). GPU spellings such as ``mars-tech.com/gpu`` map to the
``gpu`` dimension, so their weight applies to every GPU name.
"""

from __future__ import annotations

from typing import Any

from scheduler.core.config import ConfigError, int_arg, str_arg
from scheduler.core.resources import CPU, MEMORY, canonical_name
from scheduler.core.session import Session
from scheduler.core.state import Node, Task

PLUGIN_NAME = "binpack"
MAX_NODE_SCORE = 100


class BinpackPlugin:
    name = PLUGIN_NAME

    def __init__(self, weight: int, resource_weights: dict[str, int]):
        self.weight = weight
        self.resource_weights = resource_weights

    def on_session_open(self, ssn: Session) -> None:
        if self.weight:
            ssn.add_node_order_fn(self.name, self.score, state_only=True)

    def score(self, task: Task, node: Node) -> float:
        """Depends only on the task and the node's allocatable and used resources."""
        return binpacking_score(task, node, self.weight, self.resource_weights)


def build(arguments: dict[str, Any]) -> BinpackPlugin:
    weight = int_arg(arguments, "binpack.weight", 1)
    weights = {
        CPU: int_arg(arguments, "binpack.cpu", 1),
        MEMORY: int_arg(arguments, "binpack.memory", 1),
    }
    extra = str_arg(arguments, "binpack.resources", "")
    for raw in (r.strip() for r in extra.split(",")):
        if not raw:
            continue
        weights[canonical_name(raw)] = int_arg(arguments, f"binpack.resources.{raw}", 1)
    for key in arguments:
        if key.startswith("binpack.resources.") and key[len("binpack.resources.") :] not in {
            r.strip() for r in extra.split(",")
        }:
            raise ConfigError(key, "names a resource missing from binpack.resources")
    for name, value in weights.items():
        if value < 0:
            raise ConfigError(f"binpack.{name}", f"expected a non-negative weight, got {value}")
    return BinpackPlugin(weight, weights)


def resource_binpacking_score(
    requested: float, capacity: float, used: float, weight: int
) -> float | None:
    """Score of one resource, or None when it does not fit (Volcano returns an error)."""
    if capacity == 0 or weight == 0:
        return 0.0
    used_finally = requested + used
    if used_finally > capacity:
        return None
    return used_finally * weight / capacity


def binpacking_score(task: Task, node: Node, weight: int, weights: dict[str, int]) -> float:
    score, weight_sum = 0.0, 0
    for name in task.resreq.names():
        request = task.resreq.get(name)
        if request == 0 or name not in weights:
            continue
        resource_weight = weights[name]
        part = resource_binpacking_score(
            request, node.allocatable.get(name), node.used.get(name), resource_weight
        )
        if part is None:
            return 0.0
        score += part
        weight_sum += resource_weight
    if weight_sum > 0:
        score /= weight_sum
    return score * MAX_NODE_SCORE * weight
