"""preempt: a starving job evicts lower-priority work inside its own queue.

Source: volcano-sh/volcano pkg/scheduler/actions/preempt/preempt.go. For each queue (in queue
order), starving jobs (in job order) try their pending tasks: nodes passing the predicates are
tried best score first (a node whose only failure is a conflict with pods that may leave, such
as pod anti-affinity, stays a candidate); victims are Running/Bound preemptable pods of other
jobs of the same queue that every answering plugin of a tier allows (session.preemptable); they
are evicted least important first until the preemptor fits the node's FutureIdle, passes the
predicates and its queue may allocate it (so a queue at its capability makes room inside
itself), and the preemptor is pipelined there. A node where that never happens gets its
evictions rolled back, so only the node where preemption succeeds keeps any (upstream's per-node
statement). The job's statement is committed only if the job is then pipelined. Afterwards tasks
within one job preempt each other (by task priority), and finally plugins' victim_tasks (e.g.
rescheduling) are evicted.

Like upstream's fix for multi-queue preemption, intra-job preemption only considers the jobs of
the queue being processed, so it never overwrites another queue's preemptor tasks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from scheduler.core.actions._queue import PriorityQueue
from scheduler.core.actions._victims import eviction_units, flatten
from scheduler.core.actions.allocate import fits_future
from scheduler.core.reasons import ANOTHER_TENANTS_JOB, job_called
from scheduler.core.resources import CPU, GPU, GPU_TOLERANCE, MEMORY, MIN_RESOURCE, Resources
from scheduler.core.session import Session
from scheduler.core.state import Job, Node, Queue, Task
from scheduler.core.statement import Statement
from scheduler.core.types import PodGroupPhase, TaskStatus

_PREEMPTABLE_STATUSES = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND})


def execute(ssn: Session) -> None:  # noqa: C901, PLR0912 - the two phases of upstream preempt.go's Execute, one loop each
    preemptors: dict[str, PriorityQueue[Job]] = {}
    under_request: list[Job] = []
    queue_names: set[str] = set()
    for job in ssn.jobs.values():
        if job.phase is PodGroupPhase.PENDING or job.queue not in ssn.queues:
            continue
        if ssn.job_valid(job) is not None:
            continue
        queue_names.add(job.queue)
        if ssn.job_starving(job):
            under_request.append(job)
    if not under_request:
        evict_victim_tasks(ssn)
        return
    hosts = _hosts(ssn)
    for job in under_request:
        # A queue with no preemptable pod on any node skips its whole pass below, so its
        # starving jobs are not even ordered (thousands of compares in a busy cycle).
        if hosts.get(("queue", job.queue)):
            jobs = preemptors.get(job.queue)
            if jobs is None:
                jobs = preemptors[job.queue] = PriorityQueue(ssn.job_compare)
            jobs.push(job)
    failed: dict[tuple[object, ...], int] = {}
    under_request_by_queue: dict[str, list[Job]] = {}
    for job in under_request:
        under_request_by_queue.setdefault(job.queue, []).append(job)
    task_queues: dict[str, PriorityQueue[Task]] = {}
    ordered = PriorityQueue(ssn.queue_compare, [ssn.queues[n] for n in sorted(queue_names)])
    while ordered:
        queue = ordered.pop()
        # None when no node holds a preemptable pod of this queue (hosts never grow during
        # preempt): every attempt would fail and change nothing, so the whole pass is skipped.
        jobs = preemptors.get(queue.name)
        while jobs:
            job = jobs.pop()
            stmt = Statement(ssn)
            assigned = False
            if job.name not in task_queues:
                task_queues[job.name] = PriorityQueue(ssn.task_compare, job.pending_tasks())
            while ssn.job_starving(job) and task_queues[job.name]:
                preemptor = task_queues[job.name].pop()
                assigned = _attempt(
                    ssn,
                    stmt,
                    preemptor,
                    _other_jobs_in_queue(ssn, preemptor),
                    hosts.get(("queue", job.queue), []),
                    failed,
                    ("queue", job.queue, job.priority, _job_key(ssn, job)),
                )
            if ssn.job_pipelined(job):
                stmt.commit()
            else:
                stmt.discard()
                continue
            if assigned:
                jobs.push(job)
        for job in under_request_by_queue.get(queue.name, []):
            if not hosts.get(("job", job.name)):
                continue  # no pod of its own to preempt: the first attempt would fail
            tasks = PriorityQueue(ssn.task_compare, job.pending_tasks())
            while tasks:
                preemptor = tasks.pop()
                stmt = Statement(ssn)
                assigned = _attempt(
                    ssn,
                    stmt,
                    preemptor,
                    _same_job(preemptor),
                    hosts.get(("job", job.name), []),
                    failed,
                    ("job", job.name),
                )
                if not assigned:
                    stmt.discard()
                    break
                stmt.commit()
    evict_victim_tasks(ssn)


def _hosts(ssn: Session) -> dict[tuple[str, str], list[Node]]:
    """Nodes holding preemptable pods, per queue and per job: victims can only be there."""
    found: dict[tuple[str, str], dict[str, Node]] = {}
    for node in ssn.node_list:
        for task in node.tasks.values():
            if task.status in _PREEMPTABLE_STATUSES:
                job = ssn.jobs[task.job]
                found.setdefault(("queue", job.queue), {})[node.name] = node
                found.setdefault(("job", job.name), {})[node.name] = node
    return {key: list(nodes.values()) for key, nodes in found.items()}


def _job_key(ssn: Session, job: Job) -> str | None:
    """A failure carries over to other jobs of the same shape unless a preemptable hook judges
    by the preemptor's job itself (``Declared.by_preemptor_job``: drf compares the job's own
    dominant share, as upstream's drf preemptableFn does); then failures are per job."""
    return job.name if ssn.preemptable_by_preemptor_job() else None


