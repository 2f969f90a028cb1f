"""Tiny snapshot builders for core tests: make_node(), make_job(), make_task(), run()."""

from __future__ import annotations

from scheduler.core.config import parse_conf
from scheduler.core.cycle import run_cycle
from scheduler.core.resources import Resources
from scheduler.core.types import (
    CycleResult,
    JobInfo,
    NodeInfo,
    QueueInfo,
    Snapshot,
    TaskInfo,
    TaskStatus,
)

GI = 1024**3
SEED_TIERS = [
    {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
    {
        "plugins": [
            {"name": "predicates"},
            {"name": "proportion"},
            {"name": "binpack", "arguments": {"binpack.resources": "gpu"}},
        ]
    },
]


def res(gpu: int = 0, cpu: int = 1000, memory: int = GI, **extra: int) -> Resources:
    values = {"cpu": cpu, "memory": memory, **extra}
    if gpu:
        values["gpu"] = gpu
    return Resources(values)


def make_node(name: str, gpu: int = 8, cpu: int = 96000, memory: int = 1024 * GI, **kw):
    return NodeInfo(name, res(gpu, cpu, memory), **kw)


def make_task(name: str, gpu: int = 1, status: str = "Pending", node: str | None = None, **kw):
    requests = kw.pop("requests", None) or res(gpu)
    return TaskInfo(name, requests, TaskStatus(status), node, **kw)


def make_job(name: str, queue: str, tasks, created: float = 0, **kw) -> JobInfo:
    return JobInfo(name, queue, tuple(tasks), created=created, **kw)


def make_queue(name: str, **kw) -> QueueInfo:
    for key in ("capability", "borrowing_limit"):
        if isinstance(kw.get(key), dict):
            kw[key] = Resources.unlimited(kw[key])
    for key in ("guarantee", "deserved"):
        if isinstance(kw.get(key), dict):
            kw[key] = Resources(kw[key])
    return QueueInfo(name, **kw)


def run(nodes, queues, jobs, actions="enqueue, allocate", tiers=None, now=0.0) -> CycleResult:
    conf = parse_conf({"actions": actions, "tiers": tiers or SEED_TIERS})
    return run_cycle(Snapshot(tuple(nodes), tuple(queues), tuple(jobs), now), conf)


def binds(result: CycleResult) -> dict[str, str]:
    return {b.task: b.node for b in result.binds}


def evicted(result: CycleResult) -> list[str]:
    return sorted(e.task for e in result.evictions)
