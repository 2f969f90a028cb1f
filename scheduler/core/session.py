"""One scheduling session: working state, plugin hooks and their dispatchers.

The dispatchers combine plugin answers across tiers exactly like
volcano-sh/volcano pkg/scheduler/framework/session_plugins.go:
- order functions: the first enabled plugin with a non-zero answer decides; ties fall back to
  creation time then a stable id (here namespace/name, or name for queues and nodes);
- Preemptable/Reclaimable: the intersection of victims within a tier; the first tier that yields
  a non-empty set wins (an empty answer lets the next tier speak, as upstream). That fall-through
  can pick pods gang refused; actions/_victims.py then keeps a victim gang whole or at min;
- Overused: any plugin saying yes; Allocatable/Preemptive/JobReady: every plugin must agree;
- JobPipelined/JobEnqueueable: votes, a reject wins, a permit ends the walk at its tier;
- JobStarving: every answering plugin of the first tier that answers must agree;
- node order: the sum of every enabled plugin's score.

Plugins register each hook with what they declare about it (``Declared``); the session's
accessors answer from those declarations, so nothing here or in the actions asks which plugin
registered a hook.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import cmp_to_key
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from scheduler.core.config import SchedulerConf
from scheduler.core.devices import DeviceLedger, GpuNeed, gpu_need, node_devices
from scheduler.core.node_index import NodeIndex
from scheduler.core.resources import GPU, PODS, Resources
from scheduler.core.state import Job, Node, Queue, Task, natural_key
from scheduler.core.types import (
    OCCUPYING_STATUSES,
    PodGroupPhase,
    Snapshot,
    TaskInfo,
    TaskStatus,
    Vote,
)

if TYPE_CHECKING:
    from scheduler.core.plugins._quota import QueueAttr

_T = TypeVar("_T")

DEFAULT_MAX_PODS = 110  # Kubernetes' default kubelet maxPods when a node states none


@dataclass(frozen=True, slots=True)
class FitError:
    """Why a task cannot go on a node; ``resolvable`` says whether evictions could help."""

    reason: str
    resolvable: bool = True


@dataclass(frozen=True, slots=True)
class Declared:
    """What a plugin declares about one hook it registers, besides the function.

    The framework reads these instead of asking which plugin registered a hook (Volcano's
    session_plugins.go dispatches on the callbacks alone; the declarations here add what our
    shortcuts and explanations need to know to stay exact).
    """

    # node_order: the score depends only on ``Node.state_key()`` (and the task), so equal
    # nodes are scored once
    state_only: bool = False
    # predicate: the answer looks at pods on other nodes (pod anti-affinity of running pods),
    # so no NodeIndex class can answer for its members
    reads_pods: bool = False
    # predicate: the part of the check no eviction or uncordon resolves (selector, node
    # affinity, taints)
    lasting: Callable[[Task, Node], FitError | None] | None = None
    # allocatable: the sentence saying why the queue refused the task (None: the quota is the
    # whole cluster anyway)
    explain: Callable[[Queue, Task], str | None] | None = None
    # preemptable: the verdict depends on the preemptor's job itself, not only on its
    # request and priority (drf compares the job's dominant share with each victim's)
    by_preemptor_job: bool = False
    # victim_tasks: the hook is the periodic rescheduling pass, reported in the cycle result
    rescheduling: bool = False


# declaration -> the hooks it may be declared on
_DECLARABLE = {
    "state_only": ("node_order",),
    "reads_pods": ("predicate",),
    "lasting": ("predicate",),
    "explain": ("allocatable",),
    "by_preemptor_job": ("preemptable",),
    "rescheduling": ("victim_tasks",),
}
_NOTHING_DECLARED = Declared()


class QueueShares(Protocol):
    """A quota plugin's per-queue figures (proportion, capacity), registered with
    ``Session.add_queue_shares``."""

    @property
    def binds_deserved(self) -> bool:
        """True when a queue is held to its deserved share, False when to its real capability
        (capacity lends up to it)."""
        ...

    @property
    def divides_tree(self) -> bool:
        """True when deserved shares are divided down a queue tree by weight, so a queue's
        real limit also depends on its siblings' demand."""
        ...

    def share(self, queue: str) -> QueueAttr | None: ...


