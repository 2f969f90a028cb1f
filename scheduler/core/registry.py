"""Where plugins register their hooks: one typed method per extension point.

The registration half of volcano-sh/volcano pkg/scheduler/framework/session_plugins.go
(``AddJobOrderFn(name, cf api.CompareFn)`` and its siblings): each method takes the callback
shape of its hook (``scheduler.core.hooks``) and only the declarations that hook has, so a
plugin registering the wrong shape or declaring something its hook has no use for fails mypy.
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler.core.config import SchedulerConf
from scheduler.core.hooks import (
    BatchNodeOrderFn,
    CompareFn,
    Declared,
    EventHandler,
    EvictableFn,
    ExplainFn,
    GpuPickerFn,
    Hook,
    JobEventFn,
    JobValidFn,
    NodeOrderFn,
    OrderHook,
    PredicateFn,
    QueueRequestFn,
    QueueShares,
    QueueTaskValidateFn,
    QueueValidateFn,
    SortKeyFn,
    ValidateFn,
    VictimQueueOrderFn,
    VictimTasksFn,
    VoteFn,
)
from scheduler.core.state import Job, Queue, Task


def _job_fallback(job: Job) -> tuple[float, str]:
    """Volcano's job order tie-break: creation time, then a stable id."""
    return (job.info.created, job.uid)


def _task_fallback(task: Task) -> tuple[int, tuple[object, ...]]:
    return (-task.priority, task.sort_key)


def _queue_fallback(queue: Queue) -> str:
    return queue.name


