"""allocate: place pending tasks, queue by queue and job by job, gang by gang.

Source: volcano-sh/volcano pkg/scheduler/actions/allocate/allocate.go: queues are popped in
queue order (skipping overused ones), then the best job of that queue; its pending tasks are
tried in task order against nodes that pass the predicates, preferring nodes whose idle
resources fit over nodes that fit only once releasing pods leave (pipelining). The job's
statement is committed when the job is ready, kept when it is merely pipelined, and discarded
otherwise. After one successful step a ready job goes back into its queue so others get a turn.

Speed: nodes are evaluated one per NodeIndex class (identical nodes in identical states) when
the task and scorers allow it, and a task whose (request, scheduling signature) already failed
on every node is failed again at once until some resource is given back (an eviction bumps the
session's ``capacity_epoch``; a discarded statement forgets the answers it learnt while holding
resources). Those answers live in an ``AllocateState``, made for each run of the action.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from scheduler.core.actions._queue import PriorityQueue
from scheduler.core.devices import devices_fit
from scheduler.core.hooks import KeyedBatchScorer
from scheduler.core.node_index import ClassRep
from scheduler.core.resources import CPU, GPU, MIN_RESOURCE, Resources
from scheduler.core.session import Session
from scheduler.core.state import Job, Node, Queue, Task
from scheduler.core.statement import Statement
from scheduler.core.types import PodGroupPhase, TaskStatus

PENDING = TaskStatus.PENDING


# (request, predicate signature): pods of one shape fit the same nodes
Shape = tuple[Resources, tuple[object, ...]]


class AllocateState:
    """What one run of allocate works out and remembers for itself, like kube-scheduler's
    CycleState but owned by the action: the session keeps only what every action shares.

    The registrations do not change while the action runs, so what they allow (the class
    shortcut, the keyed batch scorers and the one split function for them) is decided once.
    """

    __slots__ = ("ssn", "infeasible", "class_memo", "needs_memo", "scorers", "split", "by_class")

    def __init__(self, ssn: Session):
        self.ssn = ssn
        # (request, scheduling signature) -> (capacity epoch, failures by reason) of a task
        # that fitted no node
        self.infeasible: dict[Shape, tuple[int, dict[str, int]]] = {}
        # per-class answers: (labels used, split, request, signature) -> class id -> answer
        self.class_memo: dict[tuple[object, ...], dict[int, list[Any]]] = {}
        # "job needs ..." sentences by pending requests
        self.needs_memo: dict[tuple[object, ...], str] = {}
        self.scorers = ssn.keyed_batch_scorers()
        self.split = _split_of(self.scorers or [])
        # Can one node of each NodeIndex class answer for its members (tasks without pod
        # affinity or a pod-specific predicate)? Only when every scorer is keyed or scores by
        # the node's state and no predicate looks at other pods.
        self.by_class = (
            self.scorers is not None and ssn.scorers_state_only() and not ssn.predicates_read_pods()
        )

    def class_equivalent(self, task: Task) -> bool:
        """Can one node of each NodeIndex class answer for all its members for this task?
        (Label-free classes are split by ``split`` when batch scorers are on.)"""
        info = task.info
        return self.by_class and not info.affinity and info.name not in self.ssn.unique_predicates


def _split_of(scorers: list[KeyedBatchScorer]) -> Callable[[Node], Hashable] | None:
    """One node-key function for all keyed batch scorers (the NodeIndex keeps one grouping
    per function, so a run asks with this one object)."""
    if not scorers:
        return None
    if len(scorers) == 1:
        return scorers[0].node_key
    keys = tuple(fn.node_key for fn in scorers)

    def split(node: Node) -> tuple[Hashable, ...]:
        return tuple(key(node) for key in keys)

    return split


def execute(ssn: Session) -> None:
    state = AllocateState(ssn)
    waiting = _waiting_by_queue(ssn)
    # Keys are safe here: only the popped queue and job change while the others wait queued.
    _allocate_in_shares(ssn, state, waiting)
    if ssn.lends():
        lend_idle(state, waiting)


def _waiting_by_queue(ssn: Session) -> dict[str, list[Job]]:
    """Per open queue, its admitted jobs that the job-valid hooks let through."""
    enqueue_enabled = "enqueue" in ssn.conf.actions
    waiting: dict[str, list[Job]] = {}
    for job in ssn.jobs.values():
        if job.phase is PodGroupPhase.PENDING:
            if enqueue_enabled:
                continue
            job.phase = PodGroupPhase.INQUEUE
        reason = ssn.job_valid(job)
        if reason is not None:
            job.reason = reason
            continue
        queue = ssn.queues.get(job.queue)
        if queue is None:
            continue
        if not queue.info.is_open:
            job.reason = f"queue {queue.name} is closed"
            continue
        if job.queue not in waiting:
            waiting[job.queue] = []
        waiting[job.queue].append(job)
    return waiting


def _allocate_in_shares(ssn: Session, state: AllocateState, waiting: dict[str, list[Job]]) -> None:
    job_key = ssn.job_key_fn()
    # Built in one go: with a key the heap pops exactly what pushing one by one would.
    jobs_by_queue = {
        name: PriorityQueue(ssn.job_compare, jobs, key=job_key) for name, jobs in waiting.items()
    }
    queues = PriorityQueue(
        ssn.queue_compare, [ssn.queues[n] for n in sorted(jobs_by_queue)], ssn.queue_key_fn()
    )
    pending: dict[str, deque[Task]] = {}
    queue = queues.pop() if queues else None
    while queue is not None:
        jobs = jobs_by_queue[queue.name]
        if ssn.overused(queue):
            for job in jobs.items():
                if not job.reason:
                    job.reason = overused_reason(ssn, queue)
                    pods = job.pending_tasks()
                    job.quota_task = pods[0] if pods else None
            queue = queues.pop() if queues else None
            continue
        if not jobs:
            queue = queues.pop() if queues else None
            continue
        job = jobs.pop()
        if job.name not in pending:
            pods = [t for t in job.pending_tasks() if not t.best_effort]
            pending[job.name] = deque(ssn.sorted_tasks(pods))
        tasks = pending[job.name]
        if tasks:
            allocate_tasks(state, queue, job, tasks, jobs)
        # back into the queue order, and the next queue out (often the same one)
        queue = queues.pushpop(queue)


def lend_idle(state: AllocateState, waiting: dict[str, list[Job]]) -> None:
    """A quota plugin's ``lendIdle`` (our extension; upstream holds a queue at its deserved
    share): once every queue has had its turn within its share, what is still idle goes to the
    jobs their share alone held back, queue by queue and job by job in the configured orders,
    each gang whole on idle resources (never onto releasing ones, which a reclaimer was
    promised) and within the plugin's hard limits (``Session.lendable``). No job within its
    share could use that capacity now, or allocate would have placed it; a lent pod leaves
    its queue above its share, so reclaim takes it back first when the lender needs it."""
    ssn = state.ssn
    held = {
        name: [job for job in jobs if job.quota_task is not None and job.counts.get(PENDING)]
        for name, jobs in waiting.items()
    }
    job_key = ssn.job_key_fn()
    jobs_by_queue: dict[str, PriorityQueue[Job] | None] = {
        name: None for name, jobs in held.items() if jobs
    }
    if job_key is None:
        # Compare functions may read state lending changes: every heap is built up front.
        for name in jobs_by_queue:
            jobs_by_queue[name] = PriorityQueue(ssn.job_compare, held[name])
    queues = PriorityQueue(
        ssn.queue_compare, [ssn.queues[n] for n in sorted(jobs_by_queue)], ssn.queue_key_fn()
    )
    lent: list[str] = ssn.cycle_state.get(LENT, list)
    hopeless = _Hopeless(ssn, held.values())
    while queues and not hopeless.everything():
        queue = queues.pop()
        jobs = jobs_by_queue[queue.name]
        if jobs is None:
            # With sort keys a queue's heap is built on its first turn: its jobs have not
            # changed since (only the popped queue and job do), so their keys, and the heap,
            # are what they were; the turns left once nothing can lend never build theirs.
            jobs = jobs_by_queue[queue.name] = PriorityQueue(
                ssn.job_compare, held[queue.name], key=job_key
            )
        job = jobs.pop()
        if not hopeless.all_of(job):
            count = len(lent)
            _lend_to(state, queue, job)
            if len(lent) != count:
                hopeless.recheck()
        if jobs:
            queues.push(queue)


class _Hopeless:
    """The pod requests no node's idle holds any more, among the held jobs' pending pods.

    Idle only shrinks while lending runs (a lend takes some; a discarded try gives back what
    it took), so a request no node holds stays that way. A job all of whose pods are such
    lends nothing on its turn, and once every request is, no later turn lends anything: both
    are skipped, the order of the turns that remain untouched. Of 8,500 quota-blocked jobs
    in a full 1k/10k cluster, a handful get idle capacity; the rest stop here."""

    __slots__ = ("nodes", "live", "dead")

    def __init__(self, ssn: Session, held: Iterable[list[Job]]):
        self.nodes = ssn.node_list
        requests = {
            t.resreq
            for jobs in held
            for job in jobs
            for t in job.tasks.values()
            if t.status is PENDING and not t.best_effort
        }
        self.live: set[Resources] = set(requests)
        self.dead: set[Resources] = set()
        self.recheck()

    def recheck(self) -> None:
        for request in [r for r in self.live if not self._fits_some(r)]:
            self.live.discard(request)
            self.dead.add(request)

    def _fits_some(self, request: Resources) -> bool:
        return any(request.less_equal(node.idle) for node in self.nodes)

    def everything(self) -> bool:
        return not self.live

    def all_of(self, job: Job) -> bool:
        dead = self.dead
        return all(
            t.resreq in dead
            for t in job.tasks.values()
            if t.status is PENDING and not t.best_effort
        )


def _lend_to(state: AllocateState, queue: Queue, job: Job) -> None:
    ssn = state.ssn
    stmt = Statement(ssn)
    for task in ssn.sorted_tasks([t for t in job.pending_tasks() if not t.best_effort]):
        if not ssn.lendable(queue, task):
            break
        node, _ = choose_node(state, task)
        if node is None or not fits_idle(task, node):
            break
        stmt.allocate(task, node.name)
    if stmt.ops and ssn.job_ready(job):
        stmt.commit()
        lent: list[str] = ssn.cycle_state.get(LENT, list)
        lent.append(job.name)
        if not job.counts.get(TaskStatus.PENDING):
            job.reason, job.unplaced, job.quota_task = None, False, None
    elif stmt.ops:
        stmt.discard()


# cycle_state key: the jobs lent idle capacity this session, in the order lent
LENT = "allocate.lent"


def overused_reason(ssn: Session, queue: Queue) -> str:
    share = ssn.queue_share(queue.name)
    if share is None:
        return f"queue {queue.name} is using its whole share"
    from scheduler.core.reasons import describe

    parts = [
        f"{describe(n, share.allocated.get(n))} of {describe(n, share.deserved.get(n))}"
        for n in ("gpu", "cpu")
        if share.deserved.get(n) or share.allocated.get(n)
    ]
    return f"queue {queue.name} is using its whole deserved share ({'; '.join(parts)})"


def job_needs(job: Job, memo: dict[tuple[object, ...], str] | None = None) -> str:
    """``job needs 32 GPUs (4 pods x 8)``: what its pending pods ask for, in GPUs or cpu.

    ``memo`` (one per session) keys the sentence by the pending requests, which are interned:
    thousands of quota-blocked jobs share a few dozen shapes."""
    pending = [t.resreq for t in job.tasks.values() if t.status is PENDING and not t.best_effort]
    key = tuple(pending)
    if memo is not None:
        found = memo.get(key)
        if found is None:
            found = memo[key] = _needs_sentence(pending)
        return found
    return _needs_sentence(pending)


def _needs_sentence(pending: list[Resources]) -> str:
    from scheduler.core.reasons import amount, describe

    name, values = GPU, [resreq.get(GPU) for resreq in pending]
    if not any(value > 0 for value in values):
        name, values = CPU, [resreq.get(CPU) for resreq in pending]
    sizes = sorted(set(values), reverse=True)
    total = sum(values)
    if len(pending) == 1:
        return f"job needs {describe(name, total)}"
    each = " + ".join(amount(name, size) for size in sizes)
    shape = f"{len(pending)} pods x {each}" if len(sizes) == 1 else f"{len(pending)} pods of {each}"
    return f"job needs {describe(name, total)} ({shape})"


def predicate_nodes(ssn: Session, task: Task) -> tuple[list[Node], dict[str, int]]:
    """Nodes where the task fits FutureIdle and passes the predicates; failures by reason."""
    fits: list[Node] = []
    failures: dict[str, int] = {}
    for node in ssn.node_list:
        reason = _misfit(ssn, task, node)
        if reason is None:
            fits.append(node)
        else:
            failures[reason] = failures.get(reason, 0) + 1
    return fits, failures


def _misfit(ssn: Session, task: Task, node: Node) -> str | None:
    resreq, future = task.resreq, node.future_idle()
    # Cheap scalar pre-checks on the usual bottlenecks before the full comparison.
    if (
        future.get(GPU) < resreq.get(GPU) - MIN_RESOURCE
        or future.get(CPU) < resreq.get(CPU) - MIN_RESOURCE
        or not resreq.less_equal(future)
    ):
        return "insufficient resources"
    if task.gpu is not None and not devices_fit(task.gpu, node.devices, True):
        return "insufficient GPU devices"
    error = ssn.predicate(task, node)
    return None if error is None else error.reason


def fits_idle(task: Task, node: Node) -> bool:
    """Volcano's first gradient: the node's idle resources (and free devices) hold the task
    now, without waiting for releasing pods."""
    return task.resreq.less_equal(node.idle) and (
        task.gpu is None or devices_fit(task.gpu, node.devices, False)
    )


def fits_future(task: Task, node: Node) -> bool:
    """FutureIdle (and the devices once releasing pods leave) holds the task."""
    return task.resreq.less_equal(node.future_idle()) and (
        task.gpu is None or devices_fit(task.gpu, node.devices, True)
    )


def choose_node(state: AllocateState, task: Task) -> tuple[Node | None, dict[str, int]]:
    """Volcano's two gradients: best node whose idle fits, else best whose FutureIdle fits."""
    if state.class_equivalent(task):
        return _choose_by_class(state, task)
    ssn = state.ssn
    nodes, failures = predicate_nodes(ssn, task)
    if not nodes:
        return None, failures
    idle = [n for n in nodes if fits_idle(task, n)]
    return (ssn.best_node(task, idle) if idle else ssn.best_node(task, nodes)), failures


