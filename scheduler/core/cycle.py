"""One scheduling cycle: open a session, run the configured actions, report decisions.

Mirrors volcano-sh/volcano pkg/scheduler/scheduler.go runOnce (OpenSession, each action's
Execute, CloseSession) and framework/job_updater.go for the pod group phase reported at close.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from scheduler.core.actions import ACTIONS
from scheduler.core.actions.allocate import LENT, job_needs
from scheduler.core.config import SchedulerConf
from scheduler.core.plugins import PLUGINS
from scheduler.core.reasons import explain_unplaced
from scheduler.core.resources import Resources
from scheduler.core.session import Session
from scheduler.core.state import Job, Queue
from scheduler.core.types import (
    ALLOCATED_STATUSES,
    CycleResult,
    PendingKind,
    Pipeline,
    PodGroupPhase,
    QueueShare,
    Snapshot,
    TaskStatus,
    WorkConservation,
)
from scheduler.core.verdict import (
    idle_gpus,
    idle_note,
    never_reasons,
    nodes_conclusion,
    position,
    quota_conclusion,
    reclaim_note,
)


def open_session(snapshot: Snapshot, conf: SchedulerConf) -> Session:
    ssn = Session(snapshot, conf)
    ssn.never_judge = functools.partial(never_reasons, ssn)
    for tier in conf.tiers:
        for option in tier:
            plugin = PLUGINS[option.name].build(option.arguments)
            ssn.plugins[option.name] = plugin
            plugin.on_session_open(ssn)
    for step in ssn.open_steps:
        step()
    return ssn


def run_cycle(snapshot: Snapshot, conf: SchedulerConf) -> CycleResult:
    """Run every configured action once over ``snapshot``; never raises for "does not fit".

    Leaves the garbage collector alone: pausing it for a big cycle is the calling process's
    choice (scheduler.adapters.gc_pause), as the web process runs small cycles too."""
    ssn = open_session(snapshot, conf)
    for action in conf.actions:
        ACTIONS[action].execute(ssn)
    result = close_session(ssn)
    ssn.release()
    return result


def run_cycle_timed(
    snapshot: Snapshot, conf: SchedulerConf, clock: Callable[[], float]
) -> tuple[CycleResult, dict[str, float]]:
    """``run_cycle`` plus seconds per phase, read from ``clock`` (the core owns no clock).

    Same steps in the same order as ``run_cycle``, so the result is identical; an action listed
    twice accumulates. Phases: ``open_session``, each action, ``close_session``.
    """
    timings: dict[str, float] = {}
    start = clock()
    ssn = open_session(snapshot, conf)
    timings["open_session"] = clock() - start
    for action in conf.actions:
        start = clock()
        ACTIONS[action].execute(ssn)
        timings[action] = timings.get(action, 0.0) + clock() - start
    start = clock()
    result = close_session(ssn)
    ssn.release()
    timings["close_session"] = clock() - start
    return result, timings


def close_session(ssn: Session, *, share_reasons: bool = True) -> CycleResult:
    """The cycle's decisions and a reason per job still pending.

    ``share_reasons``: quota-blocked jobs whose sentence has the same inputs share one
    computation (``_quota_block``); off, every job's sentence is worked out on its own, the
    plain path the shortcut is tested against."""
    pipelined = tuple(
        Pipeline(task.name, task.job, task.node, task.gpus)
        for job in ssn.jobs.values()
        for task in job.tasks.values()
        if task.status is TaskStatus.PIPELINED and task.node is not None
    )
    phases = {name: _phase(job).value for name, job in ssn.jobs.items()}
    unplaced = [
        job
        for job in ssn.jobs.values()
        if job.counts.get(TaskStatus.PENDING) or job.counts.get(TaskStatus.PIPELINED)
    ]
    reasons: dict[str, str] = {}
    kinds: dict[str, str] = {}
    waiting: list[Job] = []
    for job, never in zip(unplaced, never_reasons(ssn, unplaced), strict=True):
        if never is None:
            waiting.append(job)
        else:
            reasons[job.name], kinds[job.name] = never, PendingKind.NEVER.value
    # A job that can never run is ahead of nobody.
    orders = _waiting_orders(ssn, waiting)
    ahead = {name: rank for order in orders.values() for rank, name in enumerate(order)}
    shared = SharedReasons(share_reasons)
    waits = PendingKind.WAITS.value
    for job in waiting:
        name = job.name
        reasons[name] = pending_reason(ssn, job, ahead.get(name, 0), shared)
        kinds[name] = waits
    return CycleResult(
        binds=tuple(ssn.binds),
        evictions=tuple(ssn.evictions),
        pipelined=pipelined,
        pending_reasons=reasons,
        pending_kinds=kinds,
        queues={name: queue_share(ssn, name) for name in ssn.queues},
        phases=phases,
        rescheduling_ran=ssn.rescheduling_ran(),
        queue_orders=orders,
        work_conservation=_work_conservation(ssn, waiting, shared.notes),
    )


def _work_conservation(ssn: Session, waiting: list[Job], notes: dict[str, str]) -> WorkConservation:
    """The cycle record's count of the idle GPUs and of the jobs their reasons say are held
    back beside them (``notes``: the idle notes the reasons carry, so nothing is judged twice)."""

    held = []
    for job in waiting:
        if job.quota_task is not None:
            name = job.name
            found = notes.get(name)
            if found if found is not None else idle_note(ssn, job):
                held.append(name)
    return WorkConservation(
        idle_gpus=idle_gpus(ssn),
        held_with_idle_room=tuple(held),
        lent=tuple(ssn.cycle_state.get(LENT, list)),
        reclaim_waits=tuple(
            job.name
            for job in waiting
            if job.quota_task is None and job.unplaced and reclaim_note(ssn, job)
        ),
    )


def _waiting_orders(ssn: Session, waiting: list[Job]) -> dict[str, tuple[str, ...]]:
    """Per queue, its waiting jobs in the configured job order: the line a job's position and
    "N jobs come first" count in."""
    by_queue: dict[str, list[Job]] = {}
    for job in waiting:
        by_queue.setdefault(job.queue, []).append(job)
    return {
        queue: tuple(job.name for job in ssn.sorted_jobs(jobs)) for queue, jobs in by_queue.items()
    }


def _phase(job: Job) -> PodGroupPhase:
    # volcano framework/job_updater.go jobStatus: enough allocated pods make it Running;
    # otherwise anything but Inqueue falls back to Pending.
    allocated = job.ready_task_num()  # allocated statuses and succeeded
    if allocated >= job.min_available:
        return PodGroupPhase.RUNNING
    if job.phase is PodGroupPhase.INQUEUE:
        return PodGroupPhase.INQUEUE
    return PodGroupPhase.PENDING


def queue_share(ssn: Session, name: str) -> QueueShare:
    info = ssn.queues[name].info
    attr = ssn.queue_share(name)
    if attr is not None:
        return QueueShare(
            attr.deserved, attr.allocated, attr.request, info.guarantee, info.capability
        )
    allocated, request = Resources(), Resources()
    for job in ssn.jobs.values():
        if job.queue != name:
            continue
        for task in job.tasks.values():
            if task.status in ALLOCATED_STATUSES or task.status is TaskStatus.PIPELINED:
                allocated = allocated.add(task.resreq)
                request = request.add(task.resreq)
            elif task.status is TaskStatus.PENDING:
                request = request.add(task.resreq)
    return QueueShare(Resources(), allocated, request, info.guarantee, info.capability)


class SharedReasons:
    """What one close shares between its jobs' sentences (read at close, when nothing moves).

    ``needs``: "job needs ..." by pending requests (interned). ``blocks``: a quota-blocked
    job's quota sentence and idle note by everything they read of the job (``_quota_block``);
    None works out each job's on its own, the plain path the sharing is tested against.
    ``notes``: each quota-blocked job's idle note, for the work-conservation record."""

    __slots__ = ("needs", "blocks", "notes", "rules")

    def __init__(self, share: bool = True):
        self.needs: dict[tuple[object, ...], str] = {}
        # the quota's answer by (queue, id of an interned request): ``_quota_block``
        self.rules: dict[tuple[str, int], tuple[bool, str | None]] = {}
        self.blocks: dict[tuple[object, ...], tuple[str, str]] | None = {} if share else None
        self.notes: dict[str, str] = {}


