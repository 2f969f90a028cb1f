"""proportion: weighted water-filling of the cluster into per-queue deserved shares.

Source: volcano-sh/volcano pkg/scheduler/plugins/proportion/proportion.go. Each round splits
what is left by weight among queues whose request is not yet met; a queue's deserved is capped
by its real capability (capability, and cluster minus others' guarantees) and its request, and
floored at its guarantee; rounds repeat until nothing changes. Reclaim takes pods from queues
above their deserved share, whatever the reclaimer asks for (upstream's reclaimable since
commit 975277f55).

Our rule (DESIGN.md, a guarantee is a floor never reclaimed below): a victim's queue must keep
its guarantee without it. Upstream's proportion has no such test (its capacity plugin has).

Our extension (DESIGN.md, Kueue's borrowing limit): a queue with ``borrowing_limit`` is also
capped at nominal + borrowing_limit, where nominal = cluster * weight / (sum of weights of open
queues), or its guarantee if larger. Names the limit leaves out are unlimited.

Our departure (docs/design/scheduling-guarantees.md), argument ``excludeNeverRunnable``
(default true): a job that can never run as submitted adds nothing to its queue's request, so
the share it could never use goes to queues that can (upstream adds every pending task).

Our extension (same record), argument ``lendIdle`` (default false, upstream; true in the seed
conf): idle capacity no job within its share can use is lent to jobs their share alone holds
back, within the queue's real capability (``within_limits``; the lending is allocate's
``lend_idle``); a lent pod leaves its queue above its share, where reclaim finds it.

Our departure (docs/design/hierarchical-proportion.md): with ``enableHierarchy: true`` and a
queue tree (``parent``), weights divide each parent's deserved share among its children
(scheduler/core/plugins/_proportion_tree.py). Upstream's proportion ignores the flag and stays
flat; so does this one when no queue names a parent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scheduler.core.config import bool_arg
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
from scheduler.core.resources import INFINITY, Resources, le_named, tolerance
from scheduler.core.session import Session
from scheduler.core.state import Job, Queue, Task
from scheduler.core.types import QueueInfo, Vote

if TYPE_CHECKING:
    from scheduler.core.plugins._proportion_tree import ProportionTree

PLUGIN_NAME = "proportion"


LEND_IDLE = "lendIdle"


def build(arguments: dict[str, Any]) -> ProportionPlugin:
    return ProportionPlugin(
        exclude_never=exclude_never_runnable(arguments),
        lend_idle=bool_arg(arguments, LEND_IDLE, False),
    )


def nominal_share(attr: QueueAttr, parent: Resources, open_weight: int) -> Resources:
    """Its parent's share (the cluster, for a top-level queue) times its weight over the weights
    of its open siblings, or its guarantee if larger."""
    ratio = attr.weight / open_weight if open_weight else 0.0
    return parent.multi(ratio).max_dimension(attr.guarantee)


def borrowing_cap(attr: QueueAttr, nominal: Resources) -> Resources | None:
    """nominal + borrowing_limit on the names the limit states; None without a limit."""
    limit = attr.queue.info.borrowing_limit
    if not limit.explicit():
        return None
    values = {name: nominal.get(name) + value for name, value in limit.explicit().items()}
    return Resources(values, default=INFINITY)


def water_fill(attrs: list[QueueAttr], cluster: Resources) -> None:
    """Volcano's deserved loop; ``attrs`` must come in a stable order."""
    remaining = cluster
    met: set[str] = set()
    while True:
        weight_sum = sum(a.weight for a in attrs if a.queue.name not in met)
        if weight_sum == 0:
            break
        before = remaining
        increased, decreased = Resources(), Resources()
        for attr in attrs:
            if attr.queue.name in met:
                continue
            old = attr.deserved
            deserved = old.add(remaining.multi(attr.weight / weight_sum))
            deserved = deserved.min_dimension(attr.real_capability)
            deserved = deserved.min_dimension(Resources(attr.request.explicit()))
            deserved = deserved.max_dimension(attr.guarantee)
            attr.deserved = deserved
            attr.update_share()
            # Met when the request is covered, or when the queue took nothing of its share:
            # caps and requests are fixed and what remains only shrinks, so it never will.
            # Without the second test a capped heavy queue keeps its weight in every round
            # and a light one creeps up by 1/(sum of weights) per round (~290k rounds).
            if attr.request.less_equal(deserved, missing=0) or deserved == old:
                met.add(attr.queue.name)
            delta = deserved.sub(old)
            increased = increased.add(delta.clamp_non_negative())
            decreased = decreased.add(delta.multi(-1).clamp_non_negative())
        remaining = remaining.sub(increased).add(decreased)
        if remaining.is_empty() or remaining == before:
            break