def _choose_by_class(state: AllocateState, task: Task) -> tuple[Node | None, dict[str, int]]:
    """One representative per NodeIndex class; label-free classes when the task's predicates
    cannot look at labels (no node selector; ``class_equivalent`` already ruled out affinity).

    A class's answers (misfit reason, idle fit, map score) depend only on its key and the
    task's request and scheduling signature, so they are memoised per class id for the
    session: a placement changes one node, hence one or two classes, and the rest answer from
    the memo. Batch scores depend on the job's state too, so they are asked for every call, by
    key. Scores are the same sums ``Session.node_scores`` makes (batch first, then the map
    sum), and the best is picked with the same first-wins walk as ``Session.best_node``.

    With one keyed batch scorer giving no negative score (network-topology-aware), label-free
    classes plus the classes of the scored keys' nodes (split by key) decide like every split
    class: a node outside the scored keys comes after its label-free class's first member and
    scores no more than it, so the first-wins walk never picks it. That keeps the walk at a few
    dozen classes however many domains the cluster has.
    """
    ssn = state.ssn
    index = ssn.node_index
    use_labels = bool(task.info.node_selector)
    scorers = state.scorers or []
    signature = ssn.predicate_signature(task)
    if use_labels or not scorers:
        memo = _class_memo(state, (use_labels, None, task.resreq, signature))
        failures, idle_fits, fits = _class_answers(
            ssn, task, index.class_representatives(use_labels), memo, True
        )
        return _first_best(ssn, task, idle_fits or fits, scorers), failures
    if len(scorers) == 1:
        memo = _class_memo(state, (False, None, task.resreq, signature))
        failures, idle_fits, fits = _class_answers(
            ssn, task, index.class_representatives(False), memo, True
        )
        candidates = idle_fits or fits
        if not candidates:
            return None, failures
        scorer = scorers[0]
        by_key = scorer.by_key(task)
        if all(score >= 0 for score in by_key.values()):
            split_memo = _class_memo(state, (False, scorer.node_key, task.resreq, signature))
            seen = {id(node) for node, _ in candidates}
            for key in by_key:
                reps = index.part_representatives(scorer.node_key, key)
                _, part_idle, part_fits = _class_answers(ssn, task, reps, split_memo, False)
                for node, entry in part_idle if idle_fits else part_fits:
                    if id(node) not in seen:
                        seen.add(id(node))
                        candidates.append((node, entry))
            candidates.sort(key=lambda pair: index.position[pair[0].name])
            batch = [(scorer.node_key, by_key)] if by_key else []
            return _first_best(ssn, task, candidates, scorers, batch), failures
    split = state.split
    memo = _class_memo(state, (False, split, task.resreq, signature))
    failures, idle_fits, fits = _class_answers(
        ssn, task, index.class_representatives(False, split), memo, True
    )
    return _first_best(ssn, task, idle_fits or fits, scorers), failures


