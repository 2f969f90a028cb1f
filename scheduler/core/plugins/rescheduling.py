"""rescheduling: move pods off hot nodes while cold nodes exist (lowNodeUtilization).

Source: volcano-sh/volcano pkg/scheduler/plugins/rescheduling/ (rescheduling.go,
low_node_utilization.go). Arguments: ``interval`` (``"5m"``, ``"30s"`` or seconds; default 5m)
and ``strategies: [{name: lowNodeUtilization, params: {thresholds, targetThresholds}}]`` with
percentages per resource (defaults cpu/memory/pods 20 and 50).

The core has no clock: the plugin runs when the snapshot's ``last_rescheduling`` is unset or at
least ``interval`` seconds before ``now`` (upstream keeps the last run time in memory and runs on
its first session too). Victims: on each node above a target threshold, while some node is
below all thresholds, Running preemptable pods are taken least important first (lowest job
priority, then newest), never cutting a job below min_available (a one-pod job may go whole), until the node is back
under its targets. The preempt action evicts them, as upstream's victimTasks does.
"""

from __future__ import annotations

import re

from scheduler.core.config import ConfigError
from scheduler.core.resources import CPU, MEMORY, PODS
from scheduler.core.session import Session
from scheduler.core.state import Node, Task
from scheduler.core.types import TaskStatus

PLUGIN_NAME = "rescheduling"
DEFAULT_INTERVAL = 300.0
DEFAULT_LOW = {CPU: 20.0, MEMORY: 20.0, PODS: 20.0}
DEFAULT_TARGET = {CPU: 50.0, MEMORY: 50.0, PODS: 50.0}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value, field: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(field, f"expected a duration such as '5m', got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    match = _DURATION.match(str(value).strip()) if isinstance(value, str) else None
    if not match:
        raise ConfigError(field, f"expected a duration such as '5m', got {value!r}")
    return float(match.group(1)) * _UNIT[match.group(2)]


def _percentages(raw, field: str, default: dict[str, float]) -> dict[str, float]:
    if raw is None:
        return dict(default)
    if not isinstance(raw, dict):
        raise ConfigError(field, f"expected a mapping of percentages, got {raw!r}")
    out = {}
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{field}.{name}", f"expected a number, got {value!r}")
        out[str(name)] = float(value)
    return out


def build(arguments: dict) -> ReschedulingPlugin:
    interval = parse_duration(arguments.get("interval", DEFAULT_INTERVAL), "interval")
    low, target = dict(DEFAULT_LOW), dict(DEFAULT_TARGET)
    strategies = arguments.get("strategies", [])
    if not isinstance(strategies, list):
        raise ConfigError("strategies", f"expected a list, got {strategies!r}")
    for index, strategy in enumerate(strategies):
        field = f"strategies[{index}]"
        if not isinstance(strategy, dict):
            raise ConfigError(field, "expected a mapping")
        name = strategy.get("name", strategy.get("Name"))
        if name != "lowNodeUtilization":
            raise ConfigError(f"{field}.name", f"unknown strategy {name!r}")
        params = strategy.get("params", strategy.get("Parameters")) or {}
        low = _percentages(params.get("thresholds"), f"{field}.params.thresholds", low)
        target = _percentages(
            params.get("targetThresholds"), f"{field}.params.targetThresholds", target
        )
    return ReschedulingPlugin(interval, low, target)


class ReschedulingPlugin:
    name = PLUGIN_NAME

    def __init__(self, interval: float, low: dict[str, float], target: dict[str, float]):
        self.interval = interval
        self.low = low
        self.target = target

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        last = ssn.snapshot.last_rescheduling
        if last is None or ssn.now - last >= self.interval:
            ssn.add_fn("victim_tasks", self.name, self.victims)

    # Plain loops over every node, once per cycle: the generator forms were a few percent of
    # a 5,000-node cycle.
    def _below(self, node: Node, thresholds: dict[str, float]) -> bool:
        for usage, limit, _ in _usages(node, thresholds):  # noqa: SIM110
            if not usage < limit:
                return False
        return True

    def _over(self, node: Node, thresholds: dict[str, float]) -> set[str]:
        return {name for usage, limit, name in _usages(node, thresholds) if usage > limit}

    def victims(self) -> list[Task]:
        ssn = self.ssn
        nodes = [n for n in ssn.node_list if not n.info.unschedulable]
        if not any(self._below(node, self.low) for node in nodes):
            return []
        chosen: list[Task] = []
        left: dict[str, int] = {}
        for node in nodes:
            over = self._over(node, self.target)
            if not over:
                continue
            used = node.used
            candidates = [
                t
                for t in node.tasks.values()
                if t.status is TaskStatus.RUNNING and t.info.preemptable
            ]
            for task in ssn.victim_order(candidates):
                if not any(
                    100.0 * used.get(r) / node.allocatable.get(r) > self.target[r]
                    for r in over
                    if node.allocatable.get(r)
                ):
                    break
                job = ssn.jobs[task.job]
                remaining = left.setdefault(job.name, job.ready_task_num())
                whole = job.ready_task_num() == 1  # a one-pod job leaves whole
                if not whole and remaining <= job.min_available:
                    continue
                left[job.name] = remaining - 1
                used = used.sub(task.resreq)
                chosen.append(task)
        return chosen


def _usages(node: Node, thresholds: dict[str, float]) -> list[tuple[float, float, str]]:
    """(percent used, threshold, resource name) for each thresholded resource."""
    used, allocatable = node.used, node.allocatable
    out = []
    for name, limit in thresholds.items():
        capacity = allocatable.get(name)
        out.append((100.0 * used.get(name) / capacity if capacity else 0.0, limit, name))
    return out
