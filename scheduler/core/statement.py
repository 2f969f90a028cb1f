"""Tentative operations that a gang can take back.

Mirrors volcano-sh/volcano pkg/scheduler/framework/statement.go: Allocate, Pipeline and Evict
change the session at once (so later choices see them) but become decisions only on
``commit``; ``discard`` undoes them in reverse order.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.core.session import Session
from scheduler.core.state import Node, Task
from scheduler.core.types import Bind, Evict, Pipeline, TaskStatus


@dataclass(frozen=True, slots=True)
class _Mark:
    ops: int
    version: int
    epoch: int


@dataclass(slots=True)
class _Op:
    kind: str  # allocate | pipeline | evict
    task: Task
    node: str | None
    previous: TaskStatus
    action: str = ""
    reason: str = ""
    preemptor: Task | None = None


class Statement:
    def __init__(self, session: Session):
        self.session = session
        self.ops: list[_Op] = []

    # operations -------------------------------------------------------------------------------
    def allocate(self, task: Task, node_name: str) -> None:
        ssn = self.session
        node = ssn.nodes[node_name]
        self.ops.append(_Op("allocate", task, node_name, task.status))
        # the cards first: a plugin picking them scores the node as it is before the pod
        _pick_devices(ssn, task, node, False)
        ssn.set_status(task, TaskStatus.ALLOCATED)
        task.node = node_name
        node.allocate(task)
        ssn.fire_allocate(task)

    def pipeline(self, task: Task, node_name: str) -> None:
        ssn = self.session
        node = ssn.nodes[node_name]
        self.ops.append(_Op("pipeline", task, node_name, task.status))
        _pick_devices(ssn, task, node, True)
        ssn.set_status(task, TaskStatus.PIPELINED)
        task.node = node_name
        node.pipeline(task)
        ssn.fire_allocate(task)

    def evict(self, task: Task, action: str, reason: str, preemptor: Task | None) -> None:
        ssn = self.session
        self.ops.append(_Op("evict", task, task.node, task.status, action, reason, preemptor))
        ssn.set_status(task, TaskStatus.RELEASING)
        ssn.capacity_epoch += 1
        node = ssn.nodes.get(task.node) if task.node else None
        if node is not None:
            node.evict(task)
        ssn.fire_deallocate(task)

    # outcome ----------------------------------------------------------------------------------
    def mark(self) -> _Mark:
        ssn = self.session
        return _Mark(len(self.ops), ssn.version, ssn.capacity_epoch)

    def discard(self, mark: _Mark | None = None) -> None:
        """Undo every operation after ``mark`` (all of them by default), newest first.

        Rolling back to a mark restores the session exactly as it was at the mark, so its
        version counters go back too: "nothing changed since" caches stay valid.
        """
        ssn = self.session
        start = mark.ops if mark is not None else 0
        undone, self.ops = self.ops[start:], self.ops[:start]
        if any(op.kind == "evict" for op in undone):
            ssn.capacity_epoch += 1
        for op in reversed(undone):
            task = op.task
            node = ssn.nodes.get(op.node) if op.node else None
            if op.kind == "evict":
                ssn.set_status(task, op.previous)
                if node is not None:
                    node.unevict(task)
                ssn.fire_allocate(task)
            else:
                ssn.fire_deallocate(task)
                ssn.set_status(task, op.previous)
                task.node = None
                if node is not None:
                    if op.kind == "allocate":
                        node.unallocate(task)
                    else:
                        node.unpipeline(task)
                task.gpus = ()
        if mark is not None:
            ssn.version, ssn.capacity_epoch = mark.version, mark.epoch

    def commit(self) -> None:
        ssn = self.session
        for op in self.ops:
            task = op.task
            if op.kind == "allocate":
                ssn.set_status(task, TaskStatus.BINDING)
                assert op.node is not None  # noqa: S101 - allocations always name their node
                ssn.binds.append(Bind(task.name, task.job, op.node, task.gpus))
            elif op.kind == "pipeline":
                assert op.node is not None  # noqa: S101 - pipelines always name their node
                ssn.pipelines.append(Pipeline(task.name, task.job, op.node, task.gpus))
            else:
                preemptor = op.preemptor
                ssn.evictions.append(
                    Evict(
                        task.name,
                        task.job,
                        op.node,
                        preemptor.name if preemptor else None,
                        preemptor.job if preemptor else None,
                        op.action,
                        op.reason + ssn.eviction_notes.get(task.name, ""),
                        task.gpus,
                    )
                )
        self.ops.clear()


def _pick_devices(ssn: Session, task: Task, node: Node, future_only: bool) -> None:
    """Choose the cards of a pod going onto ``node`` (``task.gpus``; the node books them): a
    plugin's choice (``gpu_pickers``), else the ledger's. Callers checked that they fit
    (``devices_fit``); a pod whose devices do not fit anyway (a caller that checked only the
    GPU count) gets none rather than a card someone else holds."""
    ledger, need = node.devices, task.gpu
    if ledger is None or need is None:
        return
    picked = None
    for picker in ssn.gpu_pickers:
        picked = picker(task, node, future_only)
        if picked is not None:
            break
    if picked is None:
        picked = ledger.pick(need, future_only)
    task.gpus = picked or ()
