"""Snapshot (input) and decision (output) types of the pure scheduling core.

Shapes follow volcano-sh/volcano pkg/scheduler/api (JobInfo, TaskInfo, NodeInfo, QueueInfo) and
api/types.go (TaskStatus, PodGroup phases). Everything here is frozen: a cycle never mutates
its snapshot; the session keeps its own mutable working copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from scheduler.core.resources import Resources


class TaskStatus(StrEnum):
    PENDING = "Pending"
    ALLOCATED = "Allocated"
    PIPELINED = "Pipelined"
    BINDING = "Binding"
    BOUND = "Bound"
    RUNNING = "Running"
    RELEASING = "Releasing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


# Statuses that hold node resources (volcano api.AllocatedStatus plus Releasing).
ALLOCATED_STATUSES = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING}
)
OCCUPYING_STATUSES = ALLOCATED_STATUSES | {TaskStatus.RELEASING}


class PodGroupPhase(StrEnum):
    PENDING = "Pending"
    INQUEUE = "Inqueue"
    RUNNING = "Running"


class Vote:
    """Volcano util.Permit / Abstain / Reject."""

    PERMIT = 1
    ABSTAIN = 0
    REJECT = -1


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One GPU card of a node: its device index (what the device plugin or the sharing stack
    names it by), its model, and its memory in bytes (0: unknown, so no GPU-memory request
    fits on it)."""

    index: int
    model: str = ""
    memory: int = 0


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    allocatable: Resources
    labels: tuple[tuple[str, str], ...] = ()
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    # The node's GPU cards. Empty: ``allocatable``'s whole GPU count, indices 0..n-1, no model
    # and unknown memory (what every node was before devices existed).
    gpus: tuple[GpuDevice, ...] = ()
    # What pods outside the snapshot (other schedulers' and workloads' pods, DaemonSets)
    # request here: counted as the node's used and not idle, like the other pods Volcano's
    # cache adds to NodeInfo.Used; allocatable, and so quota totals and "can never run"
    # verdicts, stay the node's own.
    used_by_others: Resources = field(default_factory=Resources)
    # Of those, what the cards other pods hold say: (card index, milli-GPU, bytes of memory),
    # booked on the node's device ledger as held, so shares go to the cards others left
    # (their sum is in ``used_by_others``'s gpu too). Others' whole cards of unknown index are
    # in the count only.
    gpus_used_by_others: tuple[tuple[int, int, int], ...] = ()

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """What a queue used over a past period: ``used`` in resource-seconds (``gpu: 3600`` is
    one GPU for an hour), ``at`` the period's middle on the snapshot's clock."""

    at: float
    used: Resources


@dataclass(frozen=True, slots=True)
class QueueInfo:
    name: str
    weight: int = 1
    guarantee: Resources = field(default_factory=Resources)
    capability: Resources = field(default_factory=Resources.unlimited)
    borrowing_limit: Resources = field(default_factory=Resources.unlimited)
    deserved: Resources | None = None  # capacity plugin's explicit share
    reclaimable: bool = True
    priority: int = 0
    state: str = "Open"
    parent: str | None = None
    annotations: tuple[tuple[str, str], ...] = ()
    usage: tuple[UsageRecord, ...] = ()  # past use, for the fairshare plugin
    # Seconds a pod of this queue runs before it may be a victim of preempt or reclaim (the
    # cdp plugin's cooldown; 0: none)
    min_runtime: float = 0.0

    @property
    def is_open(self) -> bool:
        return self.state == "Open"


@dataclass(frozen=True, slots=True)
class TaskInfo:
    name: str
    requests: Resources
    status: TaskStatus = TaskStatus.PENDING
    node: str | None = None
    priority: int = 1
    preemptable: bool = True
    preemption_policy: str = "PreemptLowerPriority"
    role: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    affinity: Any = None  # Kubernetes Affinity as plain data (dicts/lists)
    # GPU memory in bytes this pod needs on its one device (a shared GPU); its cost is already
    # in ``requests`` (``gpu`` = ceil(memory / device memory x 1000) milli-GPU, at least).
    gpu_memory: int = 0
    # The devices an occupying pod holds (indices on its node). Empty for an occupying pod
    # that asks for GPUs: the core gives it the lowest free devices at session open.
    gpu_indices: tuple[int, ...] = ()
    # Nodes whose kubelet refused this job's pod lately, each with the snapshot time (seconds
    # since 1970) until which the pod avoids it (the shell's backoff, portal.jobs.backoff).
    avoid_nodes: tuple[tuple[str, float], ...] = ()
    # When an occupying pod was bound to its node, on the snapshot's clock (None: not known):
    # what cdp measures a pod's run time from, as upstream does from its PodScheduled time.
    started: float | None = None