def _class_memo(state: AllocateState, key: tuple[object, ...]) -> dict[int, list[Any]]:
    memo = state.class_memo.get(key)
    if memo is None:
        memo = state.class_memo[key] = {}
    return memo


def _class_answers(
    ssn: Session, task: Task, reps: list[ClassRep], memo: dict[int, list[Any]], count_failures: bool
) -> tuple[dict[str, int], list[tuple[Node, list[Any]]], list[tuple[Node, list[Any]]]]:
    """(failures by reason, idle-fitting classes, fitting classes) of ``reps``, in their
    order; each memo entry is [misfit reason, fits on idle, map score or None]."""
    failures: dict[str, int] = {}
    idle_fits: list[tuple[Node, list[Any]]] = []
    fits: list[tuple[Node, list[Any]]] = []
    for _, node, members, class_id in reps:
        entry = memo.get(class_id)
        if entry is None:
            reason = _misfit(ssn, task, node)
            entry = memo[class_id] = [
                reason,
                reason is None and fits_idle(task, node),
                None,
            ]
        if entry[0] is None:
            fits.append((node, entry))
            if entry[1]:
                idle_fits.append((node, entry))
        elif count_failures:
            failures[entry[0]] = failures.get(entry[0], 0) + len(members)
    return failures, idle_fits, fits


