"""Mutable working copies of the snapshot that one session edits.

Counterparts of volcano-sh/volcano pkg/scheduler/api/{job_info,node_info,queue_info}.go: a job
keeps per-status task counts (TaskStatusIndex) so gang checks stay O(1); a node keeps idle,
used, releasing and pipelined resources, with FutureIdle = idle + releasing - pipelined.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.core.devices import DeviceLedger, GpuNeed
from scheduler.core.resources import EMPTY, Resources, exact_gpu
from scheduler.core.types import (
    ALLOCATED_STATUSES,
    JobInfo,
    NodeInfo,
    PodGroupPhase,
    QueueInfo,
    TaskInfo,
    TaskStatus,
)

if TYPE_CHECKING:
    from scheduler.core.node_index import NodeIndex

_DIGITS = re.compile(r"(\d+)")
READY_STATUSES = ALLOCATED_STATUSES | {TaskStatus.SUCCEEDED}  # volcano JobInfo.ReadyTaskNum
# volcano JobInfo.ValidTaskNum
VALID_STATUSES = READY_STATUSES | {TaskStatus.PIPELINED, TaskStatus.PENDING}
_PIPELINED_OR_READY = READY_STATUSES | {TaskStatus.PIPELINED}


def natural_key(name: str) -> tuple[object, ...]:
    """Order ``p-2`` before ``p-10``; the raw name breaks ties (``n1`` and ``n01`` read alike),
    so sorting never depends on the order the snapshot listed things in."""
    parts = tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(name))
    return (parts, name)


@dataclass(slots=True, eq=False)
class Task:
    info: TaskInfo
    job: str
    resreq: Resources
    status: TaskStatus
    node: str | None
    # natural_key of the name, computed when first compared (most tasks never are)
    _sort_key: tuple[object, ...] | None = None
    # Volcano's BestEffort: a request without cpu, memory or scalars; None = work it out
    best_effort: bool | None = None
    gpu: GpuNeed | None = None  # what it asks of a node's GPU devices (None: no GPU)
    gpus: tuple[int, ...] = ()  # the device indices it holds or is promised on ``node``

    def __post_init__(self) -> None:
        if self.best_effort is None:
            self.best_effort = self.resreq.is_empty()

    @property
    def sort_key(self) -> tuple[object, ...]:
        if self._sort_key is None:
            self._sort_key = natural_key(self.info.name)
        return self._sort_key

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def priority(self) -> int:
        return self.info.priority


@dataclass(slots=True, eq=False)
class Job:
    info: JobInfo
    tasks: dict[str, Task]
    min_available: int
    phase: PodGroupPhase
    counts: dict[TaskStatus, int] = field(default_factory=dict)
    task_min_available: dict[str, int] = field(default_factory=dict)
    # task name -> why it did not fit: nodes refused, by reason
    fit_errors: dict[str, dict[str, int]] = field(default_factory=dict)
    failed_roles: set[str] = field(default_factory=set)
    reason: str | None = None  # the latest thing that blocked this job in this cycle
    unplaced: bool = False  # blocked by room on the nodes; explained at close from final state
    # the pod its queue's quota refused (explained at close, with the arithmetic, from the
    # final shares), or None
    quota_task: Task | None = None
    has_best_effort: bool = False
    ready: int = 0  # tasks in READY_STATUSES, kept by count_status
    # tasks in VALID_STATUSES, kept by count_status: gang asks each action for every job
    valid: int = 0
    _uid: str | None = None

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def queue(self) -> str:
        return self.info.queue

    @property
    def priority(self) -> int:
        return self.info.priority

    @property
    def uid(self) -> str:
        # part of every job sort key: built once
        if self._uid is None:
            self._uid = f"{self.info.namespace}/{self.info.name}"
        return self._uid

    @property
    def task_min_available_total(self) -> int:
        return sum(self.task_min_available.values())

    def count_status(self, status: TaskStatus, delta: int) -> None:
        self.counts[status] = self.counts.get(status, 0) + delta
        if status in READY_STATUSES:
            self.ready += delta
        if status in VALID_STATUSES:
            self.valid += delta

    def count(self, *statuses: TaskStatus) -> int:
        counts = self.counts
        total = 0
        for status in statuses:
            total += counts.get(status, 0)
        return total

    def ready_task_num(self) -> int:
        return self.ready

    def waiting_task_num(self) -> int:
        return self.counts.get(TaskStatus.PIPELINED, 0)

    def valid_task_num(self) -> int:
        return self.valid

    def pending_tasks(self) -> list[Task]:
        return [t for t in self.tasks.values() if t.status is TaskStatus.PENDING]

    def pending_best_effort_num(self) -> int:
        if not self.has_best_effort:
            return 0
        return sum(1 for t in self.pending_tasks() if t.best_effort)

    def _occupied_by_role(self, statuses: Collection[TaskStatus]) -> dict[str, int]:
        occupied: dict[str, int] = {}
        for task in self.tasks.values():
            if task.status in statuses or (task.status is TaskStatus.PENDING and task.best_effort):
                occupied[task.info.role] = occupied.get(task.info.role, 0) + 1
        return occupied

    def _check_roles(self, statuses: Collection[TaskStatus]) -> bool:
        if not self.task_min_available or self.min_available < self.task_min_available_total:
            return True
        occupied = self._occupied_by_role(statuses)
        return all(occupied.get(role, 0) >= n for role, n in self.task_min_available.items())

    def is_ready(self) -> bool:
        """Volcano JobInfo.IsReady && CheckTaskReady (gang's JobReady)."""
        ready = self.ready_task_num() + self.pending_best_effort_num() >= self.min_available
        return ready and self._check_roles(READY_STATUSES)

    def is_pipelined(self) -> bool:
        occupied = self.waiting_task_num() + self.ready_task_num()
        if occupied + self.pending_best_effort_num() < self.min_available:
            return False
        return self._check_roles(_PIPELINED_OR_READY)

    def is_starving(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() < self.min_available

    def check_task_valid(self) -> bool:
        if not self.task_min_available or self.min_available < self.task_min_available_total:
            return True
        statuses = VALID_STATUSES
        occupied: dict[str, int] = {}
        for task in self.tasks.values():
            if task.status in statuses:
                occupied[task.info.role] = occupied.get(task.info.role, 0) + 1
        return all(occupied.get(role, 0) >= n for role, n in self.task_min_available.items())

    def allocated_by_role(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for task in self.tasks.values():
            if task.status in ALLOCATED_STATUSES:
                out[task.info.role] = out.get(task.info.role, 0) + 1
        return out

    def need_continue_allocating(self) -> bool:
        """Volcano JobInfo.NeedContinueAllocating: may allocation go on after a task failed?"""
        if self.min_available == len(self.tasks):
            return False
        if self.min_available < self.task_min_available_total:
            pending: dict[str, int] = {}
            for task in self.pending_tasks():
                pending[task.info.role] = pending.get(task.info.role, 0) + 1
            left = sum(n for role, n in pending.items() if role not in self.failed_roles)
            return self.ready_task_num() + left >= self.min_available
        allocated = self.allocated_by_role()
        for role in sorted(self.failed_roles):
            minimum = self.task_min_available.get(role, 0)
            if minimum and minimum > allocated.get(role, 0):
                return False
        return True

    def task_has_fit_errors(self, task: Task) -> bool:
        """A role whose task already failed every node is not retried (same pod spec)."""
        role = task.info.role
        return bool(role) and role in self.failed_roles

    def min_resources(self) -> Resources:
        return self.info.min_resources if self.info.min_resources is not None else EMPTY


@dataclass(slots=True, eq=False)
class Node:
    info: NodeInfo
    idle: Resources
    used: Resources
    releasing: Resources = EMPTY
    pipelined: Resources = EMPTY
    tasks: dict[str, Task] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    _future: Resources | None = None
    _state_key: tuple[object, ...] | None = None
    shape: tuple[tuple[str, float], ...] = ()  # allocatable as a hashable key, set once
    index: NodeIndex | None = None  # the session's, told about every change
    devices: DeviceLedger | None = None  # its GPU cards (None: it has none)

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def allocatable(self) -> Resources:
        return self.info.allocatable

    def future_idle(self) -> Resources:
        """Idle + releasing - pipelined, cached until the node changes."""
        if self._future is None:
            if self.releasing is EMPTY and self.pipelined is EMPTY:
                # the usual node: nothing leaving, nothing promised
                self._future = self.idle
            else:
                self._future = self.idle.add(self.releasing).sub(self.pipelined)
        return self._future

    def state_key(self) -> tuple[object, ...]:
        """Nodes with equal keys score the same for state-only scorers (binpack, nodeorder)."""
        if self._state_key is None:
            devices = self.devices.key() if self.devices is not None else ()
            self._state_key = (self.shape, tuple(sorted(self.used.explicit().items())), devices)
        return self._state_key

    def device_key(self) -> tuple[object, ...]:
        """The devices' books when some card is shared, else (): part of every class key."""
        return self.devices.key() if self.devices is not None else ()

    # Mutations: every change of the node's books goes through one of these, which tell the
    # index once at the end (Volcano NodeInfo's AddTask/RemoveTask, split by what moves).
    def add_existing(self, task: Task) -> None:
        """A pod the snapshot shows occupying this node (Running, Bound, Releasing ...)."""
        resreq = task.resreq
        self.idle = _books(task, self.idle.sub(resreq))
        self.used = _books(task, self.used.add(resreq))
        if task.status is TaskStatus.RELEASING:
            # as the snapshot's sums have it: no milli-GPU rounding of releasing (unlike evict)
            self.releasing = self.releasing.add(resreq)
        self.tasks[task.name] = task
        self._changed()

    def book_devices(self, task: Task, indices: tuple[int, ...] | None) -> None:
        """Book an occupying pod on its cards (the lowest free ones when not named)."""
        ledger, need = self.devices, task.gpu
        if ledger is None or need is None or need.invalid:
            return
        if indices is None:
            # An over-full node (the snapshot disagrees with itself) books what it can.
            indices = ledger.pick(need, False) or ledger.pick(need, True) or ()
        task.gpus = tuple(indices)
        ledger.hold(need, task.gpus)
        if task.status is TaskStatus.RELEASING:
            ledger.release(need, task.gpus)
        self._changed()

    def allocate(self, task: Task) -> None:
        """The pod takes idle resources (and its cards, ``task.gpus``) now."""
        if task.gpus and task.gpu is not None and self.devices is not None:
            self.devices.hold(task.gpu, task.gpus)
        self.idle = _books(task, self.idle.sub(task.resreq))
        self.used = _books(task, self.used.add(task.resreq))
        self.tasks[task.name] = task
        self._changed()

    def unallocate(self, task: Task) -> None:
        """Undo ``allocate``."""
        self.tasks.pop(task.name, None)
        self.idle = _books(task, self.idle.add(task.resreq))
        self.used = _books(task, self.used.sub(task.resreq))
        if task.gpus and task.gpu is not None and self.devices is not None:
            self.devices.hold(task.gpu, task.gpus, -1)
        self._changed()

    def pipeline(self, task: Task) -> None:
        """The pod is promised what releasing pods leave (and its cards, ``task.gpus``)."""
        if task.gpus and task.gpu is not None and self.devices is not None:
            self.devices.promise(task.gpu, task.gpus)
        self.pipelined = _books(task, self.pipelined.add(task.resreq))
        self.tasks[task.name] = task
        self._changed()

    def unpipeline(self, task: Task) -> None:
        """Undo ``pipeline``."""
        self.tasks.pop(task.name, None)
        self.pipelined = _books(task, self.pipelined.sub(task.resreq))
        if task.gpus and task.gpu is not None and self.devices is not None:
            self.devices.promise(task.gpu, task.gpus, -1)
        self._changed()

    def evict(self, task: Task) -> None:
        """An occupying pod starts leaving: its resources and cards are free once it is gone."""
        self.releasing = _books(task, self.releasing.add(task.resreq))
        if task.gpu is not None and task.gpus and self.devices is not None:
            self.devices.release(task.gpu, task.gpus)
        self._changed()

    def unevict(self, task: Task) -> None:
        """Undo ``evict``."""
        self.releasing = _books(task, self.releasing.sub(task.resreq))
        if task.gpu is not None and task.gpus and self.devices is not None:
            self.devices.release(task.gpu, task.gpus, -1)
        self._changed()

    def _changed(self) -> None:
        self._future = None
        self._state_key = None
        if self.index is not None:
            self.index.update(self)


@dataclass(slots=True, eq=False)
class Queue:
    info: QueueInfo
    children: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.info.name


def _books(task: Task, value: Resources) -> Resources:
    """A node's vector after a share of a card moved: GPU sums kept in exact milli-GPU."""
    need = task.gpu
    return exact_gpu(value) if need is not None and need.shared else value
