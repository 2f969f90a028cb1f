"""Hierarchical proportion: weights divide a parent queue's deserved share among its children.

A documented departure from upstream (docs/design/hierarchical-proportion.md): Volcano's
proportion (volcano-sh/volcano pkg/scheduler/plugins/proportion/proportion.go) is flat, and its
hierarchy lives in the capacity plugin, where every queue states its deserved share. Here the
tree is root (the cluster) -> tenant -> queue, and at every level the same water-filling as the
flat plugin runs over the children of one parent, with the parent's deserved share as the total:

- a parent's guarantee is at least the sum of its children's; its request is what its
  children can take;
- a guarantee counts as far as the queue asks: min(guarantee, request) is the floor of its
  deserved share and what its siblings may not take. The rest of it, and the whole guarantee
  of a queue or tenant without jobs, is lent like any idle capacity, and reclaim returns it
  when jobs come (upstream's flat plugin holds every queue's whole guarantee back);
- nominal share = parent's nominal x weight / weights of the open siblings (the cluster at the
  top), or the guarantee if larger; ``borrowing_limit`` caps a queue at nominal + limit;
- real capability = parent's real capability - the siblings' floors + its own guarantee,
  capped by capability and the borrowing cap, so a tenant's cap binds all its queues;
- a queue or tenant below its share may take one more pod past it when that takes nothing a
  sibling could use (shares are fractional, pods are not).

So idle capacity is lent inside a tenant first (a queue's unused share goes to its siblings
before the tenant's share shrinks), then across tenants. A queue allocates while it and every
ancestor stay within their deserved shares. Reclaim looks at the two subtrees where the
reclaimer's and the victim's paths part: at that level the reclaimer's side must be below its
deserved share and the victim's side above (and kept at its guarantee), all the way down; so a
starving tenant takes back its share from another tenant before queues trade inside a tenant,
and queue order compares tenants first (priority, then share), then queues. Overused is judged
on the leaf alone: a queue whose tenant is at its share may still take back its part from a
sibling. Jobs in a queue that has children never run.

Demand leaves out jobs that can never run as submitted, and ``lendIdle`` lends idle capacity
within every level's real capability, as in the flat plugin (docs/design/
scheduling-guarantees.md).

With no parent anywhere this is exactly the flat plugin (which then runs instead).
"""

from __future__ import annotations

from scheduler.core.hooks import EventHandler
from scheduler.core.plugins._quota import (
    QueueAttr,
    account_job,
    admission_shortfall,
    cluster_total,
    demand_exclusions,
    new_attr,
)
from scheduler.core.plugins._tree import children_of, effective_parents, paths
from scheduler.core.plugins.proportion import (
    _gives,
    _within,
    admission_reason,
    borrowing_cap,
    explain_share,
    nominal_share,
)
from scheduler.core.reasons import capability_text, describe, first_short_dimension
from scheduler.core.resources import EMPTY, INFINITY, MIN_RESOURCE, Resources, le_named, tolerance
from scheduler.core.session import Session
from scheduler.core.state import Job, Queue, Task
from scheduler.core.types import QueueInfo, TaskStatus, Vote


