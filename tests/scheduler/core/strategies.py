"""Hypothesis strategies for the pure scheduling core: random clusters and workloads.

Sizes stay small (<= 6 nodes, <= 5 queues, <= 12 jobs) so a property runs in milliseconds.
``snapshots()`` builds *consistent* snapshots (existing placements fit their nodes);
``weird_snapshots()`` adds the edge cases the core must survive without raising.
"""

from __future__ import annotations

from hypothesis import strategies as st

from scheduler.core.config import SchedulerConf, default_conf, parse_conf
from scheduler.core.resources import Resources
from scheduler.core.types import (
    JobInfo,
    NodeInfo,
    PodGroupPhase,
    QueueInfo,
    Snapshot,
    TaskInfo,
    TaskStatus,
)

GI = 1024**3
MAX_NODES, MAX_QUEUES, MAX_JOBS, MAX_TASKS = 6, 5, 12, 4

FULL_ACTIONS = "enqueue, allocate, backfill, preempt, reclaim"
PLAIN_TIERS = [
    {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
    {
        "plugins": [
            {"name": "predicates"},
            {"name": "proportion"},
            {"name": "binpack", "arguments": {"binpack.resources": "gpu"}},
        ]
    },
]
DRF_TIERS = [
    {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
    {
        "plugins": [
            {"name": "drf"},
            {"name": "predicates"},
            {"name": "proportion"},
            {"name": "nodeorder"},
        ]
    },
]


def _confs() -> dict[str, SchedulerConf]:
    return {
        "default": default_conf(),
        "plain": parse_conf({"actions": FULL_ACTIONS, "tiers": PLAIN_TIERS}),
        "reclaim-first": parse_conf(
            {"actions": "enqueue, allocate, reclaim, preempt, backfill", "tiers": PLAIN_TIERS}
        ),
        "drf": parse_conf({"actions": FULL_ACTIONS, "tiers": DRF_TIERS}),
    }


CONFS = _confs()


def confs() -> st.SearchStrategy[tuple[str, SchedulerConf]]:
    return st.sampled_from(sorted(CONFS.items()))


# pieces ---------------------------------------------------------------------------------------
def _requests(draw, gpu_only: bool, weird: bool, contended: bool = False) -> dict[str, int]:
    gpu = draw(st.sampled_from([1, 2, 4] if contended else [0, 1, 1, 2, 4, 8]))
    if gpu_only:
        return {"gpu": max(gpu, 1)}
    cpu = draw(st.sampled_from([0, 1000, 4000, 16000]))
    memory = draw(st.sampled_from([0, GI, 16 * GI]))
    if not weird and gpu == 0 and cpu == 0 and memory == 0:
        cpu = 1000  # best-effort pods are a corner of their own: only in weird snapshots
    values = {"cpu": cpu, "memory": memory}
    if gpu:
        values["gpu"] = gpu
    return values


def _node(
    draw, index: int, gpu_only: bool, weird: bool, contended: bool, name: str = ""
) -> NodeInfo:
    gpu = 8 if contended else draw(st.sampled_from([0, 2, 4, 8, 8]))
    cpu = draw(st.sampled_from([16000, 64000, 96000]))
    memory = draw(st.sampled_from([64 * GI, 512 * GI]))
    values: dict[str, float] = {"cpu": cpu, "memory": memory}
    if gpu:
        values["gpu"] = gpu
    if not gpu_only and not contended and draw(st.integers(0, 4)) == 0:
        values["pods"] = draw(st.integers(1, 4))  # a tight pod-count cap
    unschedulable = weird and draw(st.integers(0, 5)) == 0
    return NodeInfo(name or f"n{index}", Resources(values), unschedulable=unschedulable)


def _queue(
    draw, index: int, gpu_only: bool, weird: bool, guarantees: bool, contended: bool
) -> QueueInfo:
    weight = draw(st.integers(1, 8))
    if weird and draw(st.integers(0, 6)) == 0:
        # 65535 next to a capped queue once made proportion's loop crawl for minutes
        # (see test_properties.test_cycle_time_does_not_depend_on_weights)
        weight = draw(st.sampled_from([100, 65535]))
    capability: dict[str, float] = {}
    if draw(st.integers(0, 3 if contended else 1)) == 0:
        capability["gpu"] = draw(st.integers(0, 24))
    if not gpu_only and draw(st.integers(0, 3)) == 0:
        capability["cpu"] = draw(st.sampled_from([4000, 32000]))
    guarantee: dict[str, float] = {}
    if guarantees and draw(st.integers(0, 2)) == 0:
        g = draw(st.integers(0, 12))
        # guarantee <= capability (Volcano's queue webhook rejects the opposite); weird
        # snapshots may break it.
        guarantee["gpu"] = g if weird else min(g, capability.get("gpu", g))
    borrowing: dict[str, float] = {}
    if draw(st.integers(0, 2)) == 0:
        borrowing["gpu"] = draw(st.integers(0, 8))
    closed = weird and draw(st.integers(0, 5)) == 0
    return QueueInfo(
        f"q{index}",
        weight=weight,
        guarantee=Resources(guarantee),
        capability=Resources.unlimited(capability),
        borrowing_limit=Resources.unlimited(borrowing),
        reclaimable=contended or draw(st.integers(0, 3)) > 0,
        priority=draw(st.sampled_from([0, 0, 0, 1])),
        state="Closed" if closed else "Open",
    )


def _name(prefix: str, index: int, padded: bool) -> str:
    """``n1``; with ``padded`` ``n0, n00, n1, n01``: distinct names, equal in natural order."""
    if padded:
        return f"{prefix}{'0' * (index % 2)}{index // 2}"
    return f"{prefix}{index}"


class _Free:
    """Per-node free resources while existing placements are generated."""

    def __init__(self, nodes: list[NodeInfo]):
        self.free = {}
        for node in nodes:
            values = node.allocatable.explicit()
            values.setdefault("pods", 110)
            self.free[node.name] = dict(values)

    def take(self, node: str, requests: dict[str, int]) -> bool:
        free = self.free[node]
        need = {**requests, "pods": 1}
        if any(free.get(k, 0) < v for k, v in need.items() if v):
            return False
        for k, v in need.items():
            free[k] = free.get(k, 0) - v
        return True


@st.composite
def snapshots(
    draw,
    *,
    gpu_only: bool = False,
    weird: bool = False,
    guarantees: bool = True,
    running: bool = True,
    contended: bool = False,
    padded_names: bool = False,
    max_jobs: int = MAX_JOBS,
) -> Snapshot:
    """``contended``: full 8-GPU nodes, running work mostly in q0, pending work elsewhere."""
    padded_names = padded_names and draw(st.booleans())
    node_count = draw(st.integers(1, 3 if contended else MAX_NODES))
    nodes = [
        _node(draw, i, gpu_only, weird, contended, _name("n", i, padded_names))
        for i in range(node_count)
    ]
    queues = [
        _queue(draw, i, gpu_only, weird, guarantees, contended)
        for i in range(draw(st.integers(2 if contended else 1, MAX_QUEUES)))
    ]
    free = _Free(nodes)
    jobs = []
    for j in range(draw(st.integers(0, max_jobs))):
        queue = draw(st.sampled_from([q.name for q in queues]))
        if weird and draw(st.integers(0, 8)) == 0:
            queue = "ghost"
        count = draw(st.integers(0 if weird else 1, MAX_TASKS))
        # one pod shape per job (a gang of equal workers), sometimes mixed
        shape = _requests(draw, gpu_only, weird, contended)
        states = ["pending", "pending", "running", "partial"]
        if contended:
            states = ["running", "running", "pending"]
        state = draw(st.sampled_from(states)) if running else "pending"
        if contended and state == "running" and draw(st.booleans()):
            queue = queues[0].name  # one queue holds most of the cluster
        tasks = []
        for k in range(count):
            requests = (
                shape if draw(st.integers(0, 3)) else _requests(draw, gpu_only, weird, contended)
            )
            status, node = TaskStatus.PENDING, None
            place = state == "running" or (state == "partial" and draw(st.booleans()))
            if place:
                target = draw(st.sampled_from([n.name for n in nodes]))
                if weird:
                    status = draw(
                        st.sampled_from(
                            [
                                TaskStatus.RUNNING,
                                TaskStatus.RUNNING,
                                TaskStatus.BOUND,
                                TaskStatus.RELEASING,
                                TaskStatus.SUCCEEDED,
                                TaskStatus.FAILED,
                            ]
                        )
                    )
                    node = draw(st.sampled_from([target, target, None, "lost-node"]))
                elif free.take(target, requests):
                    status, node = TaskStatus.RUNNING, target
            tasks.append(
                TaskInfo(
                    _name(f"j{j}-", k, padded_names),
                    Resources(requests),
                    status,
                    node,
                    priority=draw(st.sampled_from([1, 1, 2])) if weird else 1,
                    preemptable=draw(st.integers(0, 5)) > 0,
                )
            )
        if weird:
            min_available = draw(st.one_of(st.none(), st.integers(0, count + 2)))
            phase = draw(st.sampled_from([None, None, *PodGroupPhase]))
            min_resources = draw(
                st.sampled_from([None, Resources({"gpu": 1}), Resources({"gpu": 64})])
            )
        else:
            min_available = draw(st.integers(1, count))
            phase, min_resources = None, None
        jobs.append(
            JobInfo(
                f"j{j}",
                queue,
                tuple(tasks),
                priority=draw(st.sampled_from([0, 0, 1, 5])),
                min_available=min_available,
                created=draw(st.integers(0, 4)),  # ties on purpose: names break them
                phase=phase,
                min_resources=min_resources,
            )
        )
    return Snapshot(tuple(nodes), tuple(queues), tuple(jobs), now=1000.0)


def weird_snapshots() -> st.SearchStrategy[Snapshot]:
    return snapshots(weird=True)


def gpu_only_snapshots(*, guarantees: bool) -> st.SearchStrategy[Snapshot]:
    """Queues whose pods ask for GPUs only, so deserved is a one-dimensional problem."""
    return snapshots(gpu_only=True, guarantees=guarantees, max_jobs=10)


def contended_snapshots() -> st.SearchStrategy[Snapshot]:
    """Full clusters with pending work: the ones where preempt and reclaim have work to do."""
    return snapshots(contended=True)


def padded_name_snapshots() -> st.SearchStrategy[Snapshot]:
    """Names such as ``n1`` and ``n01`` side by side: equal in natural order, still distinct."""
    return snapshots(padded_names=True)
