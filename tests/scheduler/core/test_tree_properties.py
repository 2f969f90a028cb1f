"""Properties of the quota tree (root -> tenant -> queue) under the hierarchical proportion.

Random trees whose guarantees are valid (a tenant's queues guarantee no more than the tenant,
the tenants no more than the cluster) and random demand, run cycle after cycle with binds and
evictions applied, until nothing changes:

- no tenant's allocation ever exceeds its capability;
- once borrowers have been reclaimed, every tenant with demand holds at least
  min(guarantee, demand), rounded down to whole pods (every pod is the same size and divides
  a node, so whole pods always fit where GPUs are free).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.config import parse_conf
from scheduler.core.cycle import run_cycle
from scheduler.core.resources import Resources
from scheduler.core.types import JobInfo, NodeInfo, QueueInfo, Snapshot, TaskInfo, TaskStatus

GPUS_PER_NODE = 8
CONF = parse_conf(
    {
        "actions": "enqueue, allocate, backfill, reclaim",
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
            {
                "plugins": [
                    {"name": "predicates"},
                    {"name": "proportion", "enableHierarchy": True},
                    {"name": "binpack"},
                ]
            },
        ],
    }
)
MAX_CYCLES = 40
PROFILE = settings(
    max_examples=60,
    database=None,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass
class World:
    nodes: int
    pod_gpus: int
    tenants: list[QueueInfo]
    queues: list[QueueInfo]
    early: dict[str, int]  # queue -> jobs there from the start
    late: dict[str, int]  # queue -> jobs that arrive once the early ones run
    placed: dict[str, str] = field(default_factory=dict)  # task -> node

    @property
    def cluster(self) -> int:
        return self.nodes * GPUS_PER_NODE

    def tenant_of(self, queue: str) -> str:
        return next(q.parent for q in self.queues if q.name == queue)


@st.composite
def worlds(draw) -> World:
    nodes = draw(st.integers(2, 4))
    pod_gpus = draw(st.sampled_from([1, 2, 4, 8]))
    cluster = nodes * GPUS_PER_NODE
    left = cluster
    tenants, queues = [], []
    early, late = {}, {}
    for t in range(draw(st.integers(2, 3))):
        name = f"tenant/t{t}"
        guarantee = draw(st.integers(0, left // pod_gpus)) * pod_gpus
        left -= guarantee
        capped = draw(st.booleans())
        capability = draw(st.integers(guarantee, cluster)) if capped else None
        tenants.append(
            QueueInfo(
                name,
                weight=draw(st.integers(1, 3)),
                guarantee=Resources({"gpu": guarantee}),
                capability=Resources.unlimited({} if capability is None else {"gpu": capability}),
            )
        )
        inside = guarantee
        for k in range(draw(st.integers(1, 2))):
            queue = f"q{t}{k}"
            share = draw(st.integers(0, inside // pod_gpus)) * pod_gpus
            inside -= share
            queues.append(
                QueueInfo(
                    queue,
                    weight=draw(st.integers(1, 3)),
                    guarantee=Resources({"gpu": share}),
                    parent=name,
                )
            )
            jobs = draw(st.integers(0, cluster // pod_gpus))
            if draw(st.booleans()):
                early[queue] = jobs
            else:
                late[queue] = jobs
    return World(nodes, pod_gpus, tenants, queues, early, late)


def _snapshot(world: World, arrived: dict[str, int]) -> Snapshot:
    jobs = []
    for queue, count in sorted(arrived.items()):
        for index in range(count):
            task = f"{queue}-{index}"
            node = world.placed.get(task)
            status = TaskStatus.RUNNING if node else TaskStatus.PENDING
            request = Resources({"cpu": 1000, "memory": 1024**3, "gpu": world.pod_gpus})
            jobs.append(
                JobInfo(
                    f"job-{task}",
                    queue,
                    (TaskInfo(task, request, status, node),),
                    min_available=1,
                    created=float(len(jobs)),
                )
            )
    nodes = tuple(
        NodeInfo(f"n{i}", Resources({"cpu": 64000, "memory": 512 * 1024**3, "gpu": 8}))
        for i in range(world.nodes)
    )
    return Snapshot(nodes, (*world.tenants, *world.queues), tuple(jobs))


def _held(world: World) -> dict[str, int]:
    """GPUs each tenant holds."""
    held = {t.name: 0 for t in world.tenants}
    for task in world.placed:
        held[world.tenant_of(task.rsplit("-", 1)[0])] += world.pod_gpus
    return held


def _run_until_still(world: World, arrived: dict[str, int]) -> None:
    for _ in range(MAX_CYCLES):
        result = run_cycle(_snapshot(world, arrived), CONF)
        for evict in result.evictions:
            world.placed.pop(evict.task)
        for bind in result.binds:
            world.placed[bind.task] = bind.node
        _check_capabilities(world)
        if not result.binds and not result.evictions:
            return
    raise AssertionError(f"no steady state after {MAX_CYCLES} cycles")


def _check_capabilities(world: World) -> None:
    held = _held(world)
    for tenant in world.tenants:
        cap = tenant.capability.get("gpu")
        assert held[tenant.name] <= cap, f"{tenant.name} holds {held[tenant.name]} > cap {cap}"


@PROFILE
@given(worlds())
def test_no_tenant_exceeds_its_capability_and_each_gets_its_guarantee(world):
    _run_until_still(world, dict(world.early))
    everyone = {**world.early, **world.late}
    _run_until_still(world, everyone)
    held = _held(world)
    for tenant in world.tenants:
        demand = sum(
            count * world.pod_gpus
            for queue, count in everyone.items()
            if world.tenant_of(queue) == tenant.name
        )
        owed = min(tenant.guarantee.get("gpu"), demand) // world.pod_gpus * world.pod_gpus
        assert held[tenant.name] >= owed, (
            f"{tenant.name} holds {held[tenant.name]} GPUs, owed {owed} "
            f"(guarantee {tenant.guarantee.get('gpu')}, demand {demand})"
        )