@dataclass(frozen=True, slots=True)
class JobInfo:
    name: str
    queue: str
    tasks: tuple[TaskInfo, ...] = ()
    priority: int = 0
    min_available: int | None = None  # None: every task
    created: float = 0
    namespace: str = "default"
    phase: PodGroupPhase | None = None  # None: derived (Running when pods run, else Pending)
    min_resources: Resources | None = None
    min_task_member: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Rescheduled:
    """A pod the rescheduling plugin moved off ``node`` at snapshot time ``at`` (history the
    adapter reads from its eviction records; the core keeps no memory between cycles)."""

    job: str
    task: str
    node: str
    at: float


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: tuple[NodeInfo, ...]
    queues: tuple[QueueInfo, ...]
    jobs: tuple[JobInfo, ...]
    now: float = 0.0
    # When the rescheduling plugin last ran (snapshot time), so it can honour its interval.
    last_rescheduling: float | None = None
    # Recent rescheduling evictions, for the plugin's loop guards (newest per task is enough).
    rescheduled: tuple[Rescheduled, ...] = ()
    # When running jobs are expected to end (job name, snapshot time), for pending reasons.
    expected_ends: tuple[tuple[str, float], ...] = ()


# decisions ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Bind:
    task: str
    job: str
    node: str
    gpus: tuple[int, ...] = ()  # device indices on ``node`` (empty: no GPU asked)


@dataclass(frozen=True, slots=True)
class Evict:
    task: str
    job: str
    node: str | None
    preemptor_task: str | None
    preemptor_job: str | None
    action: str  # preempt | reclaim | rescheduling
    reason: str
    gpus: tuple[int, ...] = ()  # the devices the victim held on ``node``


@dataclass(frozen=True, slots=True)
class Pipeline:
    task: str
    job: str
    node: str
    gpus: tuple[int, ...] = ()  # device indices on ``node`` (empty: no GPU asked)


@dataclass(frozen=True, slots=True)
class QueueShare:
    deserved: Resources
    allocated: Resources
    request: Resources
    guarantee: Resources
    capability: Resources


class PendingKind(StrEnum):
    """Whether a pending job can never run as submitted, or waits for something to change."""

    NEVER = "never"
    WAITS = "waits"


@dataclass(frozen=True, slots=True)
class WorkConservation:
    """The cycle's work-conservation check: what it left idle while work waited."""

    # GPUs idle at the end of the cycle on the nodes that take pods
    idle_gpus: float = 0.0
    # waiting jobs that would fit those GPUs now and are held back by a quota rule (their
    # reasons say which, and whether the conf lends idle capacity)
    held_with_idle_room: tuple[str, ...] = ()
    # jobs placed this cycle on idle capacity lent past their queue's share (lendIdle)
    lent: tuple[str, ...] = ()
    # jobs below their queue's share that the nodes hold back while another queue is above
    # its own and reclaim took nothing for them (their reasons say why)
    reclaim_waits: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CycleResult:
    binds: tuple[Bind, ...]
    evictions: tuple[Evict, ...]
    pipelined: tuple[Pipeline, ...]
    pending_reasons: dict[str, str]
    queues: dict[str, QueueShare]
    phases: dict[str, str]
    # PendingKind value per job of pending_reasons
    pending_kinds: dict[str, str] = field(default_factory=dict)
    # Whether the rescheduling plugin was due this cycle (the next snapshot's last_rescheduling)
    rescheduling_ran: bool = False
    # Per queue, the jobs that wait (kind "waits") in the configured job order, first first:
    # a job's position in its queue, and the count its reason gives of the jobs ahead of it
    queue_orders: dict[str, tuple[str, ...]] = field(default_factory=dict)
    work_conservation: WorkConservation = field(default_factory=WorkConservation)