class ProportionPlugin:
    name = PLUGIN_NAME

    def __init__(self, *, exclude_never: bool = True, lend_idle: bool = False) -> None:
        self.exclude_never = exclude_never
        self.lend_idle = lend_idle

    # QueueShares: a queue is held to its deserved share
    binds_deserved = True

    @property
    def divides_tree(self) -> bool:
        return self.tree is not None

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.tree: ProportionTree | None = None
        ssn.add_queue_shares(self.name, self)
        option = ssn.conf.plugin(self.name)
        if (
            option is not None
            and option.enabled("enableHierarchy")
            and any(queue.info.parent for queue in ssn.queues.values())
        ):
            # Our departure from upstream: weights divide each parent's share (see the module).
            from scheduler.core.plugins._proportion_tree import ProportionTree

            self.tree = ProportionTree(ssn, self.name, self.exclude_never)
            self.tree.register(self.lend_idle)
            return
        self.cluster = cluster_total(ssn)
        guarantees = Resources()
        for queue in ssn.queues.values():
            guarantees = guarantees.add(queue.info.guarantee)
        open_weight = sum(q.info.weight for q in ssn.queues.values() if q.info.is_open)
        self.attrs: dict[str, QueueAttr] = {}
        self.caps: dict[str, Resources | None] = {}  # queue -> its borrowing cap
        # queue -> (the allocation and deserved share it was asked at, may it give pods up)
        self._give_memo: dict[str, tuple[Resources, Resources, bool]] = {}
        for job in ssn.jobs.values():
            job_queue = ssn.queues.get(job.queue)
            if job_queue is not None and job_queue.name not in self.attrs:
                self.attrs[job_queue.name] = new_attr(job_queue)
        for attr in self.attrs.values():
            real = self.cluster.exceeded_part(guarantees).add(attr.guarantee)
            real = real.min_dimension(attr.capability)
            cap = borrowing_cap(attr, nominal_share(attr, self.cluster, open_weight))
            self.caps[attr.queue.name] = cap
            if cap is not None:
                real = real.min_dimension(cap)
            attr.real_capability = real
        # Demand, and so the shares, once every plugin has opened: the jobs left out of it are
        # judged with every predicate registered.
        ssn.add_open_step(self._settle)

        ssn.add_queue_order_fn(self.name, self.queue_order, key=self.queue_key)
        ssn.add_overused_fn(self.name, self.overused)
        ssn.add_allocatable_fn(
            self.name,
            self.allocatable,
            explain=self.explain,
            within_limits=self.within_limits,
            lends=self.lend_idle,
        )
        ssn.add_preemptive_fn(self.name, self.allocatable)
        ssn.add_reclaimable_fn(self.name, self.reclaimable)
        ssn.add_job_enqueueable_fn(self.name, self.enqueueable)
        ssn.add_job_enqueued_fn(self.name, self.enqueued)
        ssn.add_event_handler(EventHandler(self._on_allocate, self._on_deallocate))

    def _settle(self) -> None:
        """Requests (without the jobs that can never run, by default), then the shares."""
        ssn = self.ssn
        left_out = demand_exclusions(ssn, self.exclude_never)
        for job in ssn.jobs.values():
            attr = self.attrs.get(job.queue)
            if attr is not None:
                account_job(attr, job, demand=job.name not in left_out)
        water_fill([self.attrs[name] for name in sorted(self.attrs)], self.cluster)

    # hooks --------------------------------------------------------------------------------------
    def queue_order(self, left: Queue, right: Queue) -> int:
        lp, rp = left.info.priority, right.info.priority
        if lp != rp:
            return -1 if lp > rp else 1
        la, ra = self.attrs.get(left.name), self.attrs.get(right.name)
        ls = la.share if la else 0.0
        rs = ra.share if ra else 0.0
        return -1 if ls < rs else (1 if ls > rs else 0)

    def queue_key(self, queue: Queue) -> tuple[object, ...]:
        """Sorts like ``queue_order``: higher priority first, then the smaller share."""
        attr = self.attrs.get(queue.name)
        return (-queue.info.priority, attr.share if attr else 0.0)

    def overused(self, queue: Queue) -> bool:
        attr = self.attrs.get(queue.name)
        return attr is not None and attr.deserved.less_equal(attr.allocated)

    def allocatable(self, queue: Queue, task: Task) -> bool:
        if not queue.info.is_open:
            return False  # upstream queueAllocatable: a queue that is not Open takes nothing
        attr = self.attrs.get(queue.name)
        if attr is None:
            return True
        # allocated.add(resreq).less_equal_with_dimension(deserved, resreq), without the vector.
        allocated, deserved = attr.allocated, attr.deserved
        for name, value in task.resreq.explicit_items():
            if value <= 0:
                continue
            if not le_named(name, allocated.get(name) + value, deserved.get(name)):
                return False
        return True

    def within_limits(self, queue: Queue, request: Resources) -> bool:
        """May the queue grow by ``request`` within its hard limits, its share aside: the real
        capability (capability, borrowing cap, the cluster less other queues' guarantees).
        What ``lendIdle`` lends up to."""
        if not queue.info.is_open:
            return False
        attr = self.attrs.get(queue.name)
        return attr is None or _within(attr.allocated, request, attr.real_capability)

    def _may_give(self, attr: QueueAttr) -> bool:
        """Can this queue, as allocated now, give pods up: is it above its deserved share?
        Reclaim asks for every candidate on every node it walks, tens of thousands of times a
        busy cycle, while allocations change a few dozen times: the answer is kept until the
        queue's allocation or share changes."""
        memo = self._give_memo.get(attr.queue.name)
        if memo is None or memo[0] is not attr.allocated or memo[1] is not attr.deserved:
            answer = _gives(attr.allocated, attr.deserved)
            memo = self._give_memo[attr.queue.name] = (attr.allocated, attr.deserved, answer)
        return memo[2]

    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> tuple[list[Task], int]:
        victims: list[Task] = []
        allocations: dict[str, Resources] = {}
        jobs = self.ssn.jobs
        for task in candidates:
            queue_name = jobs[task.job].queue
            attr = self.attrs.get(queue_name)
            if attr is None:
                continue
            allocated = allocations.get(queue_name)
            if allocated is None:
                allocated = attr.allocated
                if not self._may_give(attr):
                    continue
            elif not _gives(allocated, attr.deserved):
                continue
            remaining = allocated.sub(task.resreq)
            if not attr.guarantee.less_equal(remaining, missing=0):
                continue  # never reclaim below the guarantee
            allocations[queue_name] = remaining
            victims.append(task)
        return victims, Vote.PERMIT

    def enqueueable(self, job: Job) -> int:
        attr = self.attrs.get(job.queue)
        if attr is None or job.info.min_resources is None:
            return Vote.PERMIT
        minimum = job.info.min_resources
        shortfall = admission_shortfall(attr, minimum)
        if shortfall is None:
            return Vote.PERMIT
        job.reason = admission_reason(job.queue, attr, minimum, shortfall)
        return Vote.REJECT

    def enqueued(self, job: Job) -> None:
        attr = self.attrs.get(job.queue)
        if attr is not None and job.info.min_resources is not None:
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

    # explanations -------------------------------------------------------------------------------
    def explain(self, queue: Queue, task: Task) -> str | None:
        if self.tree is not None:
            return self.tree.explain(queue, task)
        return explain_share(
            queue.info, self.attrs[queue.name], self.cluster, task, self.caps.get(queue.name)
        )

    def share(self, queue_name: str) -> QueueAttr | None:
        if self.tree is not None:
            return self.tree.share(queue_name)
        return self.attrs.get(queue_name)


