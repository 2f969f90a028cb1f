"""Sentences that tell a user why a job is still pending, with numbers they can act on."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from scheduler.core.resources import CPU, GPU, MEMORY, PODS, Resources, tolerance

if TYPE_CHECKING:  # type-only: reasons sit below the session and the state
    from scheduler.core.session import Session
    from scheduler.core.state import Job, Node, Task

_GIB = 1024**3


ANOTHER_TENANTS_JOB = "a job of another tenant"


def job_called(reader: Job, other: Job) -> str:
    """How a sentence ``reader``'s submitter reads names ``other``: ``job 12`` if it is of the
    same tenant, else only that it is another tenant's. The portal gives each job its tenant
    as namespace (portal.scheduling.mapping); reasons and eviction sentences reach the job's
    submitter and its pods' Events, and tell nothing of other tenants' jobs. Upstream's
    reasons name no other job at all."""
    if other.info.namespace == reader.info.namespace:
        return f"job {other.name}"
    return ANOTHER_TENANTS_JOB


ANOTHER_TENANTS_QUEUE = "a queue of another tenant"


def queue_called(ssn: Session, reader: Job, queue: str) -> str:
    """``queue nlp-train`` if ``queue`` is of ``reader``'s tenant (its jobs' namespace, as the
    portal sets it), else only that it is another tenant's (see `job_called`)."""
    if _queue_tenants(ssn).get(queue) == reader.info.namespace:
        return f"queue {queue}"
    return ANOTHER_TENANTS_QUEUE


def _queue_tenants(ssn: Session) -> dict[str, str]:
    """Each queue's tenant, from its jobs (a queue is one tenant's); built once per session."""

    def work_out() -> dict[str, str]:
        return {job.queue: job.info.namespace for job in ssn.jobs.values()}

    found: dict[str, str] = ssn.cycle_state.get("reasons.queue_tenants", work_out)
    return found


def describe(name: str, value: float) -> str:
    """``8 GPUs``, ``12 cpu``, ``96 GiB memory``, ``3 pods``, ``2 nvidia.com/A100``."""
    if value == math.inf:
        return f"unlimited {name}"
    if name == GPU:
        count = _num(value)
        return f"{count} GPU" if count == "1" else f"{count} GPUs"
    if name == CPU:
        return f"{_num(value / 1000)} cpu"
    if name == MEMORY:
        return f"{_num(value / _GIB)} GiB memory"
    if name == PODS:
        return f"{_num(value)} pods"
    return f"{_num(value)} {name}"


def amount(name: str, value: float) -> str:
    """The bare number in the unit ``describe`` uses."""
    if name == CPU:
        return _num(value / 1000)
    if name == MEMORY:
        return _num(value / _GIB)
    return _num(value)


def unit(name: str) -> str:
    return {GPU: "GPUs", CPU: "cpu", MEMORY: "GiB memory"}.get(name, name)


def _num(value: float) -> str:
    if value == int(value):
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")


def capability_text(name: str, allocated: float, capability: float) -> str:
    """``at capability 8/8 GPUs``, or ``capped at 8 GPUs with 5 allocated`` while some of it
    is left: the share has reached the capability, the allocation has not ("at capability
    5/8" read as a contradiction)."""
    if allocated >= capability - 0.1:
        return f"at capability {amount(name, allocated)}/{amount(name, capability)} {unit(name)}"
    return f"capped at {describe(name, capability)} with {amount(name, allocated)} allocated"


def first_short_dimension(need: Resources, have: Resources, req: Resources) -> str | None:
    """The first resource (GPU first) where ``need`` exceeds ``have`` among those ``req`` asks for."""
    names = [n for n in req.names() if req.get(n) > 0]
    names.sort(key=lambda n: (n != GPU, n == PODS, n))
    for name in names:
        if need.get(name) > have.get(name) + tolerance(name):
            return str(name)
    return None


def _free_blocks(ssn: Session, task: Task, name: str, size: float) -> tuple[int, str]:
    """(usable nodes with ``size`` free, largest smaller block) for ``task``'s kind of pod.

    Only nodes the task may use (predicates pass) count. Memoised: called at close only.
    """
    key = (ssn.predicate_signature(task), name, size)
    memo: dict[tuple[object, str, float], tuple[int, str]]
    memo = ssn.cycle_state.get("reasons.free_blocks", dict)
    if key not in memo:
        usable = [n for n in ssn.node_list if ssn.predicate(task, n) is None]
        # A share of a card needs that much on one card, not in sum over the node's cards.
        free = sorted((_free_of(n, task, name) for n in usable), reverse=True)
        holding = sum(1 for value in free if value >= size - tolerance(name))
        others = [value for value in free if value < size - tolerance(name)]
        memo[key] = (holding, amount(name, others[0]) if others else "0")
    return memo[key]