class HookRegistry:
    """Every extension point of a session (``*_fns``) and the methods that fill them. Each
    hook is switched by its Volcano enable flag (``enableJobOrder`` ...), where it has one."""

    def __init__(self, conf: SchedulerConf) -> None:
        tiers = conf.tiers
        self.job_order_fns = OrderHook(tiers, "enableJobOrder", _job_fallback)
        self.task_order_fns = OrderHook(tiers, "enableTaskOrder", _task_fallback)
        self.queue_order_fns = OrderHook(tiers, "enableQueueOrder", _queue_fallback)
        self.victim_queue_order_fns: Hook[VictimQueueOrderFn] = Hook(tiers, None)
        self.predicate_fns: Hook[PredicateFn] = Hook(tiers, "enablePredicate")
        self.node_order_fns: Hook[NodeOrderFn] = Hook(tiers, "enableNodeOrder")
        self.batch_node_order_fns: Hook[BatchNodeOrderFn] = Hook(tiers, "enableNodeOrder")
        self.preemptable_fns: Hook[EvictableFn] = Hook(tiers, "enablePreemptable")
        self.reclaimable_fns: Hook[EvictableFn] = Hook(tiers, "enableReclaimable")
        self.overused_fns: Hook[QueueValidateFn] = Hook(tiers, "enabledOverused")
        self.allocatable_fns: Hook[QueueTaskValidateFn] = Hook(tiers, "enabledAllocatable")
        self.preemptive_fns: Hook[QueueTaskValidateFn] = Hook(tiers, "enablePreemptive")
        self.job_ready_fns: Hook[ValidateFn] = Hook(tiers, "enableJobReady")
        self.job_pipelined_fns: Hook[VoteFn] = Hook(tiers, "enableJobPipelined")
        self.job_valid_fns: Hook[JobValidFn] = Hook(tiers, None)
        self.job_enqueueable_fns: Hook[VoteFn] = Hook(tiers, "enableJobEnqueued")
        self.job_enqueued_fns: Hook[JobEventFn] = Hook(tiers, "enableJobEnqueued")
        self.job_starving_fns: Hook[ValidateFn] = Hook(tiers, "enableJobStarving")
        self.victim_tasks_fns: Hook[VictimTasksFn] = Hook(tiers, "enableVictim")
        self.event_handlers: list[EventHandler] = []
        self.queue_shares: dict[str, QueueShares] = {}  # plugin name -> its figures
        # The first answer wins; None falls back to the ledger's own choice (devices.py).
        self.gpu_pickers: list[GpuPickerFn] = []
        # Run once every plugin has opened, in the order registered (``add_open_step``).
        self.open_steps: list[Callable[[], None]] = []
        self._state_only: bool | None = None  # every enabled node-order fn is state-only

    # order --------------------------------------------------------------------------------
    def add_job_order_fn(
        self, plugin: str, fn: CompareFn[Job], key: SortKeyFn[Job] | None = None
    ) -> None:
        """``key``, when given, orders exactly as ``fn`` compares (equal keys iff it says 0),
        so sorting needs no compare calls; likewise for tasks and queues."""
        self.job_order_fns.add_keyed(plugin, fn, key)

    def add_task_order_fn(
        self, plugin: str, fn: CompareFn[Task], key: SortKeyFn[Task] | None = None
    ) -> None:
        self.task_order_fns.add_keyed(plugin, fn, key)

    def add_queue_order_fn(
        self, plugin: str, fn: CompareFn[Queue], key: SortKeyFn[Queue] | None = None
    ) -> None:
        self.queue_order_fns.add_keyed(plugin, fn, key)

    def add_victim_queue_order_fn(self, plugin: str, fn: VictimQueueOrderFn) -> None:
        self.victim_queue_order_fns.add(plugin, fn)

    # nodes --------------------------------------------------------------------------------
    def add_predicate_fn(
        self,
        plugin: str,
        fn: PredicateFn,
        *,
        reads_pods: bool = False,
        lasting: PredicateFn | None = None,
    ) -> None:
        """``reads_pods``: the answer looks at pods on other nodes; ``lasting``: the part of
        the check no eviction resolves (``Declared``)."""
        self.predicate_fns.add(plugin, fn, Declared(reads_pods=reads_pods, lasting=lasting))

    def add_node_order_fn(self, plugin: str, fn: NodeOrderFn, *, state_only: bool = False) -> None:
        """``state_only``: the score depends only on the node's ``state_key`` and the task."""
        self.node_order_fns.add(plugin, fn, Declared(state_only=state_only))
        self._state_only = None

    def add_batch_node_order_fn(self, plugin: str, fn: BatchNodeOrderFn) -> None:
        self.batch_node_order_fns.add(plugin, fn)

    def add_gpu_picker(self, picker: GpuPickerFn) -> None:
        """A plugin that chooses the cards a pod takes on a node (the first answer wins)."""
        self.gpu_pickers.append(picker)

    # victims ------------------------------------------------------------------------------
    def add_preemptable_fn(
        self, plugin: str, fn: EvictableFn, *, by_preemptor_job: bool = False, guards: bool = False
    ) -> None:
        """``by_preemptor_job``: the verdict depends on the preemptor's job itself;
        ``guards``: the pods ``fn`` leaves out are never victims, whatever the tiers say."""
        declared = Declared(by_preemptor_job=by_preemptor_job, guards=guards)
        self.preemptable_fns.add(plugin, fn, declared)

    def add_reclaimable_fn(self, plugin: str, fn: EvictableFn, *, guards: bool = False) -> None:
        """``guards``: as for add_preemptable_fn."""
        self.reclaimable_fns.add(plugin, fn, Declared(guards=guards))

    def add_victim_tasks_fn(
        self, plugin: str, fn: VictimTasksFn, *, rescheduling: bool = False
    ) -> None:
        """``rescheduling``: the hook is the periodic rescheduling pass."""
        self.victim_tasks_fns.add(plugin, fn, Declared(rescheduling=rescheduling))

    # queues -------------------------------------------------------------------------------
    def add_overused_fn(self, plugin: str, fn: QueueValidateFn) -> None:
        self.overused_fns.add(plugin, fn)

    def add_allocatable_fn(
        self,
        plugin: str,
        fn: QueueTaskValidateFn,
        *,
        explain: ExplainFn | None = None,
        within_limits: QueueRequestFn | None = None,
        lends: bool = False,
    ) -> None:
        """``explain``: the sentence saying why the queue refused the task. ``within_limits``:
        may the queue grow by a request within its hard limits, past its share; with
        ``lends`` allocate lends idle capacity up to them (``Session.lendable``)."""
        self.allocatable_fns.add(
            plugin, fn, Declared(explain=explain, within_limits=within_limits, lends=lends)
        )

    def add_preemptive_fn(self, plugin: str, fn: QueueTaskValidateFn) -> None:
        self.preemptive_fns.add(plugin, fn)

    def add_open_step(self, step: Callable[[], None]) -> None:
        """Work a plugin finishes once every plugin has opened: what reads other plugins'
        hooks (a quota plugin's demand leaves out jobs that can never run, which the
        predicates registered later decide)."""
        self.open_steps.append(step)

    def add_queue_shares(self, plugin: str, shares: QueueShares) -> None:
        """A quota plugin offers its per-queue figures (the first one registered answers)."""
        self.queue_shares[plugin] = shares

    # jobs ---------------------------------------------------------------------------------
    def add_job_valid_fn(self, plugin: str, fn: JobValidFn) -> None:
        self.job_valid_fns.add(plugin, fn)

    def add_job_ready_fn(self, plugin: str, fn: ValidateFn) -> None:
        self.job_ready_fns.add(plugin, fn)

    def add_job_pipelined_fn(self, plugin: str, fn: VoteFn) -> None:
        self.job_pipelined_fns.add(plugin, fn)

    def add_job_enqueueable_fn(self, plugin: str, fn: VoteFn) -> None:
        self.job_enqueueable_fns.add(plugin, fn)

    def add_job_enqueued_fn(self, plugin: str, fn: JobEventFn) -> None:
        self.job_enqueued_fns.add(plugin, fn)

    def add_job_starving_fn(self, plugin: str, fn: ValidateFn) -> None:
        self.job_starving_fns.add(plugin, fn)

    def add_event_handler(self, handler: EventHandler) -> None:
        self.event_handlers.append(handler)