def admission_reason(
    queue: str,
    attr: QueueAttr,
    minimum: Resources,
    shortfall: tuple[str, Resources],
    subject: str | None = None,
) -> str:
    """Why ``queue`` (the job's own, or ``subject`` names the job's queue and this ancestor)
    cannot admit a job with these min resources."""
    short, needed = shortfall
    left = max(attr.real_capability.get(short) - needed.get(short) + minimum.get(short), 0)
    holder = "the queue" if subject is None else queue
    return (
        f"{subject or f'queue {queue}'} cannot admit the job: it needs "
        f"{describe(short, minimum.get(short))} but {holder} has {describe(short, left)} left "
        "under its capability"
    )


def explain_share(
    info: QueueInfo,
    attr: QueueAttr,
    cluster: Resources,
    task: Task,
    cap: Resources | None = None,
) -> str | None:
    """Why ``task`` does not fit under this queue's share, or None when the share is the whole
    cluster (the nodes are the limit then). ``cap``: the queue's borrowing cap, named only when
    it is what holds the share down."""
    future = attr.allocated.add(task.resreq)
    name = first_short_dimension(future, attr.deserved, task.resreq) or "gpu"
    deserved, allocated = attr.deserved.get(name), attr.allocated.get(name)
    if deserved >= cluster.get(name) - tolerance(name):
        return None
    capability = info.capability.get(name)
    if deserved >= capability - tolerance(name):
        return f"queue {info.name} {capability_text(name, allocated, capability)}"
    limit = info.borrowing_limit.get(name)
    if limit != INFINITY and cap is not None and deserved >= cap.get(name) - tolerance(name):
        return (
            f"queue {info.name} may borrow at most {describe(name, limit)} above its "
            f"nominal share: it deserves {describe(name, deserved)} and has "
            f"{describe(name, allocated)} allocated"
        )
    return (
        f"queue {info.name} deserves {describe(name, deserved)} and has "
        f"{describe(name, allocated)} allocated"
    )


def _within(allocated: Resources, request: Resources, limit: Resources) -> bool:
    """allocated + request <= limit on every name the request asks for."""
    for name, value in request.explicit_items():
        if value > 0 and not le_named(name, allocated.get(name) + value, limit.get(name)):
            return False
    return True


def _gives(allocated: Resources, deserved: Resources) -> bool:
    """Volcano proportion's reclaimable test for a queue: above its deserved share. Upstream
    dropped its other test, "not below the reclaimer's request in any resource" (commit
    975277f55, "remove lessPartly condition in reclaimable fn"): the reclaim action already
    checks that the victims it takes, with the node's idle resources, hold the reclaimer."""
    return not allocated.less_equal(deserved)