def pending_reason(
    ssn: Session, job: Job, ahead: int = 0, shared: SharedReasons | None = None
) -> str:
    """One sentence a user can act on, for a job that waits (see ``verdict`` for "never"):
    which rule blocks with the numbers on both sides, what would free it, the jobs ahead."""
    shared = shared or SharedReasons()
    if job.queue not in ssn.queues:
        return f"queue '{job.queue}' does not exist"
    if job.counts.get(TaskStatus.PIPELINED) and not job.pending_tasks():
        waiting = [t for t in job.tasks.values() if t.status is TaskStatus.PIPELINED]
        nodes = sorted({t.node for t in waiting if t.node})
        return (
            f"pipelined onto {', '.join(nodes)}: waiting for evicted pods to release "
            "their resources"
        )
    if job.quota_task is not None:
        head, note = _quota_block(ssn, job, shared)
        shared.notes[job.name] = note
        return _joined(head, position(job, ahead)) if ahead else head
    if job.unplaced:
        # Before a later action's note (reclaim's "cannot reclaim"): the nodes are the block.
        return _joined(
            explain_unplaced(ssn, job),
            nodes_conclusion(ssn, job),
            reclaim_note(ssn, job),
            position(job, ahead),
        )
    if job.reason:
        return _joined(job.reason, position(job, ahead))
    if job.phase is PodGroupPhase.PENDING and "enqueue" in ssn.conf.actions:
        return f"waiting to be admitted to queue {job.queue}"
    if ahead:
        noun = "job" if ahead == 1 else "jobs"
        return f"waiting behind {ahead} higher-priority {noun} in queue {job.queue}"
    if "allocate" not in ssn.conf.actions:
        return "no allocate action is configured, so nothing places its pods"
    return "waiting for a scheduling cycle with room for its pods"