class CycleState:
    """What a part of the core keeps for the rest of the session under a key of its own, like
    kube-scheduler's CycleState: the explanations' memos, filled at close. An action's own
    state lives in the action (``allocate.AllocateState``), made for each run."""

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}

    def get(self, key: str, factory: Callable[[], _T]) -> _T:
        """The entry under ``key``, made by ``factory`` the first time."""
        value = self._data.get(key)
        if value is None:
            value = self._data[key] = factory()
        return cast(_T, value)


@dataclass(slots=True)
class EventHandler:
    allocate: Callable[[Task], None] | None = None
    deallocate: Callable[[Task], None] | None = None


class KeyedBatchScorer:
    """A batch node-order function whose score for a node depends only on ``node_key(node)``:
    ``by_key(task)`` maps keys to scores, other keys score 0. Allocate can then score one node
    per (class, key) instead of every node, with the same sums."""

    __slots__ = ("node_key", "by_key")

    def __init__(
        self,
        node_key: Callable[[Node], Any],
        by_key: Callable[[Task], dict[Any, float]],
    ):
        self.node_key = node_key
        self.by_key = by_key

    def __call__(self, task: Task, nodes: list[Node]) -> dict[str, float]:
        by_key = self.by_key(task)
        if not by_key:
            return {}
        node_key = self.node_key
        return {n.name: by_key[k] for n in nodes if (k := node_key(n)) in by_key}


_HOOKS = (
    "job_order",
    "task_order",
    "queue_order",
    "predicate",
    "node_order",
    "batch_node_order",
    "preemptable",
    "reclaimable",
    "overused",
    "allocatable",
    "job_ready",
    "job_pipelined",
    "job_valid",
    "job_enqueueable",
    "job_enqueued",
    "job_starving",
    "preemptive",
    "victim_tasks",
    "victim_queue_order",
)

_ORDER_HOOKS = ("job_order", "task_order", "queue_order")

# hook -> the enable flag that switches it (hooks absent here are always on)
_FLAG_OF = {
    "job_order": "enableJobOrder",
    "task_order": "enableTaskOrder",
    "queue_order": "enableQueueOrder",
    "predicate": "enablePredicate",
    "node_order": "enableNodeOrder",
    "batch_node_order": "enableNodeOrder",
    "preemptable": "enablePreemptable",
    "reclaimable": "enableReclaimable",
    "overused": "enabledOverused",
    "allocatable": "enabledAllocatable",
    "job_ready": "enableJobReady",
    "job_pipelined": "enableJobPipelined",
    "job_enqueueable": "enableJobEnqueued",
    "job_enqueued": "enableJobEnqueued",
    "job_starving": "enableJobStarving",
    "preemptive": "enablePreemptive",
    "victim_tasks": "enableVictim",
}