def _attempt(
    ssn: Session,
    stmt: Statement,
    preemptor: Task,
    allowed: Callable[[Task], bool],
    nodes: list[Node] | None,
    failed: dict[tuple[object, ...], int],
    scope: tuple[object, ...],
) -> bool:
    """preempt(), skipping a task shape that already failed while nothing has changed since.

    A failed attempt changes nothing, so the same shape in the same scope keeps failing until
    some operation bumps the session's version.
    """
    key = _shape_key(ssn, scope, preemptor)
    if failed.get(key) == ssn.version:
        return False
    if preempt(ssn, stmt, preemptor, allowed, nodes):
        return True
    failed[key] = ssn.version
    return False


def _shape_key(ssn: Session, scope: tuple[object, ...], preemptor: Task) -> tuple[object, ...]:
    """What a preempt attempt depends on besides the session's state."""
    return (*scope, preemptor.resreq, preemptor.priority, ssn.predicate_signature(preemptor))


def _other_jobs_in_queue(ssn: Session, preemptor: Task) -> Callable[[Task], bool]:
    queue = ssn.jobs[preemptor.job].queue

    def allowed(task: Task) -> bool:
        return ssn.jobs[task.job].queue == queue and task.job != preemptor.job

    return allowed


def _same_job(preemptor: Task) -> Callable[[Task], bool]:
    return lambda task: task.job == preemptor.job


