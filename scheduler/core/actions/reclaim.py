"""reclaim: queues below their deserved share take back what others borrowed.

Source: volcano-sh/volcano pkg/scheduler/actions/reclaim/reclaim.go. Queues are popped in queue
order (overused ones are skipped); the best starving job of the queue offers its best pending
task; the queue must be preemptive for it. On each node passing the predicates (but for
conflicts with pods that may leave, Session.predicate_for_preempt), Running preemptable pods of
*other*, reclaimable queues are candidates; session.reclaimable picks the victims, which are
evicted least important first (victims of different queues: the lowest queue priority first,
Session.victim_order) until the node's FutureIdle, idle resources included, holds the task
(upstream reclaimForTask's availableResources). If it never does, that node's evictions are
rolled back, so only the node where reclaim succeeds keeps them. The task is then pipelined
there; a job's evictions commit once it is pipelined.
"""

from __future__ import annotations

from scheduler.core.actions._queue import PriorityQueue
from scheduler.core.actions._victims import eviction_units, flatten
from scheduler.core.actions.allocate import fits_future
from scheduler.core.actions.preempt import validate_victims
from scheduler.core.reasons import ANOTHER_TENANTS_JOB, job_called
from scheduler.core.resources import GPU, MIN_RESOURCE
from scheduler.core.session import Session
from scheduler.core.state import Job, Node, Task
from scheduler.core.statement import Statement
from scheduler.core.types import PodGroupPhase, TaskStatus


def execute(ssn: Session) -> None:  # noqa: C901, PLR0912, PLR0915 - upstream reclaim.go's Execute loop, its state shared by every step
    queue_names: set[str] = set()
    preemptors: dict[str, PriorityQueue[Job]] = {}
    task_queues: dict[str, PriorityQueue[Task]] = {}
    hosts = _hosts(ssn)
    # With no running preemptable pod anywhere nothing can be evicted, so no job, task or
    # queue changes state in here: their sort keys stay valid while they wait, and keyed heaps
    # pop in exactly the order of the compare-based ones (a strict total order either way).
    job_key = None if hosts else ssn.job_key_fn()
    task_key = None if hosts else ssn.task_key_fn()
    for job in ssn.jobs.values():
        if job.phase is PodGroupPhase.PENDING or job.queue not in ssn.queues:
            continue
        if ssn.job_valid(job) is not None:
            continue
        queue_names.add(job.queue)
        if ssn.job_starving(job):
            jobs = preemptors.get(job.queue)
            if jobs is None:
                jobs = preemptors[job.queue] = PriorityQueue(ssn.job_compare, key=job_key)
            jobs.push(job)
    queues = PriorityQueue(
        ssn.queue_compare,
        [ssn.queues[n] for n in sorted(queue_names)],
        None if hosts else ssn.queue_key_fn(),
    )
    statements: dict[str, Statement] = {}
    hosts_gpu, hosts_total = _gpus_by_queue(ssn)
    candidate_nodes: dict[str, list[Node]] = {}  # hosts only shrink during reclaim: compute once
    failed: dict[tuple[object, ...], int] = {}
    while queues:
        queue = queues.pop()
        if ssn.overused(queue):
            continue
        jobs = preemptors.get(queue.name)
        if not jobs:
            continue
        job = jobs.pop()
        tasks = task_queues.get(job.name)
        if tasks is None:
            # Built when first needed (most starving jobs are never reached); only the popped
            # job's own pending pods change in here, so the set is the one it started with.
            tasks = task_queues[job.name] = PriorityQueue(
                ssn.task_compare, job.pending_tasks(), task_key
            )
        if not tasks or not ssn.job_starving(job):
            continue
        task = tasks.pop()
        stmt = statements.setdefault(job.name, Statement(ssn))
        if task.info.preemption_policy == "Never":
            jobs.push(job)
            queues.push(queue)
            continue
        if not ssn.preemptive(queue, task):
            job.reason = job.reason or (
                f"queue {queue.name} cannot reclaim: it would go above its deserved share"
            )
            continue
        # A task shape that found no victims keeps failing until the session changes.
        key = _shape_key(ssn, queue.name, task)
        if failed.get(key) == ssn.version:
            queues.push(queue)  # as after any failed attempt: the job is dropped, not the queue
            continue
        assigned = False
        wanted_gpu = task.resreq.get(GPU) - MIN_RESOURCE
        if queue.name not in candidate_nodes:
            candidate_nodes[queue.name] = _candidate_nodes(ssn, hosts, queue.name)
        for node in candidate_nodes[queue.name]:
            # Cheap bound first: idle plus every other queue's running GPUs on the node.
            held = hosts_gpu.get(node.name)
            others = hosts_total[node.name] - held.get(queue.name, 0.0) if held else 0.0
            if node.future_idle().get(GPU) + others < wanted_gpu:
                continue
            if ssn.predicate_for_preempt(task, node) is not None:
                continue
            candidates = []
            for other in node.tasks.values():
                if other.status is not TaskStatus.RUNNING or not other.info.preemptable:
                    continue
                other_queue = ssn.jobs[other.job].queue
                if other_queue == job.queue:
                    continue
                owner = ssn.queues.get(other_queue)
                if owner is None or not owner.info.reclaimable:
                    continue
                candidates.append(other)
            if not candidates or not validate_victims(task, node, candidates):
                continue  # even every candidate together would not make room here
            victims = ssn.reclaimable(task, ssn.victim_order(candidates, task))
            units = eviction_units(ssn, ssn.victim_order(victims, task))
            if not validate_victims(task, node, flatten(units)):
                continue
            mark = stmt.mark()
            # Upstream's availableResources: the node's FutureIdle counts before anything is
            # evicted, so no more pods go than the task needs (FutureIdle grows with each
            # eviction, the evicted pod's request moving to releasing).
            for unit in units:
                if fits_future(task, node):
                    break
                for victim in unit:
                    stmt.evict(
                        victim,
                        "reclaim",
                        _sentence(ssn, task, job, queue.name, ssn.jobs[victim.job]),
                        task,
                    )
            if not fits_future(task, node) or ssn.predicate(task, node) is not None:
                stmt.discard(mark)
                continue
            stmt.pipeline(task, node.name)
            assigned = True
            break
        if not assigned:
            failed[key] = ssn.version
        if assigned:
            if ssn.job_pipelined(job):
                stmt.commit()
                del statements[job.name]
            else:
                jobs.push(job)
        queues.push(queue)
    for name in sorted(statements):
        statements[name].discard()


