"""One scheduling session: the working state the actions edit.

The framework is split by role, as volcano-sh/volcano pkg/scheduler/framework is:
- ``scheduler.core.cycle`` opens and closes a session (framework.go OpenSession/CloseSession);
- ``hooks`` holds the callback types and what a plugin declares about a hook (api/types.go);
- ``registry`` is where plugins register them, one typed method per hook, and ``dispatch``
  combines their answers (the two halves of session_plugins.go);
- this module is the state: nodes, queues, jobs and tasks built from the snapshot, the
  decisions so far, and the task transitions the statement makes (session.go).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import TypeVar

from scheduler.core.config import SchedulerConf
from scheduler.core.devices import (
    DeviceLedger,
    GpuNeed,
    LedgerLayout,
    gpu_need,
    ledger_layout,
    node_devices,
)
from scheduler.core.dispatch import Dispatch
from scheduler.core.hooks import Plugin
from scheduler.core.node_index import NodeIndex
from scheduler.core.resources import GPU, PODS, Resources
from scheduler.core.state import Job, Node, Queue, Task, natural_key
from scheduler.core.types import (
    OCCUPYING_STATUSES,
    Bind,
    Evict,
    GpuDevice,
    NodeInfo,
    Pipeline,
    PodGroupPhase,
    Snapshot,
    TaskInfo,
    TaskStatus,
)

_T = TypeVar("_T")

DEFAULT_MAX_PODS = 110  # Kubernetes' default kubelet maxPods when a node states none


class CycleState:
    """What a part of the core keeps for the rest of the session under a key of its own, like
    kube-scheduler's CycleState: the explanations' memos, filled at close. An action's own
    state lives in the action (``allocate.AllocateState``), made for each run."""

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data: dict[str, object] = {}

    def get(self, key: str, factory: Callable[[], _T]) -> _T:
        """The entry under ``key``, made by ``factory`` the first time."""
        value = self._data.get(key)
        if value is None:
            value = self._data[key] = factory()
        return value  # type: ignore[return-value]  # what ``factory`` made for this key


class Session(Dispatch):
    """Working state for one cycle, with the hook registry and dispatchers it inherits."""

    def __init__(self, snapshot: Snapshot, conf: SchedulerConf):
        super().__init__(conf)
        self.snapshot = snapshot
        self.conf = conf
        self.now = snapshot.now
        self._explain_memo = {}
        self.plugins: dict[str, Plugin] = {}
        self.binds: list[Bind] = []
        self.evictions: list[Evict] = []
        # Per evicted task, what a plugin adds to its eviction's reason (cdp: that its minimum
        # run time was overridden); read when the eviction is committed.
        self.eviction_notes: dict[str, str] = {}
        self.pipelines: list[Pipeline] = []
        # Bumped whenever resources are given back, so cached "fits nowhere" answers expire.
        self.capacity_epoch = 0
        self.version = 0
        # No class shortcut or signature-keyed cache may answer for these tasks.
        self.unique_predicates = set()
        self.cycle_state = CycleState()
        # Whether each of some jobs can never run as submitted (its sentence, else None): the
        # verdict, which sits above the plugins, given by whoever opens the session
        # (``cycle.open_session``); None leaves every job in its queue's demand.
        self.never_judge: Callable[[list[Job]], list[str | None]] | None = None
        self._build(snapshot)
        self.node_index = NodeIndex(self.node_list)
        for node in self.node_list:
            node.index = self.node_index

    # building -------------------------------------------------------------------------------
    def _build(self, snapshot: Snapshot) -> None:  # noqa: C901, PLR0912 - one pass over each kind of record
        self._build_nodes(snapshot)
        self.node_list: list[Node] = list(self.nodes.values())
        self.queues: dict[str, Queue] = {}
        for qinfo in sorted(snapshot.queues, key=lambda q: q.name):
            self.queues[qinfo.name] = Queue(qinfo)
        for queue in self.queues.values():
            parent = queue.info.parent
            if parent and parent in self.queues:
                self.queues[parent].children.append(queue.name)
        self.jobs: dict[str, Job] = {}
        self.tasks: dict[str, Task] = {}
        # Requests are immutable: pods of one spec (the same request object) share one vector,
        # and equal vectors are interned, so memo keys built from them hash and compare once.
        requests: dict[int, tuple[Resources, bool, GpuNeed | None]] = {}
        interned: dict[Resources, tuple[Resources, bool, GpuNeed | None]] = {}
        needs: dict[tuple[int, int], GpuNeed | None] = {}
        unassigned: list[Task] = []  # occupying pods holding GPUs on unnamed devices
        for jinfo in sorted(snapshot.jobs, key=lambda j: (j.created, j.namespace, j.name)):
            tasks: dict[str, Task] = {}
            infos = jinfo.tasks
            keyed: list[tuple[tuple[object, ...] | None, TaskInfo]]
            if len(infos) > 1:
                # (natural key, info): the key is the task's sort key later on
                keyed = sorted(((natural_key(t.name), t) for t in infos), key=itemgetter(0))
            else:
                keyed = [(None, t) for t in infos]
            for sort_key, tinfo in keyed:
                known = requests.get(id(tinfo.requests))
                if known is None:
                    resreq = Resources({**tinfo.requests.explicit(), PODS: 1})
                    known = interned.get(resreq)
                    if known is None:
                        gpus = resreq.get(GPU)
                        # its pods' device request when they state no GPU memory
                        plain = gpu_need(gpus, 0) if gpus > 0 else None
                        known = interned[resreq] = (resreq, resreq.is_empty(), plain)
                    requests[id(tinfo.requests)] = known
                task = tasks[tinfo.name] = Task(
                    tinfo, jinfo.name, known[0], tinfo.status, tinfo.node, sort_key, known[1]
                )
                if tinfo.gpu_memory:
                    task.gpu = _need_of(needs, known[0], tinfo.gpu_memory)
                elif known[2] is not None:
                    task.gpu = known[2]
            min_available = len(tasks) if jinfo.min_available is None else jinfo.min_available
            phase = jinfo.phase or self._derive_phase(tasks, min_available)
            job = Job(jinfo, tasks, min_available, phase, {}, dict(jinfo.min_task_member))
            job.has_best_effort = any(t.best_effort for t in tasks.values())
            all_tasks = self.tasks
            for name, task in tasks.items():
                status = task.status
                job.count_status(status, 1)
                all_tasks[name] = task
                if status in OCCUPYING_STATUSES:
                    self._place_existing(task, unassigned)
            self.jobs[jinfo.name] = job
        # Pods the snapshot gives no device indices get the lowest free ones, after every pod
        # with named devices is booked, in job order (deterministic).
        for task in unassigned:
            self.nodes[task.node].book_devices(task, None)  # type: ignore[index]  # placed pods

    def _build_nodes(self, snapshot: Snapshot) -> None:
        self.nodes: dict[str, Node] = {}
        # cards and their ledger layouts, shared by the nodes that have the same
        by_count: dict[int, tuple[GpuDevice, ...]] = {}
        layouts: dict[int, LedgerLayout] = {}  # by id() of a devices tuple kept in by_count
        for info in sorted(snapshot.nodes, key=lambda n: natural_key(n.name)):
            allocatable = info.allocatable
            if PODS not in allocatable.explicit():
                allocatable = Resources({**allocatable.explicit(), PODS: DEFAULT_MAX_PODS})
                info = with_allocatable(info, allocatable)
            shape = tuple(sorted(allocatable.explicit().items()))
            devices = node_devices(info, by_count)
            ledger = None
            if devices:
                if info.gpus:
                    ledger = DeviceLedger(devices)
                else:
                    layout = layouts.get(id(devices))
                    if layout is None:
                        layout = layouts[id(devices)] = ledger_layout(devices)
                    ledger = DeviceLedger(devices, layout)
            if ledger is not None:
                for index, milli, memory in info.gpus_used_by_others:
                    ledger.hold(GpuNeed(milli=milli, memory=memory), (index,))
            self.nodes[info.name] = Node(
                info,
                idle=allocatable.sub_clamped(info.used_by_others),
                used=info.used_by_others,
                labels=dict(info.labels),
                shape=shape,
                devices=ledger,
            )

    @staticmethod
    def _derive_phase(tasks: dict[str, Task], min_available: int) -> PodGroupPhase:
        running = sum(1 for t in tasks.values() if t.status in OCCUPYING_STATUSES)
        if running and running >= min_available:
            return PodGroupPhase.RUNNING
        return PodGroupPhase.INQUEUE if running else PodGroupPhase.PENDING

    def _place_existing(self, task: Task, unassigned: list[Task]) -> None:
        if task.status not in OCCUPYING_STATUSES or task.node is None:
            return
        node = self.nodes.get(task.node)
        if node is None:
            return  # a pod on a node we do not know: counts for its queue only
        node.add_existing(task)
        if task.gpu is not None and node.devices is not None:
            if task.info.gpu_indices:
                node.book_devices(task, task.info.gpu_indices)
            else:
                unassigned.append(task)

    # task state transitions (used by Statement) -----------------------------------------------
    def set_status(self, task: Task, status: TaskStatus) -> None:
        self.version += 1
        job = self.jobs[task.job]
        job.count_status(task.status, -1)
        job.count_status(status, 1)
        task.status = status

    def release(self) -> None:
        """Drop the working state once the cycle's result is built.

        Plugins, their bound hooks and the node index point back at the session or its nodes;
        cutting those references lets reference counting free the whole session at once, so
        the cyclic collector never has to walk its hundred thousand objects.
        """
        for node in self.node_list:
            node.index = None
        keep = {"snapshot", "conf", "now"}
        for name in list(vars(self)):
            if name not in keep:
                delattr(self, name)


def with_allocatable(info: NodeInfo, allocatable: Resources) -> NodeInfo:
    """``replace(info, allocatable=allocatable)`` without its walk over the fields, once per
    node of every session (tests/scheduler/core/test_session.py holds it to ``replace``)."""
    return NodeInfo(
        info.name,
        allocatable,
        info.labels,
        info.unschedulable,
        info.taints,
        info.gpus,
        info.used_by_others,
        info.gpus_used_by_others,
    )


def _need_of(
    memo: dict[tuple[int, int], GpuNeed | None], resreq: Resources, memory: int
) -> GpuNeed | None:
    """The device request of a pod, shared by every pod of its (interned) request."""
    key = (id(resreq), memory)
    if key not in memo:
        memo[key] = gpu_need(resreq.get(GPU), memory)
    return memo[key]