def preempt(
    ssn: Session,
    stmt: Statement,
    preemptor: Task,
    allowed: Callable[[Task], bool],
    hosts: list[Node] | None = None,
) -> bool:
    """Try to make room for ``preemptor`` on one node; ``hosts`` limits the nodes to look at."""
    if preemptor.info.preemption_policy == "Never":
        return False
    job = ssn.jobs[preemptor.job]
    queue = ssn.queues[job.queue]
    pool = ssn.node_list if hosts is None else hosts
    viable: list[tuple[Node, list[Task]]] = []
    for node in pool:
        if ssn.predicate_for_preempt(preemptor, node) is not None:
            continue
        candidates = [
            task
            for task in node.tasks.values()
            if task.status in _PREEMPTABLE_STATUSES
            and task.info.preemptable
            and not (preemptor.best_effort and not task.best_effort)
            and allowed(task)
            and not _same_pod(task, preemptor)
        ]
        # Nodes where even every candidate together would not make room are skipped before
        # scoring: upstream reaches the same verdict later, in ValidateVictims.
        if validate_victims(preemptor, node, candidates):
            viable.append((node, candidates))
    by_node = {node.name: candidates for node, candidates in viable}
    for node in ssn.sorted_by_score(preemptor, [node for node, _ in viable]):
        candidates = by_node[node.name]
        victims = ssn.preemptable(preemptor, ssn.victim_order(candidates, preemptor))
        units = eviction_units(ssn, ssn.victim_order(victims, preemptor))
        if not validate_victims(preemptor, node, flatten(units)):
            continue
        # Upstream's per-node statement (normalPreempt): this node's evictions stand only if
        # the preemptor is pipelined here; otherwise they are rolled back before the next node.
        mark = stmt.mark()
        for unit in units:
            if _fits(ssn, queue, preemptor, node):
                break
            for victim in unit:
                stmt.evict(
                    victim,
                    "preempt",
                    _preempted_by(ssn, preemptor, job, queue, victim),
                    preemptor,
                )
        if _fits(ssn, queue, preemptor, node):
            stmt.pipeline(preemptor, node.name)
            return True
        stmt.discard(mark)
    return False


def _preempted_by(ssn: Session, preemptor: Task, job: Job, queue: Queue, victim: Task) -> str:
    """The victim's sentence; a preemptor of another tenant is not named (reasons.job_called)."""
    called = job_called(ssn.jobs[victim.job], job)
    if called == ANOTHER_TENANTS_JOB:
        return "preempted by a higher-priority job of another tenant"
    return f"preempted by {preemptor.name} of higher-priority {called} in queue {queue.name}"


def _fits(ssn: Session, queue: Queue, preemptor: Task, node: Node) -> bool:
    """Upstream preemptorFitsOnNode: the queue may take it, FutureIdle holds it, and the
    predicates pass now that some pods are leaving (a pod anti-affinity conflict with an
    evicted pod is gone)."""
    return (
        ssn.allocatable(queue, preemptor)
        and fits_future(preemptor, node)
        and ssn.predicate(preemptor, node) is None
    )


def _same_pod(victim: Task, preemptor: Task) -> bool:
    """A replica of the preemptor's own role, request and priority: evicting it only to place
    an identical pod there is churn, never progress. Departs from upstream, which leaves this
    to the preemptable plugins (priority refuses equal task priorities; without it the
    intra-job pass could evict a pod for its twin, cycle after cycle)."""
    return (
        victim.job == preemptor.job
        and victim.info.role == preemptor.info.role
        and victim.priority == preemptor.priority
        and victim.resreq == preemptor.resreq
    )


def validate_victims(preemptor: Task, node: Node, victims: list[Task]) -> bool:
    """Volcano util.ValidateVictims: the victims plus FutureIdle must hold the preemptor.

    Summed per requested resource with plain floats: it runs for every node and preemptor.
    """
    if not victims:
        return False
    future = node.future_idle()
    request = preemptor.resreq
    for name in _checked_names(request):
        total = 0.0
        for victim in victims:
            total += victim.resreq.get(name)
        if request.get(name) - (future.get(name) + total) >= (
            GPU_TOLERANCE if name == GPU else MIN_RESOURCE
        ):
            return False
    return True


@functools.lru_cache(maxsize=256)
def _checked_names(request: Resources) -> tuple[str, ...]:
    """cpu, memory and every requested name, GPUs first: the usual shortfall, so most nodes
    are refused after one sum (any order gives the same verdict)."""
    explicit = [name for name, _ in request.explicit_items()]
    names = dict.fromkeys([GPU] if GPU in explicit else [])
    names.update(dict.fromkeys([CPU, MEMORY, *explicit]))
    return tuple(names)


def evict_victim_tasks(ssn: Session) -> None:
    stmt = Statement(ssn)
    seen: set[str] = set()
    for task in ssn.victim_tasks():
        if task.name in seen or task.status is not TaskStatus.RUNNING:
            continue
        seen.add(task.name)
        stmt.evict(
            task,
            "rescheduling",
            f"moved off busy node {task.node} to even out node utilization",
            None,
        )
    stmt.commit()
