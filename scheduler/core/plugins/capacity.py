"""capacity: explicit per-queue deserved, elastic up to capability, optional hierarchy.

Source: volcano-sh/volcano pkg/scheduler/plugins/capacity/capacity.go (the 2026 version with
isImmediateVictim/checkDeservedExceedance). A queue's real capability is its capability bounded
by the cluster minus other queues' guarantees; deserved is the stated ``deserved`` (cpu and
memory always, other resources only where stated) bounded by that and floored at the
guarantee. Allocation is checked against the real capability (and, with ``enableHierarchy``,
every ancestor's); a queue may reclaim while under deserved on some resource it asks for;
victims come from queues above deserved on a resource the victim uses and the share states, or
whose share states none of the resources the victim uses, never below their guarantee; a
closed queue admits, allocates and reclaims nothing. Capacity
registers no Overused hook, as upstream. Our departure (docs/design/scheduling-guarantees.md):
``excludeNeverRunnable`` (default true) leaves jobs that can never run as submitted out of the
request a queue reports; upstream's request decides nothing here either. With ``enableHierarchy`` the upstream hierarchical
mode runs instead (scheduler/core/plugins/_capacity_tree.py), ``ancestorReclaimLevel``
included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scheduler.core.hooks import EventHandler
from scheduler.core.plugins._quota import (
    QueueAttr,
    account_job,
    admission_shortfall,
    cluster_total,
    demand_exclusions,
    exclude_never_runnable,
    new_attr,
)
from scheduler.core.reasons import capability_text, describe, first_short_dimension
from scheduler.core.resources import (
    CPU,
    GPU,
    GPU_TOLERANCE,
    MEMORY,
    MIN_RESOURCE,
    PODS,
    Resources,
    le_named,
)
from scheduler.core.session import Session
from scheduler.core.state import Job, Queue, Task
from scheduler.core.types import Vote

if TYPE_CHECKING:
    from scheduler.core.plugins._capacity_tree import CapacityTree

PLUGIN_NAME = "capacity"


def build(arguments: dict[str, Any]) -> CapacityPlugin:
    exclude_never_runnable(arguments)  # refused here, by name, when it is not true or false
    return CapacityPlugin(arguments)


class CapacityPlugin:
    name = PLUGIN_NAME

    def __init__(self, arguments: dict[str, Any] | None = None):
        self.arguments = arguments or {}
        self.tree: CapacityTree | None = None

    # QueueShares: a queue may lend up to its real capability; its tree passes capabilities
    # down, it does not divide shares by weight
    binds_deserved = False
    divides_tree = False

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        ssn.add_queue_shares(self.name, self)
        option = ssn.conf.plugin(self.name)
        if option is not None and option.enabled("enableHierarchy"):
            from scheduler.core.plugins._capacity_tree import CapacityTree

            self.tree = CapacityTree(ssn, self.name, self.arguments)
            self.tree.register()
            return
        self.cluster = cluster_total(ssn)
        guarantees = Resources()
        for queue in ssn.queues.values():
            guarantees = guarantees.add(queue.info.guarantee)
        self.attrs: dict[str, QueueAttr] = {name: new_attr(q) for name, q in ssn.queues.items()}
        ssn.add_open_step(self._settle)
        for attr in self.attrs.values():
            real = self.cluster.exceeded_part(guarantees).add(attr.guarantee)
            attr.real_capability = real.min_dimension(attr.capability)
            stated = attr.queue.info.deserved or Resources()
            attr.deserved = deserved_share(stated, attr.real_capability, attr.guarantee)

        ssn.add_queue_order_fn(self.name, self.queue_order)
        # Its allocatable check is the real capability, a hard limit: what it refuses is
        # never held back by a share alone (the work-conservation note says so).
        ssn.add_allocatable_fn(
            self.name, self.allocatable, explain=self.explain, within_limits=self.within_limits
        )
        ssn.add_preemptive_fn(self.name, self.preemptive)
        ssn.add_reclaimable_fn(self.name, self.reclaimable)
        ssn.add_job_enqueueable_fn(self.name, self.enqueueable)
        ssn.add_job_enqueued_fn(self.name, self.enqueued)
        ssn.add_event_handler(EventHandler(self._on_allocate, self._on_deallocate))

    def _settle(self) -> None:
        """The queues' figures once every plugin has opened. The request decides nothing here
        (deserved shares are stated); it is what the queue reports, without the jobs that can
        never run unless ``excludeNeverRunnable`` is false."""
        ssn = self.ssn
        left_out = demand_exclusions(ssn, exclude_never_runnable(self.arguments))
        for job in ssn.jobs.values():
            attr = self.attrs.get(job.queue)
            if attr is not None:
                account_job(attr, job, demand=job.name not in left_out)
        for attr in self.attrs.values():
            attr.update_share()

    # hooks --------------------------------------------------------------------------------------
    def queue_order(self, left: Queue, right: Queue) -> int:
        lp, rp = left.info.priority, right.info.priority
        if lp != rp:
            return -1 if lp > rp else 1
        ls, rs = self.attrs[left.name].share, self.attrs[right.name].share
        return -1 if ls < rs else (1 if ls > rs else 0)

    def allocatable(self, queue: Queue, task: Task) -> bool:
        return self.within_limits(queue, task.resreq)

    def within_limits(self, queue: Queue, request: Resources) -> bool:
        if not queue.info.is_open:
            return False
        attr = self.attrs[queue.name]
        future = attr.allocated.add(request)
        return future.less_equal_with_dimension(attr.real_capability, request)

    def preemptive(self, queue: Queue, task: Task) -> bool:
        """Open, within the real capability, and under deserved on some requested resource."""
        if not queue.info.is_open:
            return False
        attr = self.attrs[queue.name]
        future = attr.allocated.add(task.resreq)
        if not future.less_equal_with_dimension(attr.real_capability, task.resreq):
            return False
        return any(
            le_named(name, future.get(name), attr.deserved.get(name))
            for name in _relevant(task.resreq)
        )

    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> tuple[list[Task], int]:
        """Victims that use something the reclaimer asks for, from queues that keep their
        guarantee without them and either are above their deserved share on a resource the
        victim uses and the share states (checkDeservedExceedance), or state a share of
        nothing the victim uses (isImmediateVictim)."""
        victims: list[Task] = []
        allocations: dict[str, Resources] = {}
        wanted = set(_relevant(reclaimer.resreq))
        for task in candidates:
            if wanted.isdisjoint(_relevant(task.resreq)):
                continue  # shouldSkipReclaimee: it frees nothing the reclaimer asks for
            queue_name = self.ssn.jobs[task.job].queue
            attr = self.attrs.get(queue_name)
            if attr is None:
                continue
            allocated = allocations.get(queue_name, attr.allocated)
            remaining = allocated.sub(task.resreq)
            if not attr.guarantee.less_equal(remaining, missing=0):
                continue
            if _names(task.resreq) & _names(attr.deserved) and not _exceeds_deserved(
                allocated, attr.deserved, task.resreq
            ):
                continue
            allocations[queue_name] = remaining
            victims.append(task)
        return victims, Vote.PERMIT

    def enqueueable(self, job: Job) -> int:
        queue = self.ssn.queues[job.queue]
        if not queue.info.is_open:
            job.reason = f"queue {queue.name} is closed"
            return Vote.REJECT
        if job.info.min_resources is None:
            return Vote.PERMIT
        attr = self.attrs[job.queue]
        minimum = job.info.min_resources
        shortfall = admission_shortfall(attr, minimum)
        if shortfall is None:
            return Vote.PERMIT
        short = shortfall[0]
        job.reason = (
            f"queue {queue.name} cannot admit the job: its minimum of "
            f"{describe(short, minimum.get(short))} would exceed the queue's capability of "
            f"{describe(short, attr.real_capability.get(short))}"
        )
        return Vote.REJECT

    def enqueued(self, job: Job) -> None:
        if job.info.min_resources is not None:
            attr = self.attrs[job.queue]
            attr.inqueue = attr.inqueue.add(job.info.min_resources)

    # events -------------------------------------------------------------------------------------
    def _on_allocate(self, task: Task) -> None:
        attr = self.attrs.get(self.ssn.jobs[task.job].queue)
        if attr is not None:
            attr.allocated = attr.allocated.add(task.resreq)
            attr.update_share()

    def _on_deallocate(self, task: Task) -> None:
        attr = self.attrs.get(self.ssn.jobs[task.job].queue)
        if attr is not None:
            attr.allocated = attr.allocated.sub(task.resreq)
            attr.update_share()

    def explain(self, queue: Queue, task: Task) -> str:
        if self.tree is not None:
            return self.tree.explain(queue, task)
        if not queue.info.is_open:
            return f"queue {queue.name} is closed"
        attr = self.attrs[queue.name]
        future = attr.allocated.add(task.resreq)
        name = first_short_dimension(future, attr.real_capability, task.resreq) or "gpu"
        allocated, capability = attr.allocated.get(name), attr.real_capability.get(name)
        return f"queue {queue.name} {capability_text(name, allocated, capability)}"

    def share(self, queue_name: str) -> QueueAttr | None:
        if self.tree is not None:
            return self.tree.share(queue_name)
        return self.attrs.get(queue_name)


def deserved_share(stated: Resources, real: Resources, guarantee: Resources) -> Resources:
    """buildQueueAttrs: the queue's stated deserved share, cpu and memory always (0 when not
    stated) and other resources only where stated (MinDimensionResource with Infinity leaves the
    others out rather than unlimited), each within the real capability where that names it,
    then at least the guarantee."""
    capped = real.explicit()
    values = {CPU: stated.get(CPU), MEMORY: stated.get(MEMORY), **stated.explicit()}
    for name, value in values.items():
        if name in (CPU, MEMORY) or name in capped:
            values[name] = min(value, real.get(name))
    return Resources(values).max_dimension(guarantee)


def _relevant(res: Resources) -> list[str]:
    """Resources a request actually asks for (the implicit pod slot does not count)."""
    return [name for name in res.names() if name != PODS and res.get(name) > 0]


def _names(res: Resources) -> set[str]:
    """Volcano ResourceNames: the names at or above minResource (the pod slot included)."""
    return {
        name
        for name, value in res.explicit_items()
        if value >= (GPU_TOLERANCE if name == GPU else MIN_RESOURCE)
    }


def _exceeds_deserved(allocated: Resources, deserved: Resources, request: Resources) -> bool:
    """GreaterPartlyWithRelevantDimensions: above the deserved share on a resource the request
    asks for and the share states (cpu and memory: at least minResource; another resource:
    named at all, even at 0); the pod slot never counts."""
    stated = deserved.explicit()
    for name, value in request.explicit_items():
        if value <= 0 or name == PODS:
            continue
        if name in (CPU, MEMORY):
            if deserved.get(name) < MIN_RESOURCE:
                continue
        elif name not in stated:
            continue
        if not le_named(name, allocated.get(name), deserved.get(name)):
            return True
    return False
