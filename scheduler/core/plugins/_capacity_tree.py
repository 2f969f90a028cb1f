"""capacity with ``enableHierarchy``: Volcano's hierarchical queues, kept upstream-exact.

Re-implements volcano-sh/volcano pkg/scheduler/plugins/capacity/capacity.go (commit
ed72c7c8) ``buildHierarchicalQueueAttrs``, ``checkHierarchicalQueue`` and the hooks it
registers with hierarchy on:

- every queue hangs under its ``parent``, or under the queue named ``root``; without a root
  queue, with a parent that does not exist, a cycle, or a job in a queue that has children,
  the plugin is not ready and admits, allocates and reclaims nothing (``readyToSchedule``);
- allocated, request, inqueue and elastic roll up to every ancestor; the root's capability is
  unlimited unless stated, its guarantee and deserved are its children's sums;
- a child's deserved is at least its guarantee; an unstated capability (cpu or memory not
  above zero, a scalar not named) is inherited from the parent; real capability = parent's
  real capability - the children's guarantees + its own guarantee, within its capability;
- allocate and enqueue check the queue and every ancestor against the real capability, and
  only leaf queues run jobs;
- queue order: priority, then leaves before parents, then the share of the two ancestors just
  below where the queues' paths meet (a queue with a deserved share first on a tie); victims
  from queues that share a deeper ancestor with the reclaimer go first (VictimQueueOrderFn);
- reclaim with ``ancestorReclaimLevel`` (plugin argument, default 0): a queue below its
  deserved share may reclaim, or one whose ancestor up to that level is; a victim's queue must
  keep its guarantee and be above its deserved share on a resource the victim uses (or the
  victim uses nothing its deserved share names), and so must each of its ancestors up to that
  level that the reclaimer does not share.

Resource vectors follow upstream's ``api.Resource``: cpu and memory always exist (0 when not
stated) and a scalar exists only when named, which matters where upstream asks whether a
deserved share names a resource. ``pods`` is ignored where upstream ignores it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.core.hooks import EventHandler
from scheduler.core.plugins._quota import (
    QueueAttr,
    account_job,
    cluster_total,
    demand_exclusions,
    exclude_never_runnable,
    new_attr,
)
from scheduler.core.plugins._tree import tree_problem
from scheduler.core.reasons import capability_text, describe, first_short_dimension
from scheduler.core.resources import (
    CPU,
    INFINITY,
    MEMORY,
    MIN_RESOURCE,
    PODS,
    Resources,
    le_named,
)
from scheduler.core.session import Session
from scheduler.core.state import Job, Queue, Task
from scheduler.core.types import QueueInfo, TaskStatus, Vote

ROOT = "root"
RECLAIM_LEVEL = "ancestorReclaimLevel"

Dims = dict[str, float]  # an upstream Resource: cpu and memory always, scalars when named


@dataclass(slots=True)
class Node:
    name: str
    info: QueueInfo
    deserved: Dims
    guarantee: Dims
    capability: Dims
    ancestors: tuple[str, ...] = ()  # root first, parent last
    children: list[str] = field(default_factory=list)
    real: Dims = field(default_factory=dict)
    allocated: Dims = field(default_factory=dict)
    request: Dims = field(default_factory=dict)
    inqueue: Dims = field(default_factory=dict)
    elastic: Dims = field(default_factory=dict)
    share: float = 0.0

    def update_share(self) -> None:
        """updateQueueAttrShare: 1 for a queue without a deserved share (best effort)."""
        if _is_empty(self.deserved):
            self.share = 1.0
            return
        share = 0.0
        for name in _names(self.deserved):
            deserved, allocated = self.deserved.get(name, 0.0), self.allocated.get(name, 0.0)
            if deserved == 0:
                ratio = 0.0 if allocated == 0 else 1.0
            else:
                ratio = allocated / deserved
            share = max(share, ratio)
        self.share = share


class CapacityTree:
    """The hooks of a hierarchical capacity session (registered under the plugin's name)."""

    def __init__(self, ssn: Session, plugin_name: str, arguments: dict[str, Any]):
        self.ssn = ssn
        self.name = plugin_name
        level = arguments.get(RECLAIM_LEVEL, 0)
        valid = isinstance(level, int | float) and not isinstance(level, bool)
        self.level = int(level) if valid and level > 0 else 0
        self.exclude_never = exclude_never_runnable(arguments)
        self.cluster = cluster_total(ssn)
        self.nodes: dict[str, Node] = {
            name: Node(
                name,
                queue.info,
                _dims(queue.info.deserved or Resources()),
                _dims(queue.info.guarantee),
                _dims(queue.info.capability),
            )
            for name, queue in ssn.queues.items()
        }
        self.ready = self._build()

    # building -----------------------------------------------------------------------------------
    def _build(self) -> bool:
        infos = {name: node.info for name, node in self.nodes.items()}
        if ROOT not in infos or tree_problem(infos, ROOT) is not None:
            return False
        for name in sorted(self.nodes):
            self.nodes[name].ancestors = self._ancestors(name)
            if name != ROOT:
                parent = self.nodes[name].info.parent or ROOT
                self.nodes[parent].children.append(name)
        if not self._account():
            return False
        root = self.nodes[ROOT]
        if _is_empty(root.capability):
            root.capability = {CPU: INFINITY, MEMORY: INFINITY}
            root.capability.update(
                {n: INFINITY for n in self.cluster.explicit() if n not in root.capability}
            )
        root.real = dict(root.capability)
        self._check(root)
        for node in self.nodes.values():
            node.update_share()
        return True

    def _ancestors(self, name: str) -> tuple[str, ...]:
        chain: list[str] = []
        node = self.nodes[name]
        while node.name != ROOT:
            parent = node.info.parent or ROOT
            chain.append(parent)
            node = self.nodes[parent]
        return tuple(reversed(chain))

    def _account(self) -> bool:
        ssn = self.ssn
        for job in ssn.jobs.values():
            node = self.nodes.get(job.queue)
            if node is None:
                continue
            if node.children:
                return False  # upstream: a job in a queue that is not a leaf stops the plugin
            attr = new_attr(ssn.queues[job.queue])
            account_job(attr, job)
            for target in (node, *(self.nodes[a] for a in node.ancestors)):
                target.allocated = _add(target.allocated, _dims(attr.allocated))
                target.request = _add(target.request, _dims(attr.request))
                target.inqueue = _add(target.inqueue, _dims(attr.inqueue))
                target.elastic = _add(target.elastic, _dims(attr.elastic))
        return True

    def _check(self, node: Node) -> None:
        """checkHierarchicalQueue: deserved floors, inherited capabilities, real capabilities."""
        total_guarantee: Dims = {CPU: 0.0, MEMORY: 0.0}
        total_deserved: Dims = {CPU: 0.0, MEMORY: 0.0}
        children = [self.nodes[c] for c in node.children]
        for child in children:
            child.deserved = _max(child.deserved, child.guarantee)
            total_deserved = _add(total_deserved, child.deserved)
            total_guarantee = _add(total_guarantee, child.guarantee)
            for name in (CPU, MEMORY):
                if child.capability.get(name, 0.0) <= 0:
                    child.capability[name] = node.capability.get(name, 0.0)
            for name, value in node.capability.items():
                if name not in (CPU, MEMORY) and name not in child.capability:
                    child.capability[name] = value
        if node.name == ROOT:
            node.guarantee, node.deserved = total_guarantee, total_deserved
        for child in children:
            real = _add(_exceeded(node.real, total_guarantee), child.guarantee)
            child.real = _min_within(real, child.capability)
        for child in children:
            self._check(child)

    def _settle(self) -> None:
        """Leave the jobs that can never run out of the requests (``excludeNeverRunnable``,
        default true; our departure). The request decides nothing in capacity: it is what the
        queues report."""
        for name in sorted(demand_exclusions(self.ssn, self.exclude_never)):
            job = self.ssn.jobs[name]
            node = self.nodes.get(job.queue)
            if node is None:
                continue
            pending = Resources()
            for task in job.tasks.values():
                if task.status is TaskStatus.PENDING:
                    pending = pending.add(task.resreq)
            for target in (node, *(self.nodes[a] for a in node.ancestors)):
                target.request = _sub(target.request, _dims(pending))

    def register(self) -> None:
        ssn = self.ssn
        ssn.add_open_step(self._settle)
        ssn.add_queue_order_fn(self.name, self.queue_order)
        ssn.add_victim_queue_order_fn(self.name, self.victim_queue_order)
        # Allocatable is the real capability of the queue and its ancestors, a hard limit.
        ssn.add_allocatable_fn(
            self.name, self.allocatable, explain=self.explain, within_limits=self.within_limits
        )
        ssn.add_preemptive_fn(self.name, self.preemptive)
        ssn.add_reclaimable_fn(self.name, self.reclaimable)
        ssn.add_job_enqueueable_fn(self.name, self.enqueueable)
        ssn.add_job_enqueued_fn(self.name, self.enqueued)
        ssn.add_event_handler(EventHandler(self._on_allocate, self._on_deallocate))

    # order --------------------------------------------------------------------------------------
    def queue_order(self, left: Queue, right: Queue) -> int:
        lp, rp = left.info.priority, right.info.priority
        if lp != rp:
            return -1 if lp > rp else 1
        lnode, rnode = self.nodes[left.name], self.nodes[right.name]
        lleaf, rleaf = not lnode.children, not rnode.children
        if lleaf != rleaf:
            return -1 if lleaf else 1
        if not lleaf:
            return _compare_share(lnode, rnode)
        level = _common_level(lnode, rnode)
        lname = lnode.ancestors[level + 1] if level + 1 < len(lnode.ancestors) else lnode.name
        rname = rnode.ancestors[level + 1] if level + 1 < len(rnode.ancestors) else rnode.name
        return _compare_share(self.nodes[lname], self.nodes[rname])

    def victim_queue_order(self, left: Queue, right: Queue, preemptor: Queue) -> int:
        """Victims from the queue that shares a deeper ancestor with the preemptor first."""
        mine = self.nodes[preemptor.name]
        lcommon = _common_level(self.nodes[left.name], mine)
        rcommon = _common_level(self.nodes[right.name], mine)
        if lcommon == rcommon:
            return 0
        return -1 if lcommon > rcommon else 1

    # allocation ---------------------------------------------------------------------------------
    def allocatable(self, queue: Queue, task: Task) -> bool:
        return self.within_limits(queue, task.resreq)

    def within_limits(self, queue: Queue, request: Resources) -> bool:
        if not queue.info.is_open or not self.ready or queue.children:
            return False
        return self._blocking(queue.name, request) is None

    def _blocking(self, name: str, resreq: Resources) -> str | None:
        """checkQueueAllocatableHierarchically: the queue itself, then its ancestors upwards."""
        node = self.nodes[name]
        request = _dims(resreq)
        for check in (name, *reversed(node.ancestors)):
            target = self.nodes[check]
            if not _fits_within(_add(target.allocated, request), target.real, request):
                return check
        return None

    def enqueueable(self, job: Job) -> int:
        if not self.ready or job.queue not in self.nodes:
            return Vote.REJECT
        node = self.nodes[job.queue]
        if node.children:
            return Vote.REJECT
        queue = self.ssn.queues[job.queue]
        if not queue.info.is_open:
            job.reason = f"queue {queue.name} is closed"
            return Vote.REJECT
        minimum = job.info.min_resources
        if minimum is None:
            return Vote.PERMIT
        request = _dims(minimum)
        for check in (job.queue, *reversed(node.ancestors)):
            target = self.nodes[check]
            needed = _sub(_add(_add(request, target.allocated), target.inqueue), target.elastic)
            if not _fits_within(needed, target.real, request):
                short = first_short_dimension(_res(needed), _res(target.real), minimum) or "gpu"
                where = "" if check == job.queue else f" in {check}"
                job.reason = (
                    f"queue {job.queue} cannot admit the job{where}: its minimum of "
                    f"{describe(short, minimum.get(short))} would exceed the capability of "
                    f"{describe(short, target.real.get(short, 0.0))}"
                )
                return Vote.REJECT
        return Vote.PERMIT

    def enqueued(self, job: Job) -> None:
        node = self.nodes.get(job.queue)
        if node is None or job.info.min_resources is None:
            return
        minimum = _dims(job.info.min_resources)
        for target in (node, *(self.nodes[a] for a in node.ancestors)):
            target.inqueue = _add(target.inqueue, minimum)

    # reclaim ------------------------------------------------------------------------------------
    def preemptive(self, queue: Queue, task: Task) -> bool:
        if not self.ready or not queue.info.is_open:
            return False
        node = self.nodes[queue.name]
        request = _dims(task.resreq)
        future = _add(node.allocated, request)
        if not _fits_within(future, node.real, request):
            return False
        if _le_partly_zero_filtered(future, node.deserved, request):
            return True
        for level in range(1, self.level + 1):
            ancestor = _ancestor_at(node, level)
            if ancestor is None or ancestor == ROOT:
                continue
            target = self.nodes[ancestor]
            if _le_partly_zero_filtered(_add(target.allocated, request), target.deserved, request):
                return True
        return False

    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> tuple[list[Task], int]:
        if not self.ready:
            return [], Vote.REJECT
        jobs = self.ssn.jobs
        mine = self.nodes.get(jobs[reclaimer.job].queue)
        if mine is None:
            return [], Vote.REJECT
        wanted = _dims(reclaimer.resreq)
        victims: list[Task] = []
        allocations: dict[str, Dims] = {}
        for task in candidates:
            node = self.nodes.get(jobs[task.job].queue)
            if node is None:
                continue
            used = _dims(task.resreq)
            if not _intersection(used, wanted, ignore_pods=True):
                continue  # shouldSkipReclaimee
            allocated = allocations.setdefault(node.name, dict(node.allocated))
            if not _le_zero(node.guarantee, _sub(allocated, used)):
                continue
            if not _intersection(used, node.deserved):
                # isImmediateVictim, unless both share an ancestor within the level and the
                # reclaimer's deserved share names nothing it asks for
                if (
                    self.level
                    and self._share_ancestor(mine, node)
                    and not _intersection(wanted, mine.deserved)
                ):
                    continue
            elif not _greater_partly_relevant(allocated, node.deserved, used):
                continue
            touched = [node.name]
            if not self._ancestors_give(mine, node, used, allocations, touched):
                continue
            for name in touched:
                allocations[name] = _sub(allocations[name], used)
            victims.append(task)
        return victims, Vote.PERMIT

    def _ancestors_give(
        self, mine: Node, node: Node, used: Dims, allocations: dict[str, Dims], touched: list[str]
    ) -> bool:
        for level in range(1, self.level + 1):
            theirs = _ancestor_at(node, level)
            if theirs is None or theirs == ROOT:
                continue
            if _ancestor_at(mine, level) == theirs:
                continue
            target = self.nodes[theirs]
            allocated = allocations.setdefault(theirs, dict(target.allocated))
            touched.append(theirs)
            if not _intersection(used, target.deserved):
                continue
            if not _greater_partly_relevant(allocated, target.deserved, used):
                return False
        return True

    def _share_ancestor(self, left: Node, right: Node) -> bool:
        """sharesAnyNonRootAncestorWithinLevel."""
        ours = {_ancestor_at(left, level) for level in range(1, self.level + 1)}
        theirs = {_ancestor_at(right, level) for level in range(1, self.level + 1)}
        return bool((ours & theirs) - {None, ROOT})

    # events -------------------------------------------------------------------------------------
    def _on_allocate(self, task: Task) -> None:
        self._move(task, 1)

    def _on_deallocate(self, task: Task) -> None:
        self._move(task, -1)

    def _move(self, task: Task, sign: int) -> None:
        node = self.nodes.get(self.ssn.jobs[task.job].queue)
        if node is None:
            return
        amount = _dims(task.resreq)
        change = _add if sign > 0 else _sub
        node.allocated = change(node.allocated, amount)
        node.update_share()
        for name in node.ancestors:
            ancestor = self.nodes[name]
            ancestor.allocated = change(ancestor.allocated, amount)

    # reporting ----------------------------------------------------------------------------------
    def explain(self, queue: Queue, task: Task) -> str:
        if not queue.info.is_open:
            return f"queue {queue.name} is closed"
        if not self.ready:
            return "the capacity plugin's queue hierarchy is invalid (root queue, parents or jobs)"
        if queue.children:
            return f"queue {queue.name} has child queues; jobs must go to a leaf queue"
        blocking = self._blocking(queue.name, task.resreq) or queue.name
        node = self.nodes[blocking]
        future = _res(_add(node.allocated, _dims(task.resreq)))
        name = first_short_dimension(future, _res(node.real), task.resreq) or "gpu"
        where = "" if blocking == queue.name else f"{blocking}, an ancestor of "
        allocated, capability = node.allocated.get(name, 0), node.real.get(name, 0.0)
        return f"{where}queue {queue.name} {capability_text(name, allocated, capability)}"

    def share(self, queue_name: str) -> QueueAttr | None:
        node = self.nodes.get(queue_name)
        if node is None:
            return None
        attr = new_attr(self.ssn.queues[queue_name])
        attr.deserved, attr.allocated = _res(node.deserved), _res(node.allocated)
        attr.request, attr.real_capability = _res(node.request), _res(node.real)
        attr.share = node.share
        return attr


# upstream Resource arithmetic on plain dicts ------------------------------------------------------
def _dims(res: Resources) -> Dims:
    values = res.explicit()
    out = {CPU: values.get(CPU, 0.0), MEMORY: values.get(MEMORY, 0.0)}
    for name, value in values.items():
        if name not in out:
            out[name] = value
    return out


def _res(dims: Dims) -> Resources:
    return Resources(dims)


def _add(left: Dims, right: Dims) -> Dims:
    out = dict(left)
    for name, value in right.items():
        out[name] = out.get(name, 0.0) + value
    return out


def _sub(left: Dims, right: Dims) -> Dims:
    out = dict(left)
    for name, value in right.items():
        out[name] = out.get(name, 0.0) - value
    return out


def _exceeded(left: Dims, right: Dims) -> Dims:
    """ExceededPart (Diff's increased side): cpu and memory always, scalars where left > right."""
    out = {CPU: max(left[CPU] - right.get(CPU, 0.0), 0.0)}
    out[MEMORY] = max(left[MEMORY] - right.get(MEMORY, 0.0), 0.0)
    for name in set(left) | set(right):
        if name in (CPU, MEMORY):
            continue
        lvalue, rvalue = left.get(name, 0.0), right.get(name, 0.0)
        if lvalue > rvalue:
            out[name] = lvalue - rvalue
    return out


def _min_within(values: Dims, cap: Dims) -> Dims:
    """MinDimensionResource(cap, Infinity): scalars the cap does not name stay as they are."""
    out = dict(values)
    out[CPU] = min(out[CPU], cap.get(CPU, 0.0))
    out[MEMORY] = min(out[MEMORY], cap.get(MEMORY, 0.0))
    for name, value in values.items():
        if name not in (CPU, MEMORY) and name in cap:
            out[name] = min(value, cap[name])
    return out


def _max(left: Dims, right: Dims) -> Dims:
    """helpers.Max: per name, negative scalars dropped."""
    out = {CPU: max(left[CPU], right[CPU]), MEMORY: max(left[MEMORY], right[MEMORY])}
    for source in (left, right):
        for name, value in source.items():
            if name not in (CPU, MEMORY) and value >= 0:
                out[name] = max(value, out.get(name, 0.0))
    return out


def _names(values: Dims) -> list[str]:
    """ResourceNames: names at or above minResource."""
    return sorted(name for name, value in values.items() if value >= MIN_RESOURCE)


def _is_empty(values: Dims) -> bool:
    return not any(v >= MIN_RESOURCE for n, v in values.items() if n != PODS)


def _intersection(left: Dims, right: Dims, ignore_pods: bool = False) -> set[str]:
    names = set(_names(left)) & set(_names(right))
    return names - {PODS} if ignore_pods else names


def _fits_within(future: Dims, cap: Dims, request: Dims) -> bool:
    """LessEqualWithDimensionAndResourcesName: strictly, on the names the request asks for."""
    for name, value in request.items():
        if value > 0 and name != PODS and future.get(name, 0.0) > cap.get(name, 0.0):
            return False
    return True


def _le_zero(left: Dims, right: Dims) -> bool:
    """LessEqual(right, Zero): every name of left, a missing right being 0."""
    return all(le_named(name, value, right.get(name, 0.0)) for name, value in left.items())


def _le(left: float, right: float) -> bool:
    return left < right or abs(left - right) < MIN_RESOURCE


def _greater_partly_relevant(allocated: Dims, deserved: Dims, request: Dims) -> bool:
    """GreaterPartlyWithRelevantDimensions: above deserved on a name the request uses and the
    deserved share states (cpu/memory: at least minResource; a scalar: named at all)."""
    for name, value in request.items():
        if value <= 0 or name == PODS:
            continue
        if name in (CPU, MEMORY):
            if deserved.get(name, 0.0) < MIN_RESOURCE:
                continue
        elif name not in deserved:
            continue
        if allocated.get(name, 0.0) > deserved.get(name, 0.0):
            return True
    return False


def _le_partly_zero_filtered(future: Dims, deserved: Dims, request: Dims) -> bool:
    """LessEqualPartlyWithDimensionZeroFiltered: within deserved on some requested name where
    either side is not zero."""
    for name, value in request.items():
        if value <= 0 or name == PODS:
            continue
        have, cap = future.get(name, 0.0), deserved.get(name, 0.0)
        if have < MIN_RESOURCE and cap < MIN_RESOURCE:
            continue
        if _le(have, cap):
            return True
    return False


def _compare_share(left: Node, right: Node) -> int:
    """compareShareWithDeserved."""
    if left.share == right.share:
        lhas, rhas = not _is_empty(left.deserved), not _is_empty(right.deserved)
        if lhas == rhas:
            return 0
        return -1 if lhas else 1
    return -1 if left.share < right.share else 1


def _common_level(left: Node, right: Node) -> int:
    """getQueueLevel: the deepest index where both ancestor lists agree (0 otherwise)."""
    level = 0
    for index, (a, b) in enumerate(zip(left.ancestors, right.ancestors, strict=False)):
        if a != b:
            return level
        level = index
    return level


def _ancestor_at(node: Node, depth: int) -> str | None:
    """queueAncestorAtDepth: the ancestor ``depth`` levels up (1 = the parent)."""
    if depth <= 0 or len(node.ancestors) < depth:
        return None
    return node.ancestors[len(node.ancestors) - depth]
