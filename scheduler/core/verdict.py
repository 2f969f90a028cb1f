"""Never or not yet: whether a pending job can ever run as submitted, and what would free it.

Every pending job's reason has a kind (``types.PendingKind``):

- ``never``: no change of other jobs can let it run as submitted. Exactly these limits, each
  checked against the gang (its ``min_available`` pods, the cheapest ones resource by
  resource): its queue does not exist or is closed; it has fewer pods than ``min_available``;
  no node's selector, node affinity or taints let one of its pods in; no node's allocatable
  holds one pod; the nodes it may use cannot hold the gang at once; its queue's capability, or
  what other queues' guarantees and its borrowing limit leave it, is below the gang. Cordoned
  nodes count as nodes (an admin uncordons them), and nothing that depends on other jobs
  (deserved shares, free room, jobs ahead) is ever "never". The sentence names the limit, the
  numbers on both sides and what would let it run.
- ``waits``: everything else. A quota block gets the arithmetic (needed, left of the share,
  short by) and what frees it: the queue's running jobs' expected ends, or its share growing as
  other queues' demand falls, or the largest request that fits now; busy nodes get the earliest
  expected end of a running job on a node the job may use; both get the jobs ahead of it.

Pure: reads the session at the end of the cycle; the only times are the snapshot's.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterable

from scheduler.core.devices import devices_fit
from scheduler.core.reasons import (
    ANOTHER_TENANTS_JOB,
    amount,
    describe,
    free_now,
    job_called,
    queue_called,
)
from scheduler.core.resources import (
    CPU,
    GPU,
    GPU_TOLERANCE,
    PODS,
    Resources,
    tolerance,
)
from scheduler.core.session import Session
from scheduler.core.state import Job, Node, Queue, Task
from scheduler.core.types import ALLOCATED_STATUSES, TaskStatus

# per task shape: (nodes its rules allow, those whose allocatable holds one pod, refusals)
Fits = tuple[list[Node], list[Node], Counter[str]]
# (request, predicate signature): pods of one shape fit the same nodes
Shape = tuple[Resources, tuple[object, ...]]

NEVER_PREFIX = "can never run as submitted: "
_DONE = (TaskStatus.SUCCEEDED, TaskStatus.FAILED)
_UNJUDGED = object()  # not in the per-job memo yet (None is a verdict: it can run)


# never ----------------------------------------------------------------------------------------
def never_reason(ssn: Session, job: Job) -> str | None:
    """The sentence when ``job`` can never run as submitted, else None."""
    (found,) = never_reasons(ssn, (job,))
    return found


def never_reasons(ssn: Session, jobs: Iterable[Job]) -> list[str | None]:
    """``never_reason`` of each of ``jobs``, in order. Memoised per job shape (thousands of
    pending jobs share a few shapes) and per job: asked at open for every job with pending
    pods (the quotas' demand) and at close for every unplaced one, so the memos are fetched
    once per call, not once per job."""
    # Asked at open and again at close: no pod finishes in between and a pod's request, rules
    # and role stay, so the key, hence the answer, is the job's.
    by_job: dict[str, str | None] = ssn.cycle_state.get("verdict.never_by_job", dict)
    memo: dict[tuple[object, ...], str | None] = ssn.cycle_state.get("verdict.never", dict)
    queues = ssn.queues
    signature = ssn.predicate_signature
    out: list[str | None] = []
    for job in jobs:
        info = job.info
        if info.queue not in queues:
            out.append(
                f"{NEVER_PREFIX}queue '{info.queue}' does not exist; resubmit it to an "
                "existing queue"
            )
            continue
        if job.ready >= job.min_available:
            out.append(None)  # running: what still waits are elastic extras
            continue
        name = info.name
        found = by_job.get(name, _UNJUDGED)
        if found is _UNJUDGED:
            found = by_job[name] = _judged(ssn, job, memo, signature)
        out.append(found)  # type: ignore[arg-type]  # a sentence or None once judged
    return out


def _judged(
    ssn: Session,
    job: Job,
    memo: dict[tuple[object, ...], str | None],
    signature: Callable[[Task], tuple[object, ...]],
) -> str | None:
    """The verdict through the memo of job shapes. A request is keyed by its identity: the
    session interns requests (``Session._build``), so one vector is one object, and a key
    hashes without calling ``Resources.__hash__``."""
    info = job.info
    need = job.min_available - job.counts.get(TaskStatus.SUCCEEDED, 0)
    key: tuple[object, ...]
    if len(job.tasks) == 1:  # most jobs: a flat key, one element longer than a gang's
        (task,) = job.tasks.values()
        if task.status in _DONE:
            tasks = []
            key = (info.queue, info.namespace, need, job.min_available, ())
            pods: tuple[object, ...] = ()
        else:
            tasks = [task]
            key = (
                info.queue,
                info.namespace,
                need,
                job.min_available,  # the sentence names it when too few pods are left
                id(task.resreq),
                signature(task),
                task.info.role,
            )
    else:
        tasks = [t for t in job.tasks.values() if t.status not in _DONE]
        pods = tuple([(id(t.resreq), signature(t), t.info.role) for t in tasks])
        key = (info.queue, info.namespace, need, job.min_available, pods)
    try:
        return memo[key]  # one hash of the key: thousands of jobs, a few hundred keys
    except KeyError:
        if len(job.tasks) == 1 and tasks:
            pods = (key[4:],)  # the single pod's (request, signature, role)
        found = memo[key] = _never(ssn, job, ssn.queues[info.queue], tasks, need, pods)
        return found


def _never(
    ssn: Session, job: Job, queue: Queue, tasks: list[Task], need: int, pods: tuple[object, ...]
) -> str | None:
    """``pods``: each of ``tasks``' (request identity, signature, role), in order."""
    lead = _lead(job)
    if not queue.info.is_open:
        return (
            f"{NEVER_PREFIX}queue {queue.name} is closed; resubmit it to an open queue or ask "
            f"{lead} to reopen it"
        )
    if len(tasks) < need:
        return (
            f"{NEVER_PREFIX}it has {len(tasks)} {_pods(len(tasks))} left but needs "
            f"{need} running together (min_available {job.min_available}); lower min_available"
        )
    # What the nodes say depends on the pods and the gang only: one answer for every queue
    # and tenant (a synthetic 1k/10k cycle: 6 pod sets in 300 job shapes).
    by_pods: dict[tuple[object, ...], tuple[str | None, Resources | None]]
    by_pods = ssn.cycle_state.get("verdict.never_by_pods", dict)
    found = by_pods.get((need, pods))
    if found is None:
        found = by_pods[need, pods] = _nodes_verdict(ssn, tasks, need)
    sentence, gang = found
    if gang is None:
        return sentence
    return _quota_never(ssn, queue, gang, need, lead)


def _nodes_verdict(
    ssn: Session, tasks: list[Task], need: int
) -> tuple[str | None, Resources | None]:
    """(never's sentence, None) when no nodes can hold ``need`` of ``tasks`` at once, else
    (None, the least the gang asks for together), for the queue's quota to judge."""
    fits = _node_fits(ssn, tasks)
    placeable = [t for t in tasks if fits[_shape(ssn, t)][1]]
    if len(placeable) < need:
        return _no_node_sentence(ssn, tasks, fits), None
    gang = _gang_minimum(placeable, need)
    sentence = _packing_sentence(ssn, placeable, fits, need, gang)
    return (sentence, None) if sentence is not None else (None, gang)


def _lead(job: Job) -> str:
    tenant = job.info.namespace
    return f"a lead of {tenant}" if tenant and tenant != "default" else "a team lead"


def _pods(count: int) -> str:
    return "pod" if count == 1 else "pods"


def _shape(ssn: Session, task: Task) -> Shape:
    return (task.resreq, ssn.predicate_signature(task))


def _node_fits(ssn: Session, tasks: list[Task]) -> dict[Shape, Fits]:
    """Per task shape: (nodes its placement rules allow, of those the ones whose allocatable
    holds one pod, why the others refuse it). Memoised per shape for the session."""
    memo: dict[Shape, Fits] = ssn.cycle_state.get("verdict.node_fits", dict)
    out: dict[Shape, Fits] = {}
    for task in tasks:
        shape = _shape(ssn, task)
        if shape not in out:
            if shape not in memo:
                memo[shape] = _fits_of(ssn, task)
            out[shape] = memo[shape]
    return out


def _fits_of(ssn: Session, task: Task) -> Fits:
    lasting = ssn.lasting_filter()
    if lasting is None:
        # Only allocatable keeps a pod off a node, so nodes of one allocatable answer alike.
        groups = _by_allocatable(ssn)
        holds = {shape: task.resreq.less_equal(nodes[0].allocatable) for shape, nodes in groups}
        nodes = ssn.node_list
        held = list(nodes) if all(holds.values()) else [n for n in nodes if holds[n.shape]]
        return list(nodes), held, Counter()
    matching: list[Node] = []
    holding: list[Node] = []
    refusals: Counter[str] = Counter()
    for node in ssn.node_list:
        error = lasting(task, node) if lasting is not None else None
        if error is not None:
            refusals[error.reason] += 1
            continue
        matching.append(node)
        if task.resreq.less_equal(node.allocatable):
            holding.append(node)
    return matching, holding, refusals


def _by_allocatable(ssn: Session) -> list[tuple[tuple[tuple[str, float], ...], list[Node]]]:
    """The nodes grouped by allocatable (``Node.shape``), in order of first appearance."""

    def work_out() -> list[tuple[tuple[tuple[str, float], ...], list[Node]]]:
        groups: dict[tuple[tuple[str, float], ...], list[Node]] = {}
        for node in ssn.node_list:
            groups.setdefault(node.shape, []).append(node)
        return list(groups.items())

    found: list[tuple[tuple[tuple[str, float], ...], list[Node]]]
    found = ssn.cycle_state.get("verdict.by_allocatable", work_out)
    return found


def _no_node_sentence(ssn: Session, tasks: list[Task], fits: dict[Shape, Fits]) -> str:
    total = len(ssn.node_list)
    if not total:
        return f"{NEVER_PREFIX}the cluster has no nodes"
    for task in tasks:
        matching, holding, refusals = fits[_shape(ssn, task)]
        if holding:
            continue
        if not matching:
            reason, count = sorted(refusals.items(), key=lambda kv: (-kv[1], kv[0]))[0]
            if reason.startswith("node selector ") and count == total:
                selector = reason[len("node selector ") : -len(" does not match")]
                return (
                    f"{NEVER_PREFIX}no node matches its node selector {selector}; change or "
                    "drop the selector"
                )
            detail = "; ".join(
                f"{reason} on {count} of {total} nodes"
                for reason, count in sorted(refusals.items(), key=lambda kv: (-kv[1], kv[0]))
            )
            return f"{NEVER_PREFIX}no node lets its pods in ({detail}); change its placement rules"
        name, largest = _too_big(task.resreq, matching)
        size = describe(name, task.resreq.get(name))
        pods = f"each {task.info.role} pod" if task.info.role else "a pod of it"
        return (
            f"{NEVER_PREFIX}{pods} asks for {size} and the largest node it may use has "
            f"{describe(name, largest)} allocatable; ask for at most {describe(name, largest)} "
            "per pod (more, smaller pods)"
        )
    return f"{NEVER_PREFIX}not enough of its pods fit on any node"


def _too_big(request: Resources, nodes: list[Node]) -> tuple[str, float]:
    """The resource (GPUs first) no node holds, with the largest allocatable of it."""
    for name in _dimensions(request):
        largest = max(node.allocatable.get(name) for node in nodes)
        if request.get(name) > largest + tolerance(name):
            return name, largest
    return GPU, 0.0


def _dimensions(request: Resources) -> list[str]:
    names = [n for n in request.names() if request.get(n) > 0]
    return sorted(names, key=lambda n: (n != GPU, n == PODS, n))


def _gang_minimum(tasks: list[Task], need: int) -> Resources:
    """Per resource, the least any ``need`` of ``tasks`` can ask for together."""
    names = sorted({name for task in tasks for name in task.resreq.names()})
    values = {}
    for name in names:
        values[name] = sum(sorted(task.resreq.get(name) for task in tasks)[:need])
    return Resources(values)


def _packing_sentence(
    ssn: Session, tasks: list[Task], fits: dict[Shape, Fits], need: int, gang: Resources
) -> str | None:
    """Never when the nodes the pods may use cannot hold the gang at once."""
    shapes = {_shape(ssn, task) for task in tasks}
    if len(shapes) == 1:
        (shape,) = shapes
        request, holding = shape[0], fits[shape][1]
        capacity = _capacity(ssn, shape, request, holding)
        if capacity < need:
            name = _dimensions(request)[0]
            size = describe(name, request.get(name))
            return (
                f"{NEVER_PREFIX}its gang needs {need} pods of {size} running together and the "
                f"{len(holding)} {'node' if len(holding) == 1 else 'nodes'} it may use hold at "
                f"most {capacity} of them; lower min_available to {capacity} or ask for smaller "
                "pods"
            )
        return None
    usable = {id(node): node for shape in shapes for node in fits[shape][1]}
    room = Resources()
    for node in usable.values():
        room = room.add(node.allocatable)
    for name in _dimensions(gang):
        if gang.get(name) > room.get(name) + tolerance(name):
            return (
                f"{NEVER_PREFIX}its gang needs {describe(name, gang.get(name))} at once and "
                f"the nodes it may use have {describe(name, room.get(name))} in all; lower the "
                f"request to {describe(name, room.get(name))}"
            )
    return None


def _capacity(ssn: Session, shape: Shape, request: Resources, holding: list[Node]) -> int:
    """How many pods of ``request`` the ``holding`` nodes hold at once (by allocatable)."""
    memo: dict[Shape, int] = ssn.cycle_state.get("verdict.capacity", dict)
    if shape not in memo:
        by_kind = Counter(node.shape for node in holding)
        memo[shape] = sum(
            count * _copies(request, Resources(dict(kind))) for kind, count in by_kind.items()
        )
    return memo[shape]


def _copies(request: Resources, allocatable: Resources) -> int:
    counts = [
        math.floor(allocatable.get(name) / value + 1e-9)
        for name, value in request.explicit_items()
        if value > 0
    ]
    return min(counts) if counts else 0


def _quota_never(ssn: Session, queue: Queue, gang: Resources, need: int, lead: str) -> str | None:
    found = ssn.binding_quota(queue.name)
    if found is None:
        return None
    shares, attr = found
    for name in _dimensions(gang):
        wanted = gang.get(name)
        # A stated capability on the queue or any ancestor is a hard cap (a tenant's binds
        # all its queues).
        for level in _path(ssn, queue.name):
            cap = ssn.queues[level].info.capability.get(name)
            if wanted > cap + tolerance(name):
                owner = (
                    f"queue {queue.name}'s capability is"
                    if level == queue.name
                    else f"queue {queue.name} is in {level}, whose capability is"
                )
                return (
                    f"{NEVER_PREFIX}its gang needs {describe(name, wanted)} at once and "
                    f"{owner} {describe(name, cap)}; lower the request to "
                    f"{describe(name, cap)} or ask {lead} to raise the capability"
                )
        if shares.divides_tree:
            # In the tree the real capability also depends on the siblings' demand (a
            # guarantee holds back only what its queue asks for): not a "never" limit.
            continue
        ceiling = max(attr.real_capability.get(name), attr.guarantee.get(name))
        if wanted > ceiling + tolerance(name):
            return (
                f"{NEVER_PREFIX}its gang needs {describe(name, wanted)} at once and queue "
                f"{queue.name} may hold at most {describe(name, ceiling)} (the cluster less "
                f"other queues' guarantees, within its capability and borrowing limit); lower "
                f"the request to {describe(name, ceiling)} or ask {lead} to change the quotas"
            )
    return None


def _path(ssn: Session, queue: str) -> list[str]:
    """The queue, then its ancestors up to the root (queues the session knows)."""
    out, seen = [queue], {queue}
    parent = ssn.queues[queue].info.parent
    while parent and parent in ssn.queues and parent not in seen:
        out.append(parent)
        seen.add(parent)
        parent = ssn.queues[parent].info.parent
    return out


# waits ----------------------------------------------------------------------------------------
def quota_conclusion(ssn: Session, job: Job, queue: Queue) -> str:  # noqa: PLR0912 - one branch per kind of conclusion
    """``8 GPUs needed at once > 4 left of its deserved share (14 - 10 allocated): 4 GPUs short;
    it fits once job 12 ends (expected 14:05 UTC)`` or ``""`` when the numbers do not bind."""
    found = ssn.binding_quota(queue.name)
    if found is None:
        return ""
    shares, attr = found
    pending = ssn.sorted_tasks(
        [t for t in job.tasks.values() if t.status is TaskStatus.PENDING and not t.best_effort]
    )
    if not pending:
        return ""
    name = GPU if any(t.resreq.get(GPU) > 0 for t in pending) else CPU
    if job.ready_task_num() >= job.min_available:
        needed = 1
    else:
        needed = job.min_available - job.ready_task_num() - job.waiting_task_num()
    needed = min(max(needed, 1), len(pending))
    want = sum(t.resreq.get(name) for t in pending[:needed])
    # The level that binds: the queue, or (in a queue tree) the level on the way up with the
    # least left of its share; on a tie one at its stated capability (a tenant at its cap is
    # the block, as the rule above says), then the lowest.
    level, attr = queue.name, attr
    if shares.divides_tree:
        ranked = []
        for depth, node in enumerate(_path(ssn, queue.name)):
            above = shares.share(node)
            if above is None:
                continue
            share = above.deserved.get(name)
            left_here = share - above.allocated.get(name)
            if want > left_here + tolerance(name):
                capped = share >= ssn.queues[node].info.capability.get(name) - tolerance(name)
                ranked.append((round(left_here, 6), not capped, depth, node, above))
        if ranked:
            _, _, _, level, attr = min(ranked, key=lambda row: row[:3])
    bound = (attr.deserved if shares.binds_deserved else attr.real_capability).get(name)
    if bound == math.inf:
        return ""
    allocated = attr.allocated.get(name)
    left = max(bound - allocated, 0.0)
    short = want - left
    if short < tolerance(name):
        return ""  # another resource binds; the plugin's sentence names it
    label = (
        "capability"
        if bound >= ssn.queues[level].info.capability.get(name) - tolerance(name)
        else ("deserved share" if shares.binds_deserved else "real capability")
    )
    whose = "its" if level == queue.name else f"{level}'s"
    text = (
        f"{describe(name, want)} needed at once > {amount(name, left)} left of {whose} {label} "
        f"({amount(name, bound)} - {amount(name, allocated)} allocated): "
        f"{describe(name, short)} short"
    )
    holder = "its queue" if level == queue.name else level
    if want > bound + tolerance(name):
        # Even an idle queue would not hold it: only a larger share lets it start.
        more = describe(name, want - bound)
        if label == "deserved share":
            text += (
                f"; even with nothing else of {holder} running it needs a deserved share of "
                f"{amount(name, want)}, {more} more than now, which comes as other queues' "
                "demand falls"
            )
        else:
            text += (
                f"; even with nothing else of {holder} running it needs the {label} {more} higher"
            )
    elif frees := _queue_frees(ssn, job, _under(ssn, level), name, short):
        text += f"; {frees}"
    else:
        text += f"; it fits once the running pods of {holder} free {describe(name, short)}"
    return text + _offer(ssn, pending[0], name, left, want)


def _offer(ssn: Session, task: Task, name: str, left: float, want: float) -> str:
    """``; a request of at most 23 GPUs (8 GPUs per pod at most) would fit now``: what fits
    the quota left and the nodes, or "" (1 GPU left of a share is no offer while no node the
    job may use has a whole GPU free)."""
    largest, together = free_now(ssn, task, name)
    total = min(left, together)
    fit_now, per_pod = _largest_fit(name, total, want), _largest_fit(name, largest, want)
    if not (fit_now and per_pod):
        return ""
    if largest + tolerance(name) < total:
        fit_now += f" ({per_pod} per pod at most)"
    return f"; a request of at most {fit_now} would fit now"


def _largest_fit(name: str, left: float, want: float) -> str | None:
    if name == GPU:
        if want < 1:
            # a share of a card: the share that fits, as the nodes page shows it (0.75)
            share = math.floor(left * 100 + 1e-9) / 100
            return describe(GPU, share) if share > 0 else None
        whole = math.floor(left + 1e-9)
        return describe(GPU, whole) if whole >= 1 else None
    if name == CPU:
        cores = math.floor(left / 100 + 1e-9) * 100  # tenths of a core
        return describe(CPU, cores) if cores >= 100 else None
    return None


def _under(ssn: Session, level: str) -> frozenset[str]:
    """The queues at or below ``level`` (just ``level`` without a tree); once per level."""
    memo: dict[str, frozenset[str]] = ssn.cycle_state.get("verdict.under", dict)
    found = memo.get(level)
    if found is None:
        found = memo[level] = frozenset(q for q in ssn.queues if level in _path(ssn, q))
    return found


def _queue_frees(ssn: Session, job: Job, queues: frozenset[str], name: str, short: float) -> str:
    """Running jobs of ``queues`` whose expected ends free ``short`` of ``name``, soonest
    first."""
    holdings = _holdings(ssn, name)
    rows = sorted(row for queue in queues for row in holdings.get(queue, ()))
    freed, names = 0.0, []
    for end, other, amount_held in rows:
        freed += amount_held
        names.append(other)
        if freed >= short - tolerance(name):
            return f"it fits once {_jobs_end(ssn, job, names)} ({_expected(ssn, end)})"
    return ""


def _called(ssn: Session, job: Job, other: str) -> str:
    found = ssn.jobs.get(other)
    return job_called(job, found) if found is not None else ANOTHER_TENANTS_JOB


def _jobs_end(ssn: Session, job: Job, names: list[str]) -> str:
    """``job 12 ends``, ``jobs 12, 14 end``, ``job 12 and 2 jobs of other tenants end``."""
    own = [name for name in names if _called(ssn, job, name) != ANOTHER_TENANTS_JOB]
    parts = [f"job {own[0]}" if len(own) == 1 else f"jobs {', '.join(own)}"] if own else []
    others = len(names) - len(own)
    if others:
        parts.append(ANOTHER_TENANTS_JOB if others == 1 else f"{others} jobs of other tenants")
    return f"{' and '.join(parts)} {'ends' if len(names) == 1 else 'end'}"


def _holdings(ssn: Session, name: str) -> dict[str, list[tuple[float, str, float]]]:
    """Per queue, (expected end, job, amount of ``name`` held) of its running jobs with an
    expected end, soonest first; built once per session and resource (read at close, when
    nothing moves any more)."""
    memo: dict[str, dict[str, list[tuple[float, str, float]]]]
    memo = ssn.cycle_state.get("verdict.holdings", dict)
    if name not in memo:
        ends = _expected_ends(ssn)
        by_queue: dict[str, list[tuple[float, str, float]]] = {}
        for job_name, end in ends.items():
            job = ssn.jobs.get(job_name)
            if job is None:
                continue
            held = sum(
                t.resreq.get(name) for t in job.tasks.values() if t.status in ALLOCATED_STATUSES
            )
            if held > 0:
                by_queue.setdefault(job.queue, []).append((end, job_name, held))
        memo[name] = {queue: sorted(rows) for queue, rows in by_queue.items()}
    return memo[name]


def _expected_ends(ssn: Session) -> dict[str, float]:
    ends: dict[str, float] = ssn.cycle_state.get(
        "verdict.expected_ends", lambda: dict(ssn.snapshot.expected_ends)
    )
    return ends


def _expected(ssn: Session, end: float) -> str:
    if end < ssn.now:
        return f"expected by {_clock(ssn, end)}, overdue"
    return f"expected {_clock(ssn, end)}"


def _clock(ssn: Session, at: float) -> str:
    """An absolute time, so the sentence (stored when it changes) stays the same cycle after
    cycle: ``14:05 UTC``, with the date when it is not within a day of the snapshot."""
    fmt = "%H:%M UTC" if abs(at - ssn.now) < 86400 else "%Y-%m-%d %H:%M UTC"
    return time.strftime(fmt, time.gmtime(at))


def nodes_conclusion(ssn: Session, job: Job) -> str:
    """The earliest expected end of a running job holding what the job lacks on a node its
    largest pending pod may use."""
    pending = [t for t in job.tasks.values() if t.status is TaskStatus.PENDING]
    ends = _expected_ends(ssn)
    if not pending or not ends:
        return ""
    biggest = max(pending, key=lambda t: (t.resreq.get(GPU), t.resreq.get(CPU)))
    name = GPU if biggest.resreq.get(GPU) > 0 else CPU
    key = (ssn.predicate_signature(biggest), name, biggest.resreq.get(name))
    memo: dict[tuple[object, ...], list[tuple[float, str, str]]]
    memo = ssn.cycle_state.get("verdict.next_ends", dict)
    if key not in memo:
        found = []
        for node in ssn.node_list:
            if node.allocatable.get(name) < biggest.resreq.get(name) - tolerance(name):
                continue
            if ssn.predicate(biggest, node) is not None:
                continue
            for task in node.tasks.values():
                end = ends.get(task.job)
                if end is not None and task.status in ALLOCATED_STATUSES and task.resreq.get(name):
                    found.append((end, node.name, task.job))
        memo[key] = sorted(set(found))
    for end, host, other in memo[key]:
        if other != job.name:
            called = _called(ssn, job, other)
            return f"next to end on a node it may use: {called} on {host} ({_expected(ssn, end)})"
    return ""


# work conservation --------------------------------------------------------------------------
def idle_gpus(ssn: Session) -> float:
    """GPUs idle at the end of the cycle on the nodes that take pods (cordoned ones do not)."""

    def work_out() -> list[float]:
        return [sum(n.idle.get(GPU) for n in ssn.node_list if not n.info.unschedulable)]

    found: list[float] = ssn.cycle_state.get("verdict.idle_gpus", work_out)
    return found[0]


def _needed(ssn: Session, job: Job) -> list[Task]:
    """The pending pods the job needs placed next, in task order: what its gang still lacks
    for ``min_available`` (one elastic pod once it runs)."""
    pending = ssn.sorted_tasks(
        [t for t in job.tasks.values() if t.status is TaskStatus.PENDING and not t.best_effort]
    )
    if job.ready_task_num() >= job.min_available:
        needed = 1
    else:
        needed = job.min_available - job.ready_task_num() - job.waiting_task_num()
    return pending[: min(max(needed, 1), len(pending))]


def fits_idle_now(ssn: Session, job: Job) -> bool:
    """Would the pods the job needs next fit the idle resources together, now (first fit in
    node order, predicates passing)? Fractional GPUs count as the fraction they ask, per card.
    Memoised per shape of those pods for the session (read at close, when nothing moves)."""
    pods = _needed(ssn, job)
    if not pods or idle_gpus(ssn) < sum(t.resreq.get(GPU) for t in pods) - GPU_TOLERANCE:
        return False
    key = tuple((t.resreq, t.gpu, ssn.predicate_signature(t)) for t in pods)
    memo: dict[tuple[object, ...], bool] = ssn.cycle_state.get("verdict.fits_idle", dict)
    if key not in memo:
        memo[key] = _first_fit(ssn, pods)
    return memo[key]


def _first_fit(ssn: Session, pods: list[Task]) -> bool:
    left: dict[str, Resources] = {}
    for task in pods:
        for node in ssn.node_list:
            if node.info.unschedulable:
                continue
            room = left.get(node.name, node.idle)
            if not task.resreq.less_equal(room):
                continue
            if task.gpu is not None and not devices_fit(task.gpu, node.devices, False):
                continue
            if ssn.predicate(task, node) is not None:
                continue
            left[node.name] = room.sub(task.resreq)
            break
        else:
            return False
    return True


def idle_note(ssn: Session, job: Job) -> str:
    """For a job its quota holds back though it would fit the idle GPUs now: the idle GPUs,
    the rule that holds it, and whether the conf lends them. ``""`` otherwise."""
    memo: dict[str, str] = ssn.cycle_state.get("verdict.idle_note", dict)
    if job.name not in memo:
        memo[job.name] = _idle_note(ssn, job)
    return memo[job.name]


def _idle_note(ssn: Session, job: Job) -> str:
    queue = ssn.queues.get(job.queue)
    if job.quota_task is None or queue is None or queue.children:
        return ""
    if not fits_idle_now(ssn, job):
        return ""
    head = f"GPUs idle: {amount(GPU, idle_gpus(ssn))}, enough for it now"
    request = Resources()
    for task in _needed(ssn, job):
        request = request.add(task.resreq)
    if not ssn.within_limits(queue, request):
        return (
            f"{head}, but beyond what queue {job.queue} may hold (its capability, borrowing "
            "limit, or what other queues' guarantees keep for them)"
        )
    if ssn.lends():
        # Allocate lends on its own node order and only to admitted jobs: this one was not
        # reached this cycle, and the next one tries again.
        return (
            f"{head}; held back by the deserved share of queue {job.queue} until idle capacity "
            "is lent to it (lendIdle), which the next cycle tries again"
        )
    return (
        f"{head}; held back only by the deserved share of queue {job.queue} (this conf lends no "
        "idle capacity: proportion's lendIdle is off)"
    )


# reclaim that waits ---------------------------------------------------------------------------
def reclaim_note(ssn: Session, job: Job) -> str:
    """For a job the nodes hold back while its queue is below its share and another queue is
    above its own: why reclaim takes nothing for it, and what releases it. ``""`` when no queue
    is above its share (nothing to reclaim) or the job's own queue is."""
    memo: dict[str, str] = ssn.cycle_state.get("verdict.reclaim_note", dict)
    if job.name not in memo:
        memo[job.name] = _reclaim_note(ssn, job)
    return memo[job.name]


def _reclaim_note(ssn: Session, job: Job) -> str:
    queue = ssn.queues.get(job.queue)
    pods = _needed(ssn, job)
    if queue is None or not pods or ssn.overused(queue):
        return ""
    over = _overused_holders(ssn, job.queue)
    if not over:
        return ""
    task = max(pods, key=lambda t: (t.resreq.get(GPU), t.resreq.get(CPU)))
    other, held, share = over[0]
    called = queue_called(ssn, job, other)
    head = (
        f"{called} holds {describe(GPU, held)} against a deserved share of "
        f"{amount(GPU, share)}, but reclaim takes nothing from it for this job: "
    )
    # The block depends on the two queues and the pod, not on which job of a queue asks.
    key = (job.queue, other, task.resreq, task.priority, ssn.predicate_signature(task))
    blocks: dict[tuple[object, ...], str] = ssn.cycle_state.get("verdict.reclaim_block", dict)
    if key not in blocks:
        blocks[key] = _reclaim_block(ssn, job, task, other)
    why = blocks[key]
    ends = _queue_frees(ssn, job, frozenset({other}), GPU, task.resreq.get(GPU))
    return f"{head}{why}; {ends or f'it starts when running pods of {called} end'}"


def _overused_holders(ssn: Session, mine: str) -> list[tuple[str, float, float]]:
    """(queue, GPUs held, deserved GPUs) of the leaf queues other than ``mine`` above their
    share, most above first (worked out once per session, at close)."""

    def work_out() -> list[tuple[str, float, float]]:
        rows = []
        for name, queue in ssn.queues.items():
            if queue.children or not ssn.overused(queue):
                continue
            attr = ssn.queue_share(name)
            if attr is None:
                continue
            held, share = attr.allocated.get(GPU), attr.deserved.get(GPU)
            if held > share + GPU_TOLERANCE:
                rows.append((held - share, name, held, share))
        rows.sort(key=lambda row: (-row[0], row[1]))
        return [(name, held, share) for _, name, held, share in rows]

    found: list[tuple[str, float, float]] = ssn.cycle_state.get("verdict.overused", work_out)
    return [row for row in found if row[0] != mine]


def _reclaim_block(ssn: Session, job: Job, task: Task, other: str) -> str:
    """The first rule, in the order reclaim applies them, that leaves ``other``'s pods where
    they are for ``task``."""
    if "reclaim" not in ssn.conf.actions:
        return "no reclaim action is configured"
    owner = ssn.queues[other]
    called = queue_called(ssn, job, other)
    if not owner.info.reclaimable:
        return f"{called} is not reclaimable"
    running = [t for t in _running(ssn).get(other, ()) if t.info.preemptable]
    if not running:
        return f"none of the running pods of {called} may be preempted"
    if not ssn.preemptive(ssn.queues[job.queue], task):
        return f"queue {job.queue} would go above its own deserved share"
    victims = ssn.reclaimable(task, running)
    if victims:
        return _gang_or_room(ssn, job, task, victims)
    attr = ssn.queue_share(other)
    if attr is not None and not any(
        attr.guarantee.less_equal(attr.allocated.sub(t.resreq), missing=0) for t in running
    ):
        return (
            f"taking any of its pods would leave it below its guarantee of "
            f"{describe(GPU, attr.guarantee.get(GPU))}"
        )
    return (
        f"the quota allows none of its pods as victims (in a queue tree, {job.queue}'s side is "
        "not below its deserved share where the two queues' paths part)"
    )


def _running(ssn: Session) -> dict[str, list[Task]]:
    """Per queue, its Running pods (read at close; built once)."""

    def work_out() -> dict[str, list[Task]]:
        out: dict[str, list[Task]] = {}
        for job in ssn.jobs.values():
            for task in job.tasks.values():
                if task.status is TaskStatus.RUNNING:
                    out.setdefault(job.queue, []).append(task)
        return out

    found: dict[str, list[Task]] = ssn.cycle_state.get("verdict.running", work_out)
    return found


def _gang_or_room(ssn: Session, job: Job, task: Task, victims: list[Task]) -> str:
    from scheduler.core.actions._victims import eviction_units

    by_node: dict[str, list[Task]] = {}
    for victim in victims:
        if victim.node is not None:
            by_node.setdefault(victim.node, []).append(victim)
    need = task.resreq.get(GPU)
    for host, here in sorted(by_node.items()):
        node = ssn.nodes.get(host)
        if node is None:
            continue
        units = eviction_units(ssn, ssn.victim_order(here, task))
        freed = sum(t.resreq.get(GPU) for unit in units for t in unit)
        if node.future_idle().get(GPU) + freed >= need - GPU_TOLERANCE and units:
            return f"reclaim could make room on {host}; it tries again next cycle"
    gangs = sorted(
        {
            v.job
            for v in victims
            if ssn.jobs[v.job].ready_task_num() <= ssn.jobs[v.job].min_available
        }
    )
    if gangs:
        gang = ssn.jobs[gangs[0]]
        held = sum(t.resreq.get(GPU) for t in gang.tasks.values() if t.status in ALLOCATED_STATUSES)
        hosts = {t.node for t in gang.tasks.values() if t.status in ALLOCATED_STATUSES}
        named = job_called(job, gang)
        gang_text = f"gang {gang.name}" if named != ANOTHER_TENANTS_JOB else f"{named}'s gang"
        return (
            f"the pods that would make room belong to {gang_text} ({describe(GPU, held)} on "
            f"{len(hosts)} {'node' if len(hosts) == 1 else 'nodes'}), and reclaim evicts a gang "
            f"only whole, from the one node it makes room on for a pod of {describe(GPU, need)}"
        )
    return (
        f"no node where its pods and the idle GPUs together would hold a pod of "
        f"{describe(GPU, need)}"
    )


def position(job: Job, ahead: int) -> str:
    if not ahead:
        return ""
    noun = "job" if ahead == 1 else "jobs"
    return f"{ahead} {noun} of queue {job.queue} {'comes' if ahead == 1 else 'come'} first"


__all__ = [
    "NEVER_PREFIX",
    "fits_idle_now",
    "idle_gpus",
    "idle_note",
    "reclaim_note",
    "never_reason",
    "never_reasons",
    "nodes_conclusion",
    "position",
    "quota_conclusion",
]