def free_now(ssn: Session, task: Task, name: str) -> tuple[float, float]:
    """(the most of ``name`` one node ``task`` may use has free, the free of all of them
    together): the largest pod of its kind and the most of it that fit now. Memoised like
    _free_blocks."""
    key = (ssn.predicate_signature(task), name)
    memo: dict[tuple[object, str], tuple[float, float]]
    memo = ssn.cycle_state.get("reasons.free_now", dict)
    if key not in memo:
        free = [_free_of(n, task, name) for n in ssn.node_list if ssn.predicate(task, n) is None]
        memo[key] = (max(free, default=0.0), sum(free))
    return memo[key]


def free_text(name: str, value: float) -> str:
    """``8 free GPUs``, ``1 free GPU``, ``4 free cpu``."""
    text = amount(name, value)
    return f"{text} free {'GPU' if name == GPU and text == '1' else unit(name)}"


def _free_of(node: Node, task: Task, name: str) -> float:
    """What the node has free of ``name`` for ``task`` once releasing pods leave: for a share
    of a card, the most any one card has left."""
    value = node.future_idle().get(name)
    need = task.gpu
    if name != GPU or need is None or not need.shared or node.devices is None:
        return value
    return min(value, node.devices.largest_share(future_only=True))


def explain_unplaced(ssn: Session, job: Job) -> str:
    """Why a job found no room, from the nodes' state at the end of the cycle."""
    from scheduler.core.types import TaskStatus

    total_nodes = len(ssn.node_list)
    if not total_nodes:
        return "the cluster has no nodes"
    failures: dict[str, int] = {}
    for per_task in job.fit_errors.values():
        for reason, count in per_task.items():
            failures[reason] = max(failures.get(reason, 0), count)
    for reason, count in sorted(failures.items()):
        if reason.startswith("node selector ") and count == total_nodes:
            selector = reason[len("node selector ") : -len(" does not match")]
            return f"no node matches node selector {selector}"
    blocking = {r: c for r, c in failures.items() if r != "insufficient resources"}
    if blocking and sum(blocking.values()) >= total_nodes:
        top = sorted(blocking.items(), key=lambda kv: (-kv[1], kv[0]))
        detail = "; ".join(f"{count} node(s): {reason}" for reason, count in top)
        return f"no node can take its pods ({detail})"
    pending = [t for t in job.tasks.values() if t.status is TaskStatus.PENDING]
    if not pending:
        return "waiting for its pods to be placed"
    needed = max(job.min_available - job.ready_task_num() - job.waiting_task_num(), 1)
    needed = min(needed, len(pending))
    biggest = max(pending, key=lambda t: (t.resreq.get(GPU), t.resreq.get(CPU)))
    request = biggest.resreq
    name = GPU if request.get(GPU) > 0 else CPU
    size = request.get(name)
    holding, largest = _free_blocks(ssn, biggest, name, size)
    noun = "node has" if holding == 1 else "nodes have"
    if job.ready_task_num() >= job.min_available:
        # The gang already runs; these are its elastic extras.
        count = len(pending)
        pods, verb = ("pod", "waits") if count == 1 else ("pods", "wait")
        head = f"{count} more {pods} of {describe(name, size)} {verb}"
    else:
        label = "gang needs" if job.min_available > 1 else "job needs"
        head = f"{label} {needed} {'pod' if needed == 1 else 'pods'} of {describe(name, size)}"
    sentence = (
        f"{head}; {holding} {noun} {free_text(name, size)} (largest other free block: {largest})"
    )
    if holding >= needed:
        # Enough blocks of the main resource: another resource is what is short.
        short = [
            n
            for n in request.names()
            if request.get(n) > 0
            and n != name
            and not any(
                nd.future_idle().get(n) >= request.get(n) - tolerance(n) for nd in ssn.node_list
            )
        ]
        if short:
            sentence += f", but no node has {describe(short[0], request.get(short[0]))} free"
    return sentence
