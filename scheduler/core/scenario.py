"""Scenario files (SCENARIOS.md) to core inputs, and a cycle's result back to plain data.

Pure: takes and returns plain dicts. Every validation error is a ``ScenarioError`` naming the
field, e.g. ``jobs[3].tasks[0].requests.gpu: expected a non-negative integer``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from scheduler.core.config import (
    ConfigError,
    SchedulerConf,
    default_conf,
    parse_conf,
    parse_conf_text,
)
from scheduler.core.resources import (
    CPU,
    GPU,
    MEMORY,
    MILLI_PER_GPU,
    PODS,
    Resources,
    canonical_name,
    gpu_milli,
    memory_cost_milli,
)
from scheduler.core.types import (
    CycleResult,
    GpuDevice,
    JobInfo,
    NodeInfo,
    PodGroupPhase,
    QueueInfo,
    Snapshot,
    Taint,
    TaskInfo,
    TaskStatus,
    Toleration,
    UsageRecord,
)


class ScenarioError(ConfigError):
    """Invalid scenario input; ``field`` is the path of the offending value."""


_STATUSES = {s.value: s for s in TaskStatus}
_PHASES = {p.value: p for p in PodGroupPhase}


def load_scenario(data: Any) -> tuple[Snapshot, SchedulerConf]:
    if not isinstance(data, dict):
        raise ScenarioError("(top level)", "expected a mapping")
    try:
        if "config_yaml" in data:
            text = data["config_yaml"]
            if not isinstance(text, str):
                raise ScenarioError("config_yaml", "expected the text of a volcano-scheduler.conf")
            conf = parse_conf_text(text)
        elif "config" in data:
            conf = parse_conf(data["config"])
        else:
            conf = default_conf()
    except ScenarioError:
        raise
    except ConfigError as exc:
        raise ScenarioError(exc.field, exc.message) from exc
    nodes = _parse_nodes(_list(data, "nodes"))
    queues = _parse_queues(_list(data, "queues"))
    jobs = _cost_gpu_memory(nodes, _parse_jobs(_list(data, "jobs")))
    now = _number(data.get("now", 0), "now")
    last = data.get("last_rescheduling")
    last = None if last is None else _number(last, "last_rescheduling")
    return Snapshot(nodes, queues, jobs, now, last), conf


# helpers ------------------------------------------------------------------------------------
def _list(data: dict[str, Any], key: str, path: str = "") -> list[Any]:
    value = data.get(key, [])
    field = f"{path}.{key}" if path else key
    if value is None:
        return []
    if not isinstance(value, list):
        raise ScenarioError(field, f"expected a list, got {type(value).__name__}")
    return value


def _mapping(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ScenarioError(field, f"expected a mapping, got {type(value).__name__}")
    return value


def _str(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ScenarioError(field, "expected a non-empty string")
    return value


def _bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(field, "expected true or false")
    return value


def _int(value: Any, field: str, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ScenarioError(field, "expected an integer")
    number = int(value)
    if minimum is not None and number < minimum or maximum is not None and number > maximum:
        span = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise ScenarioError(field, f"expected an integer in {span}, got {number}")
    return number


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ScenarioError(field, "expected a number")
    return value


def _resources(
    value: Any, field: str, unlimited: bool = False, gpu_share: bool = False
) -> Resources:
    """A resource map; with ``gpu_share`` (a pod's requests) ``gpu`` may also be a share of one
    card in milli-GPU steps (0.25, 0.125), never a whole-and-a-part (1.5)."""
    raw = _mapping(value, field)
    values: dict[str, float] = {}
    for name, amount in raw.items():
        sub = f"{field}.{name}"
        if not isinstance(name, str) or not name:
            raise ScenarioError(field, "resource names must be non-empty strings")
        key = canonical_name(name)
        if (
            gpu_share
            and key == GPU
            and isinstance(amount, float)
            and 0 < amount < 1
            and abs(gpu_milli(amount) - amount * MILLI_PER_GPU) < 1e-6
        ):
            values[key] = values.get(key, 0) + gpu_milli(amount) / MILLI_PER_GPU
            continue
        if (
            isinstance(amount, bool)
            or not isinstance(amount, int | float)
            or amount < 0
            or amount != int(amount)
        ):
            if gpu_share and key == GPU:
                raise ScenarioError(
                    sub, "expected whole GPUs or a share of one GPU in steps of 0.001"
                )
            raise ScenarioError(sub, "expected a non-negative integer")
        values[key] = values.get(key, 0) + int(amount)
    return Resources.unlimited(values) if unlimited else Resources(values)


def _labels(value: Any, field: str) -> tuple[tuple[str, str], ...]:
    raw = _mapping(value, field)
    for key, item in raw.items():
        if not isinstance(item, str):
            raise ScenarioError(f"{field}.{key}", "expected a string")
    return tuple(sorted(raw.items()))


def _unique(names: list[str], what: str, path: str) -> None:
    seen: set[str] = set()
    for index, name in enumerate(names):
        if name in seen:
            raise ScenarioError(f"{path}[{index}].name", f"duplicate {what} name {name!r}")
        seen.add(name)


# sections -----------------------------------------------------------------------------------
def _parse_nodes(raw: list[Any]) -> tuple[NodeInfo, ...]:
    nodes = []
    for index, item in enumerate(raw):
        path = f"nodes[{index}]"
        item = _mapping(item, path)
        taints = []
        for t_index, taint in enumerate(_list(item, "taints", path)):
            t_path = f"{path}.taints[{t_index}]"
            taint = _mapping(taint, t_path)
            effect = taint.get("effect", "NoSchedule")
            if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                raise ScenarioError(f"{t_path}.effect", f"unknown taint effect {effect!r}")
            taints.append(
                Taint(_str(taint.get("key"), f"{t_path}.key"), str(taint.get("value", "")), effect)
            )
        allocatable = _resources(item.get("allocatable"), f"{path}.allocatable")
        nodes.append(
            NodeInfo(
                name=_str(item.get("name"), f"{path}.name"),
                allocatable=allocatable,
                labels=_labels(item.get("labels"), f"{path}.labels"),
                unschedulable=_bool(item.get("unschedulable", False), f"{path}.unschedulable"),
                taints=tuple(taints),
                gpus=_gpus(item, path, allocatable),
            )
        )
    _unique([n.name for n in nodes], "node", "nodes")
    return tuple(nodes)


def _gpus(item: dict[str, Any], path: str, allocatable: Resources) -> tuple[GpuDevice, ...]:
    """``gpus: [{"index": 0, "model": "A100", "memory": bytes}]``, one per card of
    ``allocatable.gpu``; absent: the cards are numbered from 0, memory unknown."""
    devices = []
    for d_index, raw in enumerate(_list(item, "gpus", path)):
        d_path = f"{path}.gpus[{d_index}]"
        raw = _mapping(raw, d_path)
        devices.append(
            GpuDevice(
                index=_int(raw.get("index", d_index), f"{d_path}.index", 0),
                model=str(raw.get("model") or ""),
                memory=_int(raw.get("memory", 0), f"{d_path}.memory", 0),
            )
        )
    if devices:
        _unique([str(d.index) for d in devices], "GPU index", f"{path}.gpus")
        if len(devices) != int(allocatable.get(GPU)):
            raise ScenarioError(
                f"{path}.gpus",
                f"lists {len(devices)} GPUs but allocatable.gpu is {allocatable.get(GPU):g}",
            )
    return tuple(devices)


def _cost_gpu_memory(nodes: tuple[NodeInfo, ...], jobs: tuple[JobInfo, ...]) -> tuple[JobInfo, ...]:
    """A task asking GPU memory and no ``gpu`` costs ceil(memory / device memory x 1000)
    milli-GPU of the smallest card any node lists (what quota counts; the device itself must
    still have the memory free)."""
    sizes = [d.memory for n in nodes for d in n.gpus if d.memory]
    out = []
    for j_index, job in enumerate(jobs):
        tasks = []
        for t_index, task in enumerate(job.tasks):
            if task.gpu_memory and task.requests.get(GPU) <= 0:
                if not sizes:
                    raise ScenarioError(
                        f"jobs[{j_index}].tasks[{t_index}].gpu_memory",
                        "no node lists its GPUs' memory (nodes[].gpus[].memory)",
                    )
                milli = memory_cost_milli(task.gpu_memory, min(sizes))
                requests = Resources({**task.requests.explicit(), GPU: milli / MILLI_PER_GPU})
                task = replace(task, requests=requests)
            tasks.append(task)
        out.append(replace(job, tasks=tuple(tasks)))
    return tuple(out)


def _parse_queues(raw: list[Any]) -> tuple[QueueInfo, ...]:
    queues = []
    for index, item in enumerate(raw):
        path = f"queues[{index}]"
        item = _mapping(item, path)
        state = item.get("state", "Open")
        if state not in ("Open", "Closed", "Closing", "Unknown"):
            raise ScenarioError(f"{path}.state", f"expected Open or Closed, got {state!r}")
        deserved = item.get("deserved")
        parent = item.get("parent")
        queues.append(
            QueueInfo(
                name=_str(item.get("name"), f"{path}.name"),
                weight=_int(item.get("weight", 1), f"{path}.weight", 1, 65535),
                guarantee=_resources(item.get("guarantee"), f"{path}.guarantee"),
                capability=_resources(item.get("capability"), f"{path}.capability", True),
                borrowing_limit=_resources(
                    item.get("borrowing_limit"), f"{path}.borrowing_limit", True
                ),
                deserved=None if deserved is None else _resources(deserved, f"{path}.deserved"),
                reclaimable=_bool(item.get("reclaimable", True), f"{path}.reclaimable"),
                priority=_int(item.get("priority", 0), f"{path}.priority"),
                state=state,
                parent=None if parent is None else _str(parent, f"{path}.parent"),
                annotations=_labels(item.get("annotations"), f"{path}.annotations"),
                usage=_usage(_list(item, "usage", path), f"{path}.usage"),
            )
        )
    _unique([q.name for q in queues], "queue", "queues")
    return tuple(queues)


def _usage(raw: list[Any], path: str) -> tuple[UsageRecord, ...]:
    """``[{"at": seconds, "gpu": GPU-seconds, ...}]``: past use for the fairshare plugin."""
    records = []
    for index, item in enumerate(raw):
        item = _mapping(item, f"{path}[{index}]")
        at = _number(item.get("at"), f"{path}[{index}].at")
        used = {key: value for key, value in item.items() if key != "at"}
        records.append(UsageRecord(at, _resources(used, f"{path}[{index}]")))
    return tuple(records)


def _parse_jobs(raw: list[Any]) -> tuple[JobInfo, ...]:
    jobs = []
    task_names: list[str] = []
    for index, item in enumerate(raw):
        path = f"jobs[{index}]"
        item = _mapping(item, path)
        tasks = tuple(
            _parse_task(task, f"{path}.tasks[{t_index}]")
            for t_index, task in enumerate(_list(item, "tasks", path))
        )
        task_names += [t.name for t in tasks]
        phase = item.get("phase")
        if phase is not None and phase not in _PHASES:
            raise ScenarioError(f"{path}.phase", "expected Pending, Inqueue or Running")
        min_available = item.get("min_available")
        min_resources = item.get("min_resources")
        members = _mapping(item.get("min_task_member"), f"{path}.min_task_member")
        jobs.append(
            JobInfo(
                name=_str(item.get("name"), f"{path}.name"),
                queue=_str(item.get("queue"), f"{path}.queue"),
                tasks=tasks,
                priority=_int(item.get("priority", 0), f"{path}.priority"),
                min_available=None
                if min_available is None
                else _int(min_available, f"{path}.min_available", 0),
                created=_number(item.get("created", 0), f"{path}.created"),
                namespace=_str(item.get("namespace", "default"), f"{path}.namespace"),
                phase=None if phase is None else _PHASES[phase],
                min_resources=None
                if min_resources is None
                else _resources(min_resources, f"{path}.min_resources"),
                min_task_member=tuple(
                    sorted(
                        (str(role), _int(n, f"{path}.min_task_member.{role}", 0))
                        for role, n in members.items()
                    )
                ),
            )
        )
    _unique([j.name for j in jobs], "job", "jobs")
    seen: set[str] = set()
    for name in task_names:
        if name in seen:
            raise ScenarioError("jobs", f"duplicate task name {name!r}")
        seen.add(name)
    return tuple(jobs)


def _parse_task(item: Any, path: str) -> TaskInfo:
    item = _mapping(item, path)
    status = item.get("status", "Pending")
    if status not in _STATUSES:
        raise ScenarioError(f"{path}.status", f"unknown status {status!r}")
    node = item.get("node")
    tolerations = []
    for t_index, raw in enumerate(_list(item, "tolerations", path)):
        t_path = f"{path}.tolerations[{t_index}]"
        raw = _mapping(raw, t_path)
        tolerations.append(
            Toleration(
                key=str(raw.get("key", "")),
                operator=str(raw.get("operator", "Equal")),
                value=str(raw.get("value", "")),
                effect=str(raw.get("effect", "")),
            )
        )
    affinity = item.get("affinity")
    if affinity is not None:
        _mapping(affinity, f"{path}.affinity")
    policy = item.get("preemption_policy") or "PreemptLowerPriority"
    return TaskInfo(
        name=_str(item.get("name"), f"{path}.name"),
        requests=_resources(item.get("requests"), f"{path}.requests", gpu_share=True),
        status=_STATUSES[status],
        node=None if node is None else _str(node, f"{path}.node"),
        priority=_int(item.get("priority", 1), f"{path}.priority"),
        preemptable=_bool(item.get("preemptable", True), f"{path}.preemptable"),
        preemption_policy=_str(policy, f"{path}.preemption_policy"),
        role=str(item.get("role") or ""),
        labels=_labels(item.get("labels"), f"{path}.labels"),
        node_selector=_labels(item.get("node_selector"), f"{path}.node_selector"),
        tolerations=tuple(tolerations),
        affinity=affinity or None,
        gpu_memory=_int(item.get("gpu_memory", 0), f"{path}.gpu_memory", 0),
        gpu_indices=tuple(
            _int(i, f"{path}.gpu_indices[{n}]", 0)
            for n, i in enumerate(_list(item, "gpu_indices", path))
        ),
    )


# output -------------------------------------------------------------------------------------
def _num(value: float) -> float | int | None:
    if value in (math.inf, -math.inf):
        return None
    return int(value) if value == int(value) else round(value, 3)


def _res_dict(res: Resources, names: list[str]) -> dict[str, float | int | None]:
    return {name: _num(res.get(name)) for name in names}


def result_to_dict(result: CycleResult) -> dict[str, Any]:
    queues = {}
    for name in sorted(result.queues):
        share = result.queues[name]
        named = set()
        for res in (share.deserved, share.allocated, share.request, share.guarantee):
            named |= {n for n in res.explicit() if n != PODS}
        named |= set(share.capability.explicit())
        names = [CPU, MEMORY, GPU] + sorted(named - {CPU, MEMORY, GPU})
        entry = {
            "deserved": _res_dict(share.deserved, names),
            "allocated": _res_dict(share.allocated, names),
            "request": _res_dict(share.request, names),
            "guarantee": _res_dict(share.guarantee, names),
        }
        capability = {n: _num(v) for n, v in sorted(share.capability.explicit().items())}
        entry["capability"] = capability
        queues[name] = entry
    return {
        "bind": {b.task: b.node for b in result.binds},
        "evict": [e.task for e in result.evictions],
        "pipelined": {p.task: p.node for p in result.pipelined},
        "pending": dict(sorted(result.pending_reasons.items())),
        "pending_kind": dict(sorted(result.pending_kinds.items())),
        "queues": queues,
        "phases": dict(sorted(result.phases.items())),
        # the GPU cards each placed pod gets, by index on its node
        "devices": {
            **{b.task: list(b.gpus) for b in result.binds if b.gpus},
            **{p.task: list(p.gpus) for p in result.pipelined if p.gpus},
        },
        "work_conservation": {
            "idle_gpus": _num(result.work_conservation.idle_gpus),
            "held_with_idle_room": list(result.work_conservation.held_with_idle_room),
            "lent": list(result.work_conservation.lent),
            "reclaim_waits": list(result.work_conservation.reclaim_waits),
        },
        "evictions": [
            {
                "task": e.task,
                "job": e.job,
                "node": e.node,
                "action": e.action,
                "preemptor_task": e.preemptor_task,
                "preemptor_job": e.preemptor_job,
                "reason": e.reason,
                "gpus": list(e.gpus),
            }
            for e in result.evictions
        ],
    }
