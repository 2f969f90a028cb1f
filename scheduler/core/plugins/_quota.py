"""Per-queue accounting shared by proportion and capacity (their ``queueAttr``).

Follows the queueAttr bookkeeping in volcano-sh/volcano pkg/scheduler/plugins/proportion/
proportion.go and capacity/capacity.go: allocated counts tasks in an allocated status, request
adds pending tasks, inqueue holds the min resources of admitted-but-unplaced jobs and elastic the
part of running jobs above their min resources.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.core.config import bool_arg
from scheduler.core.resources import EMPTY, Resources, add_into
from scheduler.core.session import Session
from scheduler.core.state import Job, Queue
from scheduler.core.types import ALLOCATED_STATUSES, PodGroupPhase, TaskStatus


@dataclass(slots=True)
class QueueAttr:
    queue: Queue
    weight: int
    guarantee: Resources
    capability: Resources
    allocated: Resources = EMPTY
    request: Resources = EMPTY
    inqueue: Resources = EMPTY
    elastic: Resources = EMPTY
    deserved: Resources = EMPTY
    real_capability: Resources = field(default_factory=Resources.unlimited)
    share: float = 0.0
    # deserved.names(), kept while deserved is the same object (it is set once per session,
    # and the share is recomputed on every allocation)
    _names_of: Resources | None = None
    _names: list[str] = field(default_factory=list)

    def update_share(self) -> None:
        if self._names_of is not self.deserved:
            self._names, self._names_of = self.deserved.names(), self.deserved
        share = 0.0
        for name in self._names:
            deserved, allocated = self.deserved.get(name), self.allocated.get(name)
            if deserved == 0:
                ratio = 0.0 if allocated == 0 else 1.0
            else:
                ratio = allocated / deserved
            share = max(share, ratio)
        self.share = share


def new_attr(queue: Queue) -> QueueAttr:
    info = queue.info
    return QueueAttr(queue, info.weight, info.guarantee, info.capability)


def account_job(attr: QueueAttr, job: Job, demand: bool = True) -> None:
    """Add the job to its queue's figures; ``demand`` False leaves its pending pods out of the
    request (a job that can never run as submitted: ``exclude_never_runnable``)."""
    # The job's sums first, then one vector operation each: a session opens over every job.
    allocated_job = EMPTY
    requested: dict[str, float] = {}
    held: dict[str, float] = {}
    for task in job.tasks.values():
        status = task.status
        if status in ALLOCATED_STATUSES:
            add_into(held, task.resreq)
            add_into(requested, task.resreq)
        elif status is TaskStatus.PENDING and demand:
            add_into(requested, task.resreq)
    if held:
        allocated_job = Resources(held)
        attr.allocated = attr.allocated.add(allocated_job)
    if requested:
        attr.request = attr.request.add(Resources(requested))
    minimum = job.info.min_resources
    if job.phase is PodGroupPhase.INQUEUE and minimum is not None:
        # util.GetInqueueResource: what the minimum still needs beyond the pods already placed
        attr.inqueue = attr.inqueue.add(minimum.exceeded_part(allocated_job))
    if (
        job.phase is PodGroupPhase.RUNNING
        and minimum is not None
        and job.count(*ALLOCATED_STATUSES) >= job.min_available
    ):
        attr.inqueue = attr.inqueue.add(minimum.exceeded_part(allocated_job))
    if minimum is not None:
        attr.elastic = attr.elastic.add(allocated_job.exceeded_part(minimum))


EXCLUDE_NEVER_RUNNABLE = "excludeNeverRunnable"


def exclude_never_runnable(arguments: dict[str, Any]) -> bool:
    """The quota plugins' argument (default true): leave jobs that can never run as submitted
    out of their queue's request. Our departure from upstream, whose proportion and capacity
    count every pending pod (docs/design/scheduling-guarantees.md): a share computed from
    demand that can never be met is a share taken from queues that could use it."""
    return bool_arg(arguments, EXCLUDE_NEVER_RUNNABLE, True)


def demand_exclusions(ssn: Session, exclude: bool) -> frozenset[str]:
    """The jobs with pods waiting to leave out of the requests: those the session's verdict
    finds can never run as submitted (none when the argument is off). Asked once every plugin
    has opened (the predicates decide too); worked out once per session, and the verdict's
    memo serves the reasons at close."""
    judge = ssn.never_judge
    if not exclude or judge is None:
        return frozenset()

    def work_out() -> frozenset[str]:
        waiting = [job for job in ssn.jobs.values() if job.counts.get(TaskStatus.PENDING)]
        verdicts = judge(waiting)
        return frozenset(
            job.name for job, never in zip(waiting, verdicts, strict=True) if never is not None
        )

    found: frozenset[str] = ssn.cycle_state.get("quota.never_runnable", work_out)
    return found


def admission_shortfall(attr: QueueAttr, minimum: Resources) -> tuple[str, Resources] | None:
    """The enqueue check proportion and capacity share (their JobEnqueueableFn): None when the
    job's min resources fit under the queue's real capability together with what the queue
    has allocated and admitted (minus its elastic part), else (the first short dimension,
    that total)."""
    from scheduler.core.reasons import first_short_dimension

    needed = minimum.add(attr.allocated).add(attr.inqueue).sub(attr.elastic)
    if needed.less_equal_with_dimension(attr.real_capability, minimum):
        return None
    return first_short_dimension(needed, attr.real_capability, minimum) or "gpu", needed


def cluster_total(ssn: Session) -> Resources:
    # summed in place: one vector per node was most of a 5,000-node session's plugin opening
    acc: dict[str, float] = {}
    for node in ssn.node_list:
        add_into(acc, node.allocatable)
    return Resources(acc)