def _shape_key(ssn: Session, queue: str, task: Task) -> tuple[object, ...]:
    """What a reclaim attempt for ``task`` depends on besides the session's state: equal keys
    fail alike until the session's version moves."""
    return (queue, task.resreq, ssn.predicate_signature(task))


def _sentence(ssn: Session, task: Task, job: Job, mine: str, victim: Job) -> str:
    """Why the victim goes, naming the two queues where their paths part in a hierarchical
    conf (two tenants, when the queues belong to different ones). The victim's submitter reads
    it (its pending reason, its pods' Events): a reclaimer of another tenant is not named,
    nor is its queue or its side of the tree (reasons.job_called)."""
    theirs = victim.queue
    called = job_called(victim, job)
    own = called != ANOTHER_TENANTS_JOB
    head = f"reclaimed for {task.name} of {called}: " if own else f"reclaimed for {called}: "
    mine_text = f"queue {mine}" if own else "its queue"
    if _hierarchical(ssn):
        up, down = _parted(ssn, mine, theirs)
        if up != mine or down != theirs:
            up_text = up if own else "its side of the queue tree"
            return (
                f"{head}{mine_text} is in {up_text}, which is below its deserved share, and "
                f"queue {theirs} is in {down}, which is above its own"
            )
    return f"{head}{mine_text} is below its deserved share and queue {theirs} is above its own"


def _hierarchical(ssn: Session) -> bool:
    return any(option.enabled("enableHierarchy") for tier in ssn.conf.tiers for option in tier)


def _parted(ssn: Session, mine: str, theirs: str) -> tuple[str, str]:
    """The ancestors (or the queues themselves) just below where two queues' paths meet."""
    lines = [_path(ssn, mine), _path(ssn, theirs)]
    level = 0
    while level < min(map(len, lines)) - 1 and lines[0][level] == lines[1][level]:
        level += 1
    return lines[0][level], lines[1][level]


def _path(ssn: Session, name: str) -> list[str]:
    path = [name]
    parent = ssn.queues[name].info.parent
    while parent and parent in ssn.queues and parent not in path:
        path.append(parent)
        parent = ssn.queues[parent].info.parent
    return path[::-1]


def _hosts(ssn: Session) -> dict[str, set[str]]:
    """Names of nodes running pods of each reclaimable queue: victims can only be there."""
    found: dict[str, set[str]] = {}
    for node in ssn.node_list:
        for task in node.tasks.values():
            if task.status is TaskStatus.RUNNING and task.info.preemptable:
                found.setdefault(ssn.jobs[task.job].queue, set()).add(node.name)
    return found


def _candidate_nodes(ssn: Session, hosts: dict[str, set[str]], own_queue: str) -> list[Node]:
    """Nodes (in name order) that run pods of some queue other than ``own_queue``."""
    names: set[str] = set()
    for queue_name, nodes in hosts.items():
        owner = ssn.queues.get(queue_name)
        if queue_name != own_queue and owner is not None and owner.info.reclaimable:
            names |= nodes
    return [node for node in ssn.node_list if node.name in names]


def _gpus_by_queue(ssn: Session) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Per node, the GPUs held by each queue's running pods at the start of reclaim, and by
    all of them (so "every other queue's" is one subtraction per node and attempt; GPU counts
    are whole numbers, so it is exact).

    Evictions only lower these, so the bound stays an upper bound for the whole action.
    """
    held: dict[str, dict[str, float]] = {}
    totals: dict[str, float] = {}
    for node in ssn.node_list:
        for task in node.tasks.values():
            if task.status is TaskStatus.RUNNING:
                per_queue = held.setdefault(node.name, {})
                queue = ssn.jobs[task.job].queue
                gpus = task.resreq.get(GPU)
                per_queue[queue] = per_queue.get(queue, 0.0) + gpus
                totals[node.name] = totals.get(node.name, 0.0) + gpus
    return held, totals
