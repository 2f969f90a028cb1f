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

Loop guards (``loopGuards: true``; off by default, so the plugin behaves as upstream; the seed
conf turns them on). Upstream evicts without asking where the pod will go, and the allocate
action places it again by node order: with binpack, which prefers busy nodes, that is the node
it was just moved off, so the two loop (a pod evicted every interval and placed straight back).
With the guards, a departure from upstream:

- a pod is evicted only if a dry run places it elsewhere on a cold node (below every low
  threshold) that stays at or under every target threshold with it: the best node by the
  session's node order among the other nodes whose idle resources hold it and whose
  predicates pass, each cold node taking at most one moved pod per cycle; and only if its
  queue would take it back at once (not above its deserved share);
- pods of queues marked not reclaimable are never moved;
- a job loses at most one pod to rescheduling per ``evictionBudgetWindow`` (default ``1h``),
  counted from the snapshot's ``rescheduled`` history;
- a pod moved off a node is not placed back on that node within ``interval`` (a predicate).
"""

from __future__ import annotations

import re
from typing import Any

from scheduler.core.config import ConfigError, bool_arg
from scheduler.core.hooks import FitError
from scheduler.core.resources import CPU, MEMORY, MIN_RESOURCE, PODS
from scheduler.core.session import Session
from scheduler.core.state import Node, Task
from scheduler.core.types import TaskStatus

PLUGIN_NAME = "rescheduling"
DEFAULT_INTERVAL = 300.0
DEFAULT_BUDGET_WINDOW = 3600.0
DEFAULT_LOW = {CPU: 20.0, MEMORY: 20.0, PODS: 20.0}
DEFAULT_TARGET = {CPU: 50.0, MEMORY: 50.0, PODS: 50.0}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: object, field: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(field, f"expected a duration such as '5m', got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    match = _DURATION.match(str(value).strip()) if isinstance(value, str) else None
    if not match:
        raise ConfigError(field, f"expected a duration such as '5m', got {value!r}")
    return float(match.group(1)) * _UNIT[match.group(2)]


def _percentages(raw: object, field: str, default: dict[str, float]) -> dict[str, float]:
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


def build(arguments: dict[str, Any]) -> ReschedulingPlugin:
    interval = parse_duration(arguments.get("interval", DEFAULT_INTERVAL), "interval")
    guards = bool_arg(arguments, "loopGuards", False)
    window = parse_duration(
        arguments.get("evictionBudgetWindow", DEFAULT_BUDGET_WINDOW), "evictionBudgetWindow"
    )
    if window < 0 or interval < 0:
        raise ConfigError(
            "interval" if interval < 0 else "evictionBudgetWindow", "expected a duration >= 0"
        )
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
    return ReschedulingPlugin(interval, low, target, guards=guards, budget_window=window)


class ReschedulingPlugin:
    name = PLUGIN_NAME

    def __init__(
        self,
        interval: float,
        low: dict[str, float],
        target: dict[str, float],
        *,
        guards: bool = False,
        budget_window: float = DEFAULT_BUDGET_WINDOW,
    ):
        self.interval = interval
        self.low = low
        self.target = target
        self.guards = guards
        self.budget_window = budget_window
        self.due = False

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        last = ssn.snapshot.last_rescheduling
        self.due = last is None or ssn.now - last >= self.interval
        if self.due:
            ssn.add_victim_tasks_fn(self.name, self.victims, rescheduling=True)
        # task -> node it was moved off within the interval; job -> its last move in the window
        self.moved_off: dict[str, str] = {}
        self.last_move: dict[str, float] = {}
        if not self.guards:
            return
        for record in ssn.snapshot.rescheduled:
            age = ssn.now - record.at
            if age < self.interval:
                self.moved_off[record.task] = record.node
            if age < self.budget_window:
                self.last_move[record.job] = max(
                    record.at, self.last_move.get(record.job, record.at)
                )
        if self.moved_off:
            ssn.add_predicate_fn(self.name, self.not_back)
            # The answer depends on the pod, not only on its scheduling signature.
            ssn.unique_predicates.update(self.moved_off)

    def not_back(self, task: Task, node: Node) -> FitError | None:
        if self.moved_off.get(task.name) == node.name:
            return FitError(
                f"moved off {node.name} by rescheduling less than {_duration(self.interval)} ago",
                resolvable=False,
            )
        return None

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
        cold = {node.name for node in nodes if self._below(node, self.low)}
        if not cold:
            return []
        chosen: list[Task] = []
        left: dict[str, int] = {}
        landed: set[str] = set()  # cold nodes a dry run already gave a pod this cycle
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
                if self.guards:
                    landing = self._landing(task, node, cold - landed)
                    if landing is None:
                        continue
                    landed.add(landing)
                    self.last_move[job.name] = ssn.now
                left[job.name] = remaining - 1
                used = used.sub(task.resreq)
                chosen.append(task)
        return chosen

    def _landing(self, task: Task, source: Node, cold: set[str]) -> str | None:
        """The cold node a dry run of the allocate action would put ``task`` on once it left
        ``source``, or None when it may not move (see the module's loop guards)."""
        ssn = self.ssn
        job = ssn.jobs[task.job]
        queue = ssn.queues.get(job.queue)
        if queue is None or not queue.info.reclaimable or not cold:
            return None
        if job.name in self.last_move:
            return None  # its budget for the window is spent
        if not _takes_back(ssn, queue.name, task):
            return None
        fits = [
            node
            for node in ssn.node_list
            if node is not source
            and not node.info.unschedulable
            and task.resreq.less_equal(node.idle)
            and ssn.predicate(task, node) is None
        ]
        best = ssn.best_node(task, fits)
        if best is None or best.name not in cold or not self._stays_under_target(best, task):
            return None
        return best.name

    def _stays_under_target(self, node: Node, task: Task) -> bool:
        """Would ``node`` with ``task`` added stay at or under every target threshold? A pod
        that makes its new node as hot as its old one would only move back next time (upstream
        bounds the moves by the cold nodes' total headroom; per node is what stops the
        ping-pong of one big pod between two nodes)."""
        for name, limit in self.target.items():
            capacity = node.allocatable.get(name)
            if (
                capacity
                and 100.0 * (node.used.get(name) + task.resreq.get(name)) / capacity > limit
            ):
                return False
        return True


def _takes_back(ssn: Session, queue: str, task: Task) -> bool:
    """Would the queue's quota let the pod be placed again once it left (allocated, minus the
    pod, plus the pod, within deserved in every resource it asks for)?"""
    attr = ssn.queue_share(queue)
    if attr is None:
        return True
    for name, value in task.resreq.explicit_items():
        if value > 0 and attr.allocated.get(name) > attr.deserved.get(name) + MIN_RESOURCE:
            return False
    return True


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{seconds:g} s"


def _usages(node: Node, thresholds: dict[str, float]) -> list[tuple[float, float, str]]:
    """(percent used, threshold, resource name) for each thresholded resource."""
    used, allocatable = node.used, node.allocatable
    out = []
    for name, limit in thresholds.items():
        capacity = allocatable.get(name)
        out.append((100.0 * used.get(name) / capacity if capacity else 0.0, limit, name))
    return out