class Session:
    """Working state plus the hook registry for one cycle."""

    def __init__(self, snapshot: Snapshot, conf: SchedulerConf):
        self.snapshot = snapshot
        self.conf = conf
        self.now = snapshot.now
        self.fns: dict[str, dict[str, Callable[..., Any]]] = {hook: {} for hook in _HOOKS}
        self.keys: dict[str, dict[str, Callable[..., Any]]] = {hook: {} for hook in _ORDER_HOOKS}
        self.declared: dict[str, dict[str, Declared]] = {hook: {} for hook in _HOOKS}
        self._declared_cache: dict[str, list[Declared]] = {}
        self.queue_shares: dict[str, QueueShares] = {}  # plugin name -> its figures
        self._key_cache: dict[str, Callable[..., Any] | None] = {}
        self._explain_memo: dict[tuple[str, Resources, int], tuple[bool, str | None]] = {}
        self._enabled_cache: dict[str, list[Any]] = {}
        self._tiers_cache: dict[str, list[Any]] = {}
        self._state_only_cache: bool | None = None
        self.event_handlers: list[EventHandler] = []
        self.plugins: dict[str, Any] = {}
        # (task, node, future_only) -> device indices or None: a node-order plugin that scores
        # a node by the cards a pod would take (gpufrag) also says which cards; the first
        # answer wins, None falls back to the ledger's own choice (devices.py)
        self.gpu_pickers: list[Callable[[Task, Node, bool], tuple[int, ...] | None]] = []
        self.binds: list[Any] = []
        self.evictions: list[Any] = []
        self.pipelines: list[Any] = []
        # Bumped whenever resources are given back, so cached "fits nowhere" answers expire.
        self.capacity_epoch = 0
        # Bumped by every tentative operation: "nothing changed since" checks compare it.
        self.version = 0
        # Tasks some predicate judges by the pod itself (not only its scheduling signature):
        # no class shortcut or signature-keyed cache may answer for them.
        self.unique_predicates: set[str] = set()
        self.cycle_state = CycleState()
        self._build(snapshot)
        self.node_index = NodeIndex(self.node_list)
        for node in self.node_list:
            node.index = self.node_index

    # building -------------------------------------------------------------------------------
    def _build(self, snapshot: Snapshot) -> None:  # noqa: C901, PLR0912 - one pass over each kind of record
        self.nodes: dict[str, Node] = {}
        for info in sorted(snapshot.nodes, key=lambda n: natural_key(n.name)):
            allocatable = info.allocatable
            if PODS not in allocatable.explicit():
                allocatable = Resources({**allocatable.explicit(), PODS: DEFAULT_MAX_PODS})
                info = replace(info, allocatable=allocatable)
            shape = tuple(sorted(allocatable.explicit().items()))
            devices = node_devices(info)
            ledger = DeviceLedger(devices) if devices else None
            if ledger is not None:
                for index, milli, memory in info.gpus_used_by_others:
                    ledger.hold(GpuNeed(milli=milli, memory=memory), (index,))
            self.nodes[info.name] = Node(
                info,
                idle=allocatable.sub(info.used_by_others).clamp_non_negative(),
                used=info.used_by_others,
                labels=dict(info.labels),
                shape=shape,
                devices=ledger,
            )
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
        requests: dict[int, tuple[Resources, bool]] = {}
        interned: dict[Resources, tuple[Resources, bool]] = {}
        needs: dict[tuple[int, int], GpuNeed | None] = {}
        unassigned: list[Task] = []  # occupying pods holding GPUs on unnamed devices
        for jinfo in sorted(snapshot.jobs, key=lambda j: (j.created, j.namespace, j.name)):
            tasks: dict[str, Task] = {}
            infos = jinfo.tasks
            keyed: list[tuple[tuple[Any, ...] | None, TaskInfo]]
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
                        known = interned[resreq] = (resreq, resreq.is_empty())
                    requests[id(tinfo.requests)] = known
                task = tasks[tinfo.name] = Task(
                    tinfo, jinfo.name, known[0], tinfo.status, tinfo.node, sort_key, known[1]
                )
                if known[0].get(GPU) > 0 or tinfo.gpu_memory:
                    task.gpu = _need_of(needs, known[0], tinfo.gpu_memory)
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

    # registry ---------------------------------------------------------------------------------
    def add_fn(  # noqa: PLR0913 - one keyword per declaration, each checked against the hook
        self,
        hook: str,
        plugin: str,
        fn: Callable[..., Any],
        key: Callable[..., Any] | None = None,
        *,
        state_only: bool = False,
        reads_pods: bool = False,
        lasting: Callable[[Task, Node], FitError | None] | None = None,
        explain: Callable[[Queue, Task], str | None] | None = None,
        by_preemptor_job: bool = False,
        rescheduling: bool = False,
    ) -> None:
        """Register ``fn`` with what the plugin declares about it (``Declared``); an order hook
        may add ``key``, a sort key that orders exactly as ``fn`` compares (equal keys iff
        ``fn`` says 0), so sorting needs no compare calls."""
        given = {
            "state_only": state_only,
            "reads_pods": reads_pods,
            "lasting": lasting,
            "explain": explain,
            "by_preemptor_job": by_preemptor_job,
            "rescheduling": rescheduling,
        }
        for name, value in given.items():
            if value and hook not in _DECLARABLE[name]:
                hooks = ", ".join(_DECLARABLE[name])
                raise ValueError(f"{plugin}: {name} is declared on {hooks}, not {hook}")
        declared = Declared(
            state_only, reads_pods, lasting, explain, by_preemptor_job, rescheduling
        )
        self.fns[hook][plugin] = fn
        self.declared[hook][plugin] = declared
        if key is not None:
            self.keys[hook][plugin] = key
        elif hook in self.keys:
            self.keys[hook].pop(plugin, None)
        self._enabled_cache.pop(hook, None)
        self._declared_cache.pop(hook, None)
        self._tiers_cache.pop(hook, None)
        self._key_cache.pop(hook, None)
        self._state_only_cache = None

    def add_event_handler(self, handler: EventHandler) -> None:
        self.event_handlers.append(handler)

    def add_queue_shares(self, plugin: str, shares: QueueShares) -> None:
        """A quota plugin offers its per-queue figures (the first one registered answers)."""
        self.queue_shares[plugin] = shares

    def add_gpu_picker(self, picker: Callable[[Task, Node, bool], tuple[int, ...] | None]) -> None:
        """A plugin that chooses the cards a pod takes on a node (the first answer wins)."""
        self.gpu_pickers.append(picker)

    def _declarations(self, hook: str) -> list[Declared]:
        """What the enabled registrations of ``hook`` declare, in conf order."""
        cached = self._declared_cache.get(hook)
        if cached is None:
            declared = self.declared[hook]
            cached = self._declared_cache[hook] = [
                declared.get(name, _NOTHING_DECLARED) for _, name, _ in self._enabled(hook)
            ]
        return cached

    def _enabled(self, hook: str) -> list[tuple[int, str, Callable[..., Any]]]:
        """(tier index, plugin name, fn) for every enabled registration, in conf order."""
        cached = self._enabled_cache.get(hook)
        if cached is None:
            flag = _FLAG_OF.get(hook)
            registered = self.fns[hook]
            cached = [
                (t_index, option.name, registered[option.name])
                for t_index, tier in enumerate(self.conf.tiers)
                for option in tier
                if option.name in registered and not (flag and not option.enabled(flag))
            ]
            self._enabled_cache[hook] = cached
        return cached

    def _tiers(self, hook: str) -> list[list[Callable[..., Any]]]:
        cached = self._tiers_cache.get(hook)
        if cached is None:
            by_tier: dict[int, list[Callable[..., Any]]] = {}
            for t_index, _, fn in self._enabled(hook):
                by_tier.setdefault(t_index, []).append(fn)
            cached = self._tiers_cache[hook] = [by_tier[i] for i in sorted(by_tier)]
        return cached

    # order dispatchers -----------------------------------------------------------------------
    def job_compare(self, left: Job, right: Job) -> int:
        for _, _, fn in self._enabled("job_order"):
            result: int = fn(left, right)
            if result:
                return result
        lkey = (left.info.created, left.uid)
        rkey = (right.info.created, right.uid)
        return -1 if lkey < rkey else (1 if lkey > rkey else 0)

    def task_compare(self, left: Task, right: Task) -> int:
        for _, _, fn in self._enabled("task_order"):
            result: int = fn(left, right)
            if result:
                return result
        lkey = (-left.priority, left.sort_key)
        rkey = (-right.priority, right.sort_key)
        return -1 if lkey < rkey else (1 if lkey > rkey else 0)

    def queue_compare(self, left: Queue, right: Queue) -> int:
        for _, _, fn in self._enabled("queue_order"):
            result: int = fn(left, right)
            if result:
                return result
        return -1 if left.name < right.name else (1 if left.name > right.name else 0)

    # sort keys: the compare chains above as one tuple, when every enabled plugin gives a key.
    # A key is read once per item, so it is only valid while the items' state stays put: any
    # sort, and a heap whose members do not change while queued (allocate's queues and jobs).
    def _key_fn(self, hook: str, fallback: Callable[..., Any]) -> Callable[..., Any] | None:
        if hook in self._key_cache:
            return self._key_cache[hook]
        keys = self.keys[hook]
        enabled = self._enabled(hook)
        built = None
        if all(name in keys for _, name, _ in enabled):
            built = _chain_key(tuple(keys[name] for _, name, _ in enabled), fallback)

        self._key_cache[hook] = built
        return built

    def job_key_fn(self) -> Callable[..., Any] | None:
        return self._key_fn("job_order", lambda job: (job.info.created, job.uid))

    def task_key_fn(self) -> Callable[..., Any] | None:
        return self._key_fn("task_order", lambda task: (-task.priority, task.sort_key))

    def queue_key_fn(self) -> Callable[..., Any] | None:
        return self._key_fn("queue_order", lambda queue: queue.name)

    def sorted_jobs(self, jobs: list[Job]) -> list[Job]:
        if len(jobs) < 2:
            return list(jobs)
        return sorted(jobs, key=self.job_key_fn() or cmp_to_key(self.job_compare))

    def sorted_tasks(self, tasks: list[Task]) -> list[Task]:
        if len(tasks) < 2:  # most jobs have one pod: no key to build
            return list(tasks)
        return sorted(tasks, key=self.task_key_fn() or cmp_to_key(self.task_compare))

    def victim_order(self, victims: list[Task], preemptor: Task | None = None) -> list[Task]:
        """Volcano BuildVictimsPriorityQueue: least important victim first.

        With a preemptor, victims of different queues go by VictimQueueOrderFn: a plugin's
        answer (capacity's hierarchy, ``_victim_order_by_queue``) or else the reverse queue
        order, so the queue the queue order would serve last gives up its pods first (lower
        queue priority, then the larger share) (volcano-sh/volcano
        pkg/scheduler/framework/session_plugins.go BuildVictimsPriorityQueue and
        VictimQueueOrderFn). Within a queue: reverse job order, then reverse task order.
        """
        if len(victims) < 2:
            return list(victims)
        if preemptor is not None and self.fns["victim_queue_order"]:
            return self._victim_order_by_queue(victims, preemptor)
        if preemptor is not None:
            by_queue: dict[str, list[Task]] = {}
            for task in victims:
                by_queue.setdefault(self.jobs[task.job].queue, []).append(task)
            if len(by_queue) > 1:
                known = [self.queues[name] for name in by_queue if name in self.queues]
                served = sorted(known, key=self.queue_key_fn() or cmp_to_key(self.queue_compare))
                # Pods of a queue the session does not know go first: nothing would serve it.
                names = [name for name in sorted(by_queue) if name not in self.queues]
                names += [queue.name for queue in reversed(served)]
                return [task for name in names for task in self._victim_order(by_queue[name])]
        return self._victim_order(victims)

    def _victim_order(self, victims: list[Task]) -> list[Task]:
        if len(victims) < 2:
            return list(victims)
        job_key, task_key = self.job_key_fn(), self.task_key_fn()
        if job_key is not None and task_key is not None:
            # The compare below, as keys: jobs in reverse job order, a job's own tasks in
            # reverse task order (keys are unique, so reversing keeps nothing to tie-break).
            by_job: dict[str, Any] = {}

            def key(task: Task) -> tuple[Any, ...]:
                found = by_job.get(task.job)
                if found is None:
                    found = by_job[task.job] = job_key(self.jobs[task.job])
                return (found, task_key(task))

            return sorted(victims, key=key, reverse=True)

        def compare(left: Task, right: Task) -> int:
            if left.job == right.job:
                return -self.task_compare(left, right)
            return -self.job_compare(self.jobs[left.job], self.jobs[right.job])

        return sorted(victims, key=cmp_to_key(compare))

    def _victim_order_by_queue(self, victims: list[Task], preemptor: Task) -> list[Task]:
        """BuildVictimsPriorityQueue when a plugin orders victim queues (capacity's hierarchy):
        victims of two queues go by VictimQueueOrderFn, which falls back to the reverse queue
        order; victims of one queue by job then task order, least important first."""
        mine = self.queues.get(self.jobs[preemptor.job].queue)

        def queue_compare(left: Queue, right: Queue) -> int:
            for _, _, fn in self._enabled("victim_queue_order"):
                result: int = fn(left, right, mine)
                if result:
                    return result
            return -self.queue_compare(left, right)

        def compare(left: Task, right: Task) -> int:
            if left.job == right.job:
                return -self.task_compare(left, right)
            ljob, rjob = self.jobs[left.job], self.jobs[right.job]
            if ljob.queue != rjob.queue and mine is not None:
                return queue_compare(self.queues[ljob.queue], self.queues[rjob.queue])
            return -self.job_compare(ljob, rjob) or -self.task_compare(left, right)

        return sorted(victims, key=cmp_to_key(compare))

    # predicate and scoring --------------------------------------------------------------------
    def predicate(self, task: Task, node: Node) -> FitError | None:
        for _, _, fn in self._enabled("predicate"):
            error: FitError | None = fn(task, node)
            if error is not None:
                return error
        return None

    def predicate_for_preempt(self, task: Task, node: Node) -> FitError | None:
        """Volcano's PredicateForPreemptAction (pkg/scheduler/framework/session.go): a node
        is out only when its failure is one no eviction resolves (selector, taints, affinity
        to nodes); a conflict with pods that may be evicted keeps it a candidate."""
        for _, _, fn in self._enabled("predicate"):
            error: FitError | None = fn(task, node)
            if error is not None and not error.resolvable:
                return error
        return None

    def node_scores(self, task: Task, nodes: list[Node]) -> list[tuple[float, Node]]:
        map_fns = [fn for _, _, fn in self._enabled("node_order")]
        batch_fns = [fn for _, _, fn in self._enabled("batch_node_order")]
        scores = {node.name: 0.0 for node in nodes}
        for fn in batch_fns:
            for name, score in fn(task, nodes).items():
                scores[name] += score
        if map_fns:
            state_only = self.scorers_state_only()
            by_state: dict[tuple[Any, ...], float] = {}
            for node in nodes:
                if state_only:
                    # Identical nodes in identical states score alike: score each state once.
                    key = node.state_key()
                    score = by_state.get(key)
                    if score is None:
                        score = by_state[key] = sum(fn(task, node) for fn in map_fns)
                else:
                    score = sum(fn(task, node) for fn in map_fns)
                scores[node.name] += score
        return [(scores[node.name], node) for node in nodes]

    def best_node(self, task: Task, nodes: list[Node]) -> Node | None:
        """Highest score; equal scores go to the first node in name order."""
        if not nodes:
            return None
        if len(nodes) == 1:
            return nodes[0]
        best, best_score = None, None
        for score, node in self.node_scores(task, nodes):
            if best_score is None or score > best_score + 1e-9:
                best, best_score = node, score
        return best

    def scorers_state_only(self) -> bool:
        """Does every enabled node-order scorer score a node by its ``state_key`` alone?"""
        cached = self._state_only_cache
        if cached is None:
            cached = self._state_only_cache = all(
                d.state_only for d in self._declarations("node_order")
            )
        return cached

    def map_score(self, task: Task, node: Node) -> float:
        """The sum of the enabled node-order scores (batch scores not included)."""
        score: float = sum(fn(task, node) for _, _, fn in self._enabled("node_order"))
        return score

    def keyed_batch_scorers(self) -> list[KeyedBatchScorer] | None:
        """The enabled batch scorers when every one is keyed (possibly none), else None."""
        fns = [fn for _, _, fn in self._enabled("batch_node_order")]
        keyed = [fn for fn in fns if isinstance(fn, KeyedBatchScorer)]
        return keyed if len(keyed) == len(fns) else None

    def predicates_read_pods(self) -> bool:
        """Does an enabled predicate look at pods on other nodes (``Declared.reads_pods``)?"""
        return any(d.reads_pods for d in self._declarations("predicate"))

    def predicate_signature(self, task: Task) -> tuple[Any, ...]:
        """Everything predicates look at besides the node (pod affinity makes it unique)."""
        info = task.info
        if info.affinity or info.name in self.unique_predicates:
            return (info.name,)
        if info.gpu_memory:
            # the device fit looks at it too (the request vector carries only its cost)
            return (info.node_selector, info.tolerations, info.gpu_memory)
        return (info.node_selector, info.tolerations)

    def explain_allocatable(self, queue: Queue, task: Task) -> str | None:
        """The quota sentence, or None when the quota is the whole cluster anyway.

        Memoised per (queue, request) until the session changes: a queue at its share fails
        every further job of the same shape, and the sentence costs several vector operations.
        """
        key = (queue.name, task.resreq, self.version)
        memo = self._explain_memo
        found = memo.get(key)
        if found is None:
            if len(memo) > 4096:
                memo.clear()
            found = memo[key] = self._explain_quota(queue, task)
        explained, text = found
        if explained:
            return text
        suffix = f" ({text})" if text else ""
        return f"queue {queue.name} has no room for {task.name}{suffix}"

    def _explain_quota(self, queue: Queue, task: Task) -> tuple[bool, str | None]:
        """(True, the plugin's sentence) or (False, the refusing plugin without one)."""
        enabled = self._enabled("allocatable")
        declared = self._declarations("allocatable")
        for (_, name, fn), declaration in zip(enabled, declared, strict=True):
            if not fn(queue, task):
                if declaration.explain is not None:
                    return True, declaration.explain(queue, task)
                return False, name
        # Asked after a gang's tentative pods were rolled back, the single pod may fit again:
        # the quota plugin's numbers still explain why the whole gang did not.
        for declaration in declared:
            if declaration.explain is not None:
                return True, declaration.explain(queue, task)
        return False, None

    # declared capabilities ----------------------------------------------------------------------
    def queue_share(self, queue: str) -> QueueAttr | None:
        """The queue's figures from the first quota plugin that has them, else None."""
        for shares in self.queue_shares.values():
            attr = shares.share(queue)
            if attr is not None:
                return attr
        return None

    def binding_quota(self, queue: str) -> tuple[QueueShares, QueueAttr] | None:
        """(quota plugin, the queue's figures) when that plugin's allocatable hook is enabled,
        so its numbers are what limit the queue; else None."""
        attr = self.queue_share(queue)
        if attr is None:
            return None
        for _, name, _ in self._enabled("allocatable"):
            shares = self.queue_shares.get(name)
            if shares is not None and shares.share(queue) is attr:
                return shares, attr
        return None

    def lasting_filter(self) -> Callable[[Task, Node], FitError | None] | None:
        """The enabled predicates' lasting parts (``Declared.lasting``) as one check, or None
        when no predicate declares one (then nothing but resources keeps a pod off a node)."""
        filters = [d.lasting for d in self._declarations("predicate") if d.lasting is not None]
        if not filters:
            return None
        if len(filters) == 1:
            return filters[0]

        def lasting(task: Task, node: Node) -> FitError | None:
            for check in filters:
                error = check(task, node)
                if error is not None:
                    return error
            return None

        return lasting

    def preemptable_by_preemptor_job(self) -> bool:
        """Does an enabled preemptable hook judge by the preemptor's job itself?"""
        return any(d.by_preemptor_job for d in self._declarations("preemptable"))

    def rescheduling_ran(self) -> bool:
        """Did a rescheduling pass register this session (it registers only when due)?"""
        return any(d.rescheduling for d in self.declared["victim_tasks"].values())

    def sorted_by_score(self, task: Task, nodes: list[Node]) -> list[Node]:
        scored = self.node_scores(task, nodes)
        return [node for _, node in sorted(scored, key=lambda sn: -sn[0])]

    # victim dispatchers -----------------------------------------------------------------------
    def _victims(self, hook: str, preemptor: Task, candidates: list[Task]) -> list[Task]:
        victims: list[Task] | None = None
        for tier in self._tiers(hook):
            victims = None
            initialised = False
            for fn in tier:
                chosen, vote = fn(preemptor, candidates)
                if vote == Vote.ABSTAIN:
                    continue
                if not chosen:
                    victims = None
                    break
                if not initialised:
                    victims, initialised = list(chosen), True
                else:
                    keep = {t.name for t in chosen}
                    kept: list[Task] = victims or []
                    victims = [t for t in kept if t.name in keep]
            if victims:
                return victims
        return victims or []

    def victim_tasks(self) -> Iterator[Task]:
        """Volcano's VictimTasks: every enabled plugin's victims, plugin by plugin (lazily:
        a plugin may look at the evictions made so far)."""
        for _, _, fn in self._enabled("victim_tasks"):
            yield from fn()

    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task]:
        return self._victims("preemptable", preemptor, candidates)

    def reclaimable(self, preemptor: Task, candidates: list[Task]) -> list[Task]:
        return self._victims("reclaimable", preemptor, candidates)

    # queue dispatchers ------------------------------------------------------------------------
    # Plain loops rather than any()/all() over generators in the dispatchers asked once per job
    # or task: the generator cost more than the plugins' own checks.
    def overused(self, queue: Queue) -> bool:
        for _, _, fn in self._enabled("overused"):  # noqa: SIM110
            if fn(queue):
                return True
        return False

    def allocatable(self, queue: Queue, task: Task) -> bool:
        for _, _, fn in self._enabled("allocatable"):  # noqa: SIM110
            if not fn(queue, task):
                return False
        return True

    def preemptive(self, queue: Queue, task: Task) -> bool:
        return all(fn(queue, task) for _, _, fn in self._enabled("preemptive"))

    # job dispatchers --------------------------------------------------------------------------
    def job_ready(self, job: Job) -> bool:
        for _, _, fn in self._enabled("job_ready"):  # noqa: SIM110
            if not fn(job):
                return False
        return True

    def job_pipelined(self, job: Job) -> bool:
        return self._tier_vote("job_pipelined", job)

    def job_valid(self, job: Job) -> str | None:
        """None when valid, else the reason."""
        for _, _, fn in self._enabled("job_valid"):
            reason: str | None = fn(job)
            if reason is not None:
                return reason
        return None

    def job_enqueueable(self, job: Job) -> bool:
        return self._tier_vote("job_enqueueable", job)

    def _tier_vote(self, hook: str, job: Job) -> bool:
        """Volcano's vote dispatch: any Reject refuses; the first tier with a Permit (and no
        Reject) allows; tiers that only abstain defer to the next; all abstaining allows."""
        for tier in self._tiers(hook):
            permitted = False
            for fn in tier:
                vote = fn(job)
                if vote < 0:
                    return False
                permitted = permitted or vote > 0
            if permitted:
                return True
        return True

    def job_enqueued(self, job: Job) -> None:
        for _, _, fn in self._enabled("job_enqueued"):
            fn(job)

    def job_starving(self, job: Job) -> bool:
        for tier in self._tiers("job_starving"):
            for fn in tier:  # noqa: SIM110
                if not fn(job):
                    return False
            return True
        return False

    # task state transitions (used by Statement) -----------------------------------------------
    def set_status(self, task: Task, status: TaskStatus) -> None:
        self.version += 1
        job = self.jobs[task.job]
        job.count_status(task.status, -1)
        job.count_status(status, 1)
        task.status = status

    def fire_allocate(self, task: Task) -> None:
        for handler in self.event_handlers:
            if handler.allocate:
                handler.allocate(task)

    def fire_deallocate(self, task: Task) -> None:
        for handler in self.event_handlers:
            if handler.deallocate:
                handler.deallocate(task)

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


def _chain_key(
    parts: tuple[Callable[..., Any], ...], fallback: Callable[..., Any]
) -> Callable[..., Any]:
    """One tuple of the parts' keys and the fallback's. Spelled out for the usual one to three
    plugins: a key is read for every job of a sort or a push, and the generic form's generator
    cost as much as the keys themselves."""
    if len(parts) == 1:
        (first,) = parts
        return lambda item: (first(item), fallback(item))
    if len(parts) == 2:
        first, second = parts
        return lambda item: (first(item), second(item), fallback(item))
    if len(parts) == 3:
        first, second, third = parts
        return lambda item: (first(item), second(item), third(item), fallback(item))
    return lambda item: (*(part(item) for part in parts), fallback(item))


def _need_of(
    memo: dict[tuple[int, int], GpuNeed | None], resreq: Resources, memory: int
) -> GpuNeed | None:
    """The device request of a pod, shared by every pod of its (interned) request."""
    key = (id(resreq), memory)
    if key not in memo:
        memo[key] = gpu_need(resreq.get(GPU), memory)
    return memo[key]
