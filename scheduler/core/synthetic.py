"""A synthetic cluster and workload for benchmarking the core (pure and seeded).

Nodes: 8 GPUs, 96 cpu, 1 TiB memory, a ``topology.kubernetes.io/zone`` label per 32 nodes (so the
seed conf's network-topology-aware plugin has domains to weigh, as on a real cluster). Jobs: gangs of 1/2/4/8/16/32
GPUs (weights 30/20/20/15/10/5%); a gang above 8 GPUs is replicas of 8-GPU pods. Queues have
weights 1..4; with ``tenants`` they hang under that many tenant queues (``tenant/tNN``, queue i
under tenant i mod tenants), the tree the portal gives the hierarchical proportion.
``running_fraction`` pre-fills that share of the GPUs with running jobs (placed first fit, queue
by queue) so preempt and reclaim have victims to consider.
"""

from __future__ import annotations

import random

from scheduler.core.resources import Resources
from scheduler.core.types import JobInfo, NodeInfo, QueueInfo, Snapshot, TaskInfo, TaskStatus

GPUS_PER_NODE = 8
NODE_CPU = 96_000
NODE_MEMORY = 1024**4
NODES_PER_ZONE = 32
JOB_GPUS = (1, 2, 4, 8, 16, 32)
JOB_WEIGHTS = (30, 20, 20, 15, 10, 5)
ZONE_LABEL = "topology.kubernetes.io/zone"


def _pod_request(gpus: int) -> Resources:
    # cpu and memory in proportion to the GPUs, so GPUs stay the bottleneck.
    return Resources.of(
        {"nvidia.com/gpu": gpus, "cpu": 12_000 * gpus, "memory": 128 * 1024**3 * gpus}
    )


def _gang(gpus: int) -> tuple[int, int]:
    """(pods, GPUs per pod)."""
    return (gpus // GPUS_PER_NODE, GPUS_PER_NODE) if gpus > GPUS_PER_NODE else (1, gpus)


def synthetic_snapshot(
    nodes: int,
    jobs: int,
    queues: int,
    seed: int = 0,
    running_fraction: float = 0.0,
    tenants: int = 0,
) -> Snapshot:
    rng = random.Random(seed)  # noqa: S311 - a seeded workload, not a secret
    node_infos = tuple(
        NodeInfo(
            f"node-{i:05d}",
            Resources.of({"nvidia.com/gpu": GPUS_PER_NODE, "cpu": NODE_CPU, "memory": NODE_MEMORY}),
            labels=((ZONE_LABEL, f"zone-{i // NODES_PER_ZONE:03d}"),),
        )
        for i in range(nodes)
    )
    parents = [f"tenant/t{t:02d}" for t in range(tenants)]
    queue_infos = tuple(
        QueueInfo(f"q{i:03d}", weight=1 + i % 4, parent=parents[i % tenants] if tenants else None)
        for i in range(queues)
    )
    free = [GPUS_PER_NODE] * nodes
    budget = int(running_fraction * nodes * GPUS_PER_NODE)
    job_infos: list[JobInfo] = []
    for j in range(jobs):
        gpus = rng.choices(JOB_GPUS, JOB_WEIGHTS)[0]
        queue = queue_infos[rng.randrange(queues)].name
        priority = rng.choice((0, 0, 0, 1, 2))
        pods, per_pod = _gang(gpus)
        name = f"job-{j:06d}"
        placed = _first_fit(free, pods, per_pod) if budget >= gpus else None
        if placed is not None:
            budget -= gpus
        tasks = tuple(
            TaskInfo(
                f"{name}-{p}",
                _pod_request(per_pod),
                TaskStatus.RUNNING if placed else TaskStatus.PENDING,
                node_infos[placed[p]].name if placed else None,
                priority=priority,
            )
            for p in range(pods)
        )
        job_infos.append(
            JobInfo(name, queue, tasks, priority=priority, min_available=pods, created=float(j))
        )
    tenant_infos = tuple(QueueInfo(name) for name in parents)
    return Snapshot(node_infos, queue_infos + tenant_infos, tuple(job_infos), now=float(jobs))


def _first_fit(free: list[int], pods: int, per_pod: int) -> list[int] | None:
    chosen: list[int] = []
    for index, left in enumerate(free):
        if left >= per_pod:
            chosen.append(index)
            if len(chosen) == pods:
                break
    if len(chosen) < pods:
        return None
    for index in chosen:
        free[index] -= per_pod
    return chosen