def _first_best(
    ssn: Session,
    task: Task,
    candidates: list[tuple[Node, list[Any]]],
    scorers: list[KeyedBatchScorer],
    batch: list[tuple[Callable[[Node], Hashable], dict[Hashable, float]]] | None = None,
) -> Node | None:
    """``Session.best_node`` over class representatives (in name order): the first highest."""
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0][0]
    if batch is None:
        batch = [(fn.node_key, fn.by_key(task)) for fn in scorers]
        batch = [(node_key, by_key) for node_key, by_key in batch if by_key]
    best, best_score = None, None
    for node, entry in candidates:
        score = entry[2]
        if score is None:
            score = entry[2] = 0.0 + ssn.map_score(task, node)
        if batch:
            total = 0.0
            for node_key, by_key in batch:
                total += by_key.get(node_key(node), 0.0)
            score = total + score
        if best_score is None or score > best_score + 1e-9:
            best, best_score = node, score
    return best


def allocate_tasks(  # noqa: C901, PLR0912 - the loop of upstream allocate.go's allocateResourcesForTasks
    state: AllocateState, queue: Queue, job: Job, tasks: deque[Task], jobs: PriorityQueue[Job]
) -> None:
    ssn = state.ssn
    stmt = Statement(ssn)
    # "fits nowhere" answers learnt while this statement held resources: stale on discard
    learnt: list[Shape] = []
    quota_blocked: Task | None = None
    while tasks:
        task = tasks.popleft()
        if not ssn.allocatable(queue, task):
            quota_blocked = quota_blocked or task
            continue
        if job.task_has_fit_errors(task):
            continue
        key = (task.resreq, ssn.predicate_signature(task))
        known = state.infeasible.get(key)
        if known is not None and known[0] == ssn.capacity_epoch:
            node, failures = None, known[1]
        else:
            node, failures = choose_node(state, task)
            if node is None:
                state.infeasible[key] = (ssn.capacity_epoch, failures)
                learnt.append(key)
        if node is None:
            job.fit_errors[task.name] = failures
            job.failed_roles.add(task.info.role)
            if job.need_continue_allocating():
                continue
            break
        if fits_idle(task, node):
            stmt.allocate(task, node.name)
        else:
            stmt.pipeline(task, node.name)
        if ssn.job_ready(job) and tasks:
            jobs.push(job)
            break
    # With no operation both outcomes change nothing: skip asking the plugins (most jobs of a
    # busy cycle stop at their queue's quota before any).
    if stmt.ops:
        if ssn.job_ready(job):
            stmt.commit()
        elif not ssn.job_pipelined(job):
            stmt.discard()
            for key in learnt:
                state.infeasible.pop(key, None)
    if quota_blocked is not None:
        # Explained after the discard, so the queue's allocation no longer counts the job's
        # own tentative pods.
        quota = ssn.explain_allocatable(queue, quota_blocked)
        job.reason = None if quota is None else f"{job_needs(job, state.needs_memo)}; {quota}"
        job.unplaced = quota is None
        job.quota_task = None if quota is None else quota_blocked
    if not job.counts.get(TaskStatus.PENDING):
        job.reason, job.unplaced, job.quota_task = None, False, None
    elif job.fit_errors:
        job.reason, job.unplaced, job.quota_task = None, True, None