def _quota_block(ssn: Session, job: Job, shared: SharedReasons) -> tuple[str, str]:
    """(the quota sentence joined with the idle-GPU note, the note) of a quota-blocked job.

    Shared between jobs with equal keys: everything the two read of the job, namely its queue
    and tenant (whose running jobs a sentence names), the plugin's rule (or the job's own
    reason without one), its gang counts, its pending pods (requests in task order for "job
    needs"; request and scheduling signature in task order for the arithmetic, the offer and
    the idle fit). 8,500 quota-blocked jobs of a 1k/10k cycle come
    in a few hundred keys."""
    info = job.info
    queue = ssn.queues[info.queue]
    task = job.quota_task
    blocks = shared.blocks
    if blocks is None:
        rule = None if task is None else ssn.explain_allocatable(queue, task)
        quota = _quota_sentence(ssn, job, queue, rule, shared.needs)
        note = idle_note(ssn, job)
        return _joined(quota, note), note
    rule = None
    if task is not None:
        # Nothing moves at close, so the quota's answer is one per (queue, request); requests
        # are interned by the session (``Session._build``), so identity keys them.
        rules = shared.rules
        found_rule = rules.get((info.queue, id(task.resreq)))
        if found_rule is None:
            found_rule = rules[info.queue, id(task.resreq)] = ssn.quota_rule(queue, task)
        rule = found_rule[1] if found_rule[0] else ssn.worded_quota(queue, task, found_rule)
    # A pod's device request follows from its request and signature (``Session._build``).
    # Requests by identity, as above: the key hashes without ``Resources.__hash__``.
    signature = ssn.predicate_signature
    if len(job.tasks) == 1:  # most jobs: no list, no sort
        (only,) = job.tasks.values()
        alone = only.status is TaskStatus.PENDING and not only.best_effort
        requests: tuple[int, ...] = (id(only.resreq),) if alone else ()
        pods: tuple[object, ...] = ((id(only.resreq), signature(only)),) if alone else ()
    else:
        pending = [
            t for t in job.tasks.values() if t.status is TaskStatus.PENDING and not t.best_effort
        ]
        requests = tuple([id(t.resreq) for t in pending])
        pods = tuple([(id(t.resreq), signature(t)) for t in ssn.sorted_tasks(pending)])
    key = (
        info.queue,
        info.namespace,
        rule,
        job.reason if rule is None else None,
        job.min_available,
        job.ready,  # ready_task_num() and waiting_task_num(), without the calls
        job.counts.get(TaskStatus.PIPELINED, 0),
        requests,
        pods,
    )
    found = blocks.get(key)
    if found is None:
        quota = _quota_sentence(ssn, job, queue, rule, shared.needs)
        note = idle_note(ssn, job)
        found = blocks[key] = (_joined(quota, note), note)
    return found


def _quota_sentence(
    ssn: Session,
    job: Job,
    queue: Queue,
    rule: str | None,
    needs: dict[tuple[object, ...], str] | None,
) -> str:
    """The quota block from the final shares: the plugin's rule and numbers, then the
    arithmetic and what frees it."""
    head = job.reason if rule is None else f"{job_needs(job, needs)}; {rule}"
    return _joined(head, quota_conclusion(ssn, job, queue))


def _joined(*parts: str | None) -> str:
    return "; ".join([part for part in parts if part])