class ProportionTree:
    """The hooks of a hierarchical proportion session (registered under the plugin's name)."""

    def __init__(self, ssn: Session, plugin_name: str, exclude_never: bool = True):
        self.ssn = ssn
        self.name = plugin_name
        self.exclude_never = exclude_never
        self.cluster = cluster_total(ssn)
        infos = {name: queue.info for name, queue in ssn.queues.items()}
        self.parents = effective_parents(infos)
        self.paths = paths(self.parents)
        self.children = children_of(self.parents)
        self._infos = infos
        self._top_down = sorted(infos, key=lambda n: (len(self.paths[n]), n))
        self.guarantees = self._guarantees(infos, self._top_down)
        # Until ``_settle``: the queues with jobs and their ancestors, nothing accounted, so
        # the quota is known to bind while the jobs that can never run are worked out (only
        # stated capabilities decide that in a tree).
        self.attrs = {
            node: new_attr(ssn.queues[node])
            for job in ssn.jobs.values()
            if job.queue in self.paths
            for node in self.paths[job.queue]
        }
        # (queue, request, may take a last pod) -> (session version, allocatable?)
        self._answers: dict[tuple[object, ...], tuple[int, bool]] = {}
        self._levels: dict[str, list[tuple[int, QueueAttr | None]]] = {}
        # queues whose stated capability names something (the others are never "at" it)
        self._capped = {
            name for name, queue in ssn.queues.items() if queue.info.capability.explicit()
        }

    # building -----------------------------------------------------------------------------------
    def _guarantees(self, infos: dict[str, QueueInfo], top_down: list[str]) -> dict[str, Resources]:
        """Stated guarantee, raised to the sum of the children's (bottom up)."""
        out: dict[str, Resources] = {}
        for name in reversed(top_down):
            guarantee = infos[name].guarantee
            kids = self.children.get(name)
            if kids:
                total = EMPTY
                for kid in kids:
                    total = total.add(out[kid])
                guarantee = guarantee.max_dimension(total)
            out[name] = guarantee
        return out

    def _settle(self) -> None:
        """Requests (without the jobs that can never run, by default), then the shares."""
        self.attrs = self._accounted(demand_exclusions(self.ssn, self.exclude_never))
        self._capabilities(self._infos, self._top_down)
        self._fill(self._top_down)

    def _accounted(self, left_out: frozenset[str]) -> dict[str, QueueAttr]:
        """Attrs for every queue with jobs and each of its ancestors, sums rolled up; the jobs
        ``left_out`` add nothing to the requests."""
        ssn = self.ssn
        # queue -> resource -> the smallest request of a pod waiting in its subtree
        self.smallest: dict[str, dict[str, float]] = {}
        seen: dict[str, set[int]] = {}
        own: dict[str, QueueAttr] = {}
        for job in ssn.jobs.values():
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue
            attr = own.get(queue.name)
            if attr is None:
                attr = own[queue.name] = new_attr(queue)
            demand = job.name not in left_out
            account_job(attr, job, demand)
            if demand and job.counts.get(TaskStatus.PENDING):
                # Requests are interned by the session: each shape is looked at once per queue.
                shapes = seen.setdefault(queue.name, set())
                smallest = self.smallest.setdefault(queue.name, {})
                for task in job.tasks.values():
                    request = task.resreq
                    if task.status is not TaskStatus.PENDING or id(request) in shapes:
                        continue
                    shapes.add(id(request))
                    for name, value in request.explicit_items():
                        if 0 < value < smallest.get(name, INFINITY):
                            smallest[name] = value
        attrs: dict[str, QueueAttr] = {}
        for name in sorted(own):
            for node in self.paths[name]:
                if node not in attrs:
                    attrs[node] = own.get(node) or new_attr(ssn.queues[node])
        for name in sorted(attrs, key=lambda n: (-len(self.paths[n]), n)):
            attr = attrs[name]
            attr.guarantee = self.guarantees[name]
            parent = self.parents[name]
            if parent is not None:
                mine, theirs = self.smallest.get(name, {}), self.smallest.setdefault(parent, {})
                for resource, value in mine.items():
                    theirs[resource] = min(value, theirs.get(resource, INFINITY))
                up = attrs[parent]
                up.allocated = up.allocated.add(attr.allocated)
                up.request = up.request.add(attr.request)
                up.inqueue = up.inqueue.add(attr.inqueue)
                up.elastic = up.elastic.add(attr.elastic)
        return attrs

    def _capabilities(self, infos: dict[str, QueueInfo], top_down: list[str]) -> None:
        """Nominal share and real capability top down, then what each parent can hand out."""
        self.caps: dict[str, Resources | None] = {}  # queue -> its borrowing cap
        nominal: dict[str | None, Resources] = {None: self.cluster}
        real: dict[str | None, Resources] = {None: self.cluster}
        reserved: dict[str | None, Resources] = {}
        open_weight: dict[str | None, int] = {}
        # A guarantee holds only as far as the queue asks: the floor of its deserved share,
        # and what its siblings may not take, is min(guarantee, request). The rest, and the
        # guarantee of a queue without jobs, is lent like any idle capacity and comes back by
        # reclaim (upstream's flat plugin holds every queue's whole guarantee back).
        self.floors = {
            name: attr.guarantee.min_dimension(Resources(attr.request.explicit()))
            for name, attr in self.attrs.items()
        }
        for parent, kids in self.children.items():
            total = EMPTY
            for kid in kids:
                if kid in self.floors:
                    total = total.add(self.floors[kid])
            reserved[parent] = total
            open_weight[parent] = sum(infos[k].weight for k in kids if infos[k].is_open)
        for name in top_down:
            attr = self.attrs.get(name)
            if attr is None:
                continue
            parent = self.parents[name]
            nominal[name] = nominal_share(attr, nominal[parent], open_weight[parent])
            capability = real[parent].exceeded_part(reserved[parent]).add(attr.guarantee)
            capability = capability.min_dimension(attr.capability)
            cap = self.caps[name] = borrowing_cap(attr, nominal[name])
            if cap is not None:
                capability = capability.min_dimension(cap)
            attr.real_capability = real[name] = capability
        # What each queue can take: its request, or for a parent what its children can take.
        self.demand: dict[str, Resources] = {}
        for name in reversed(top_down):
            attr = self.attrs.get(name)
            if attr is None:
                continue
            kids = [k for k in self.children.get(name, ()) if k in self.attrs]
            if not kids:
                self.demand[name] = Resources(attr.request.explicit())
                continue
            demand = EMPTY
            for kid in kids:
                demand = demand.add(self.demand[kid].min_dimension(self.attrs[kid].real_capability))
            self.demand[name] = demand

    def _fill(self, top_down: list[str]) -> None:
        top = [self.attrs[n] for n in self.children.get(None, ()) if n in self.attrs]
        self._level(top, self.cluster)
        for name in top_down:
            kids = [self.attrs[k] for k in self.children.get(name, ()) if k in self.attrs]
            if kids and name in self.attrs:
                self._level(kids, self.attrs[name].deserved)
        for attr in self.attrs.values():
            attr.update_share()

    def _level(self, attrs: list[QueueAttr], total: Resources) -> None:
        """Split ``total`` among siblings: per resource one water level L, each deserving
        clamp(L x weight, floor, cap) with cap = min(demand, real capability), L chosen so the
        shares add up to the total (or every cap is met). Upstream's round-based loop lays
        floors on top of the weighted split and can hand out more than the total; a level
        cannot, so floors are kept out of the others' shares."""
        names: set[str] = set(total.explicit())
        for attr in attrs:
            names |= set(self.demand[attr.queue.name].explicit())
        values: dict[str, dict[str, float]] = {attr.queue.name: {} for attr in attrs}
        for resource in sorted(names):
            rows = []
            for attr in attrs:
                name = attr.queue.name
                floor = self.floors[name].get(resource)
                cap = min(self.demand[name].get(resource), attr.real_capability.get(resource))
                rows.append((name, attr.weight, floor, max(cap, floor)))
            for name, share in _water_level(rows, total.get(resource)).items():
                values[name][resource] = share
        for attr in attrs:
            attr.deserved = Resources(values[attr.queue.name])

    def register(self, lend_idle: bool = False) -> None:
        ssn = self.ssn
        ssn.add_open_step(self._settle)
        # A sort key, read when a queue enters a heap: its siblings waiting there keep the
        # tenant share they entered with until their own turn (a compare-based heap reads
        # shares mid-sift instead; neither is upstream, whose proportion is flat).
        ssn.add_queue_order_fn(self.name, self.queue_order, key=self.queue_key)
        ssn.add_overused_fn(self.name, self.overused)
        ssn.add_allocatable_fn(
            self.name,
            self.allocatable,
            explain=self.explain,
            within_limits=self.within_limits,
            lends=lend_idle,
        )
        ssn.add_preemptive_fn(self.name, self.preemptive)
        ssn.add_reclaimable_fn(self.name, self.reclaimable)
        ssn.add_job_enqueueable_fn(self.name, self.enqueueable)
        ssn.add_job_enqueued_fn(self.name, self.enqueued)
        ssn.add_event_handler(EventHandler(self._on_allocate, self._on_deallocate))

    # hooks --------------------------------------------------------------------------------------
    def queue_order(self, left: Queue, right: Queue) -> int:
        """Level by level from the top: higher priority, then the smaller share."""
        lkey, rkey = self.queue_key(left), self.queue_key(right)
        return -1 if lkey < rkey else (1 if lkey > rkey else 0)

    def queue_key(self, queue: Queue) -> tuple[object, ...]:
        # (negated priority, attr or None) per level, fixed for the session; only shares move.
        levels = self._levels.get(queue.name)
        if levels is None:
            levels = self._levels[queue.name] = [
                (-self.ssn.queues[n].info.priority, self.attrs.get(n))
                for n in self.paths[queue.name]
            ]
        return tuple([(p, a.share if a is not None else 0.0) for p, a in levels])

    def overused(self, queue: Queue) -> bool:
        attr = self.attrs.get(queue.name)
        if attr is None or queue.children:
            return False
        return attr.deserved.less_equal(attr.allocated)

    def allocatable(self, queue: Queue, task: Task) -> bool:
        if queue.children:
            return False
        # Asked for every waiting job of a queue at its share, with nothing changed in between:
        # the answers are kept per request until the session changes. The last-pod answer is
        # only worked out when the plain one is no.
        version, answers = self.ssn.version, self._answers
        key = (queue.name, task.resreq, False)
        found = answers.get(key)
        if found is None or found[0] != version:
            found = answers[key] = (version, self._blocking(queue.name, task.resreq) is None)
        if found[1] or not self._completes(task):
            return found[1]
        key = (queue.name, task.resreq, True)
        found = answers.get(key)
        if found is None or found[0] != version:
            found = answers[key] = (version, self._blocking(queue.name, task.resreq, True) is None)
        return found[1]

    def within_limits(self, queue: Queue, request: Resources) -> bool:
        """May the queue grow by ``request`` within its hard limits, the shares aside: the real
        capability of the queue and of every ancestor (capabilities, borrowing caps, what
        siblings' guarantee floors leave). What ``lendIdle`` lends up to."""
        if queue.children or not queue.info.is_open:
            return False
        for node in self.paths[queue.name]:
            attr = self.attrs.get(node)
            if attr is not None and not _within(attr.allocated, request, attr.real_capability):
                return False
        return True

    def preemptive(self, queue: Queue, task: Task) -> bool:
        if queue.children:
            return False
        return self._room(queue.name, task.resreq, self._completes(task))

    def _completes(self, task: Task) -> bool:
        """Would placing ``task`` complete its gang (or is the gang complete already)? Only
        then may it be the one pod past a share: a pod of a gang that stays incomplete is
        rolled back anyway."""
        job = self.ssn.jobs[task.job]
        return job.ready_task_num() + 1 >= job.min_available

    def _room(self, node: str, request: Resources, last: bool) -> bool:
        """May ``node`` grow by ``request``: within its share, or (``last``) by a last pod
        past it."""
        attr = self.attrs.get(node)
        if attr is None or _fits(attr, request):
            return True
        return last and self._last_pod_fits(node, request)

    def _blocking(self, name: str, request: Resources, last: bool = False) -> str | None:
        """The first queue on the way up (the queue itself first) whose share ``request``
        would exceed, or None.

        A queue (or tenant) below its share may take one more pod past it when no sibling can
        use what that pod takes: shares are fractional and pods are not, and without this two
        queues of a tenant deserving 5 GPUs each would leave 2 of their tenant's 10 idle to
        2-GPU pods. See ``_last_pod_fits``."""
        for node in reversed(self.paths[name]):
            if not self._room(node, request, last):
                return node
        return None

    def _last_pod_fits(self, node: str, request: Resources) -> bool:
        """On each name the request asks for: within the share, or below it with the pod
        fitting under the real capability and under what the parent has left once every
        sibling holds the larger of its allocation and its share, a sibling's share counting
        only while the rest of it could still take the smallest pod it waits with. So the pod
        takes nothing a sibling could use, and no sibling has a reason to reclaim it."""
        attr = self.attrs[node]
        parent = self.parents[node]
        total = self.cluster if parent is None else self.attrs[parent].deserved
        siblings = [k for k in self.children.get(parent, ()) if k != node and k in self.attrs]
        for name, value in request.explicit_items():
            if value <= 0:
                continue
            have, share = attr.allocated.get(name), attr.deserved.get(name)
            if le_named(name, have + value, share):
                continue
            if have >= share - MIN_RESOURCE or not le_named(
                name, have + value, attr.real_capability.get(name)
            ):
                return False
            budget = total.get(name)
            if parent is not None and self._room(parent, request, True):
                # the parent may go one pod past its own share too
                budget = max(budget, self.attrs[parent].allocated.get(name) + value)
            held = sum(self._claim(k, name) for k in siblings)
            if not le_named(name, held + have + value, budget):
                return False
        return True

    def _claim(self, node: str, name: str) -> float:
        attr = self.attrs[node]
        have, share = attr.allocated.get(name), attr.deserved.get(name)
        smallest = self.smallest.get(node, {}).get(name)
        if smallest is not None and share - have >= smallest - MIN_RESOURCE:
            return share
        return have

    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> tuple[list[Task], int]:
        jobs = self.ssn.jobs
        reclaimer_path = self.paths.get(jobs[reclaimer.job].queue)
        request = reclaimer.resreq
        victims: list[Task] = []
        allocations: dict[str, Resources] = {}
        if reclaimer_path is None:
            return victims, Vote.PERMIT
        for task in candidates:
            victim_path = self.paths.get(jobs[task.job].queue)
            if victim_path is None:
                continue
            level = _parting(reclaimer_path, victim_path)
            if level >= min(len(reclaimer_path), len(victim_path)):
                continue  # one queue inside the other's subtree: no sides to weigh
            # The reclaimer's side must be under its share from where the paths part (the
            # reclaimer's own queue was checked by preemptive) ...
            last = self._completes(reclaimer)
            if not all(self._room(n, request, last) for n in reclaimer_path[level:-1]):
                continue
            # ... and the victim's side above its share and kept at its guarantee, down to the
            # victim's queue.
            side = victim_path[level:]
            if not all(self._may_give(n, allocations, task) for n in side):
                continue
            for node in side:
                allocations[node] = allocations.get(node, self.attrs[node].allocated).sub(
                    task.resreq
                )
            victims.append(task)
        return victims, Vote.PERMIT

    def _may_give(self, node: str, allocations: dict[str, Resources], task: Task) -> bool:
        attr = self.attrs.get(node)
        if attr is None:
            return False
        allocated = allocations.get(node, attr.allocated)
        if not _gives(allocated, attr.deserved):
            return False
        return attr.guarantee.less_equal(allocated.sub(task.resreq), missing=0)

    def enqueueable(self, job: Job) -> int:
        minimum = job.info.min_resources
        if job.queue not in self.attrs or minimum is None:
            return Vote.PERMIT
        for node in reversed(self.paths[job.queue]):
            attr = self.attrs[node]
            shortfall = admission_shortfall(attr, minimum)
            if shortfall is None:
                continue
            if node == job.queue:
                job.reason = admission_reason(job.queue, attr, minimum, shortfall)
            else:
                job.reason = admission_reason(
                    node, attr, minimum, shortfall, subject=f"queue {job.queue} is in {node}, which"
                )
            return Vote.REJECT
        return Vote.PERMIT

    def enqueued(self, job: Job) -> None:
        minimum = job.info.min_resources
        if job.queue not in self.attrs or minimum is None:
            return
        for node in self.paths[job.queue]:
            attr = self.attrs[node]
            attr.inqueue = attr.inqueue.add(minimum)

    # events -------------------------------------------------------------------------------------
    def _on_allocate(self, task: Task) -> None:
        self._move(task, task.resreq, 1)

    def _on_deallocate(self, task: Task) -> None:
        self._move(task, task.resreq, -1)

    def _move(self, task: Task, amount: Resources, sign: int) -> None:
        attrs = self.attrs
        for node in self.paths.get(self.ssn.jobs[task.job].queue, ()):
            attr = attrs.get(node)
            if attr is not None:
                allocated = attr.allocated
                attr.allocated = allocated.add(amount) if sign > 0 else allocated.sub(amount)
                attr.update_share()

    # explanations -------------------------------------------------------------------------------
    def explain(self, queue: Queue, task: Task) -> str | None:
        if queue.children:
            return f"queue {queue.name} has child queues; jobs must go to a leaf queue"
        # An ancestor at its capability is the cause whatever the queue's own share says (its
        # share was cut to fit); otherwise the nearest queue on the way up that is full.
        for node in self.paths[queue.name][:-1]:
            capped = self._at_capability(node, task)
            if capped is not None:
                name, allocated, capability = capped
                return (
                    f"queue {queue.name} is in {node}, "
                    f"{capability_text(name, allocated, capability)}"
                )
        node = self._blocking(queue.name, task.resreq, self._completes(task)) or queue.name
        attr = self.attrs[node]
        if node == queue.name:
            cap = self.caps.get(queue.name)
            sentence = explain_share(queue.info, attr, self.cluster, task, cap)
            ancestor = self._capped_ancestor(queue.name, task)
            return sentence if sentence is None or ancestor is None else f"{sentence}; {ancestor}"
        future = attr.allocated.add(task.resreq)
        name = first_short_dimension(future, attr.deserved, task.resreq) or "gpu"
        deserved, allocated = attr.deserved.get(name), attr.allocated.get(name)
        if deserved >= self.cluster.get(name) - tolerance(name):
            return None
        return (
            f"queue {queue.name} is in {node}, which deserves {describe(name, deserved)} and "
            f"has {describe(name, allocated)} allocated"
        )

    def _capped_ancestor(self, name: str, task: Task) -> str | None:
        """``tenant/nlp is capped at 6 GPUs`` when an ancestor's share is its capability (so
        its queues split no more), else None."""
        capped = [n for n in self.paths[name][:-1] if n in self._capped]
        if not capped:
            return None
        attr = self.attrs[name]
        short = first_short_dimension(attr.allocated.add(task.resreq), attr.deserved, task.resreq)
        short = short or "gpu"
        for node in reversed(capped):
            capability = self.ssn.queues[node].info.capability.get(short)
            if self.attrs[node].deserved.get(short) >= capability - tolerance(short):
                return f"{node} is capped at {describe(short, capability)}"
        return None

    def _at_capability(self, node: str, task: Task) -> tuple[str, float, float] | None:
        """(resource, allocated, capability) when ``task`` would take ``node`` past its stated
        capability, else None."""
        attr = self.attrs.get(node)
        if attr is None or node not in self._capped:
            return None
        capability = self.ssn.queues[node].info.capability
        future = attr.allocated.add(task.resreq)
        name = first_short_dimension(future, capability, task.resreq)
        if name is None:
            return None
        return name, attr.allocated.get(name), capability.get(name)

    def share(self, queue_name: str) -> QueueAttr | None:
        return self.attrs.get(queue_name)


def _fits(attr: QueueAttr, request: Resources) -> bool:
    """allocated + request <= deserved on every name the request asks for."""
    allocated, deserved = attr.allocated, attr.deserved
    for name, value in request.explicit_items():
        if value > 0 and not le_named(name, allocated.get(name) + value, deserved.get(name)):
            return False
    return True


def _water_level(rows: list[tuple[str, int, float, float]], total: float) -> dict[str, float]:
    """(name, weight, floor, cap) rows -> clamp(L x weight, floor, cap) for the level L at
    which they add up to ``total`` (every cap when they cannot reach it, every floor when
    the floors alone exceed it)."""
    if sum(cap for _, _, _, cap in rows) <= total:
        return {name: cap for name, _, _, cap in rows}
    if sum(floor for _, _, floor, _ in rows) >= total:
        return {name: floor for name, _, floor, _ in rows}

    def filled(level: float) -> float:
        return sum(min(max(level * weight, floor), cap) for _, weight, floor, cap in rows)

    # filled() is piecewise linear and rises with the level: find the piece holding the total.
    points = sorted({0.0} | {v / w for _, w, f, c in rows for v in (f, c) if w > 0})
    low = 0.0
    for point in points:
        if filled(point) >= total:
            break
        low = point
    else:
        point = low
    below, above = filled(low), filled(point)
    level = point if above == below else low + (point - low) * (total - below) / (above - below)
    return {name: min(max(level * weight, floor), cap) for name, weight, floor, cap in rows}


def _parting(left: tuple[str, ...], right: tuple[str, ...]) -> int:
    """Index of the first level where two paths differ."""
    level = 0
    for a, b in zip(left, right, strict=False):
        if a != b:
            break
        level += 1
    return level
