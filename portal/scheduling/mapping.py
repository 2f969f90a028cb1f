"""The ORM -> scheduler core mapping: nodes, the queue tree, task requests and the active conf.

One mapping for the scheduling cycle's snapshot (scheduler.adapters.snapshot) and the quota
preview (portal.queues.preview), so the preview computes with the cluster and quotas the cycle
sees. It lives in the portal because the portal may not import the scheduler's adapters (the
import contracts in pyproject.toml), while the adapters import the portal's models anyway.

The tree: root (the cluster) -> tenant -> queue. Under a hierarchical proportion (the shipped
conf) each tenant is the parent queue of its queues; other confs see the queues alone.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Any

from portal.cluster.models import GPU_MODEL_LABEL, Node
from portal.cluster.selectors import node_capacity_list
from portal.cluster.services import NODE_FIELDS
from portal.jobs.affinity import HOSTNAME
from portal.jobs.gpushare import MILLI_PER_GPU, milli_cost, others_gpu_milli
from portal.queues.models import Queue
from portal.tenants.models import Tenant
from portal.tenants.quota import QUOTA_FIELDS, tenant_node_name
from scheduler.core.config import SchedulerConf, default_conf, parse_conf_text
from scheduler.core.resources import Resources
from scheduler.core.types import GpuDevice, NodeInfo, QueueInfo, Taint, Toleration

from .models import SchedulerConfig

MIB = 1024**2
# What node_info reads (everything a node sync reports), and the id the cycle's persist links
# placements to.
NODE_COLUMNS = ("id", *NODE_FIELDS)
QUEUE_FIELDS = (*QUOTA_FIELDS, "priority", "state")
TREE_PLUGIN = "proportion"


# --- the conf --------------------------------------------------------------------------------


def active_conf() -> SchedulerConf:
    """The active SchedulerConfig, or the seed conf if an admin never saved one. Saved configs
    were validated by the same parser, so a parse error here means the parser got stricter:
    fall back rather than stop scheduling the whole cluster."""
    config = SchedulerConfig.objects.filter(active=True).only("text").first()
    if config is None:
        return default_conf()
    try:
        return parse_conf_text(config.text)
    except ValueError:
        return default_conf()


def wants_tree(conf: SchedulerConf) -> bool:
    """Does the conf divide tenants' shares among their queues (proportion, enableHierarchy)?
    Other confs see the queues alone, as before tenants had quotas."""
    option = conf.plugin(TREE_PLUGIN)
    return option is not None and option.enabled("enableHierarchy")


# --- nodes -----------------------------------------------------------------------------------


def capacity_nodes() -> list[Node]:
    """The nodes the cycle shares out (in the cluster and Ready), with what node_info reads."""
    return list(node_capacity_list().only(*NODE_COLUMNS).order_by("name"))


def node_info(node: Node) -> NodeInfo:
    labels = {**node.labels, **node.topology_labels}
    if node.gpu_model:
        labels.setdefault(GPU_MODEL_LABEL, node.gpu_model)
    # The kubelet sets it on every node; pod anti-affinity's only topology key.
    labels.setdefault(HOSTNAME, node.name)
    allocatable = Resources.of(
        {
            "cpu": node.cpu_millis,
            "memory": node.memory_bytes,
            node.gpu_resource_name: node.gpu_count,
            "pods": node.pods_capacity,
        }
    )
    # Other workloads' pods are not the core's to move: they are the node's used, not idle.
    known = ("cpu", "memory", "pods", node.gpu_resource_name)
    used_by_others = node.used_by_others or {}
    others: dict[str, float] = {k: v for k, v in used_by_others.items() if k in known}
    # Shared GPU pods of other schedulers, by the cards they hold: each card's share on its
    # books, their sum in the GPU count (a share, not the whole card their vGPU counts).
    on_cards, milli = others_gpu_milli(
        used_by_others, node.gpu_resource_name, node.gpu_uuids or [], node.gpu_memory_mib
    )
    if milli:
        others[node.gpu_resource_name] = milli / MILLI_PER_GPU
    return NodeInfo(
        name=node.name,
        allocatable=allocatable,
        labels=tuple(sorted(labels.items())),
        unschedulable=not node.schedulable,
        taints=taints_of(node.taints),
        used_by_others=Resources.of(others) if others else Resources(),
        gpus=gpu_devices_of(node.gpu_count, node.gpu_model, node.gpu_memory_mib),
        gpus_used_by_others=tuple(
            (index, held, memory * MIB) for index, (held, memory) in sorted(on_cards.items())
        ),
    )


@functools.lru_cache(maxsize=256)
def gpu_devices_of(count: int, model: str, memory_mib: int) -> tuple[GpuDevice, ...]:
    """A node's cards, indices 0..count-1 (the device plugin's and the sharing stacks'
    numbering), each of the node's GPU memory (0: unknown, so no memory request fits)."""
    return tuple(
        GpuDevice(index=index, model=model, memory=memory_mib * MIB) for index in range(count)
    )


def taints_of(taints: list[dict[str, str]]) -> tuple[Taint, ...]:
    return tuple(
        Taint(key=t.get("key", ""), value=t.get("value") or "", effect=t.get("effect", ""))
        for t in taints
    )


def device_memory_mib(nodes: Iterable[Node]) -> int:
    """The smallest GPU memory (MiB) any node reports for its cards: what a GPU-memory request
    is costed against before it lands on a card (portal.jobs.gpushare.milli_cost)."""
    return min((node.gpu_memory_mib for node in nodes if node.gpu_memory_mib), default=0)


# --- tasks -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def tolerations_of(text: str | None) -> tuple[Toleration, ...]:
    """A task's stored tolerations (JSON text) as the core's, memoised: tasks share a few."""
    if not text or text == "[]":
        return ()
    return tuple(
        Toleration(
            key=item.get("key", ""),
            operator=item.get("operator") or "Equal",
            value=item.get("value", ""),
            effect=item.get("effect", ""),
        )
        for item in json.loads(text)
    )


@functools.lru_cache(maxsize=4096)
def requests_of(cpu_millis: int, memory_bytes: int, gpu_milli: int) -> Resources:
    """A pod's requests, `gpu` in cards (milli-GPU / 1000). Memoised: Resources is immutable,
    and most tasks share a handful of shapes."""
    return Resources.of(cpu=cpu_millis, memory=memory_bytes, gpu=gpu_milli / MILLI_PER_GPU)


def task_requests(task: Any, device_mib: int = 0) -> Resources:
    """One pod's requests (`task`: a JobTask, or a row with its fields); `gpu` in cards, a
    share of one as its fraction (0.25). A GPU-memory request costs its share of a card of
    `device_mib` (device_memory_mib: never under-counted); the cycle records on the placement
    what the pod holds on the card it got."""
    milli = milli_cost(
        gpus=task.gpus,
        gpu_milli=task.gpu_milli,
        gpu_memory_mib=task.gpu_memory_mib,
        device_memory_mib=device_mib,
    )
    return requests_of(task.cpu_millis, task.memory_bytes, milli)


# --- the queue tree --------------------------------------------------------------------------


def scheduled_queues() -> list[Queue]:
    """Every queue, its tenant loaded, in the order the cycle reads them."""
    return list(Queue.objects.select_related("tenant").order_by("name"))


def queue_tree(
    queues: Iterable[Queue],
    *,
    tree: bool,
    tenants: Iterable[Tenant] = (),
    edits: dict[tuple[str, int], dict[str, Any]] | None = None,
    usage: dict[int, tuple] | None = None,
) -> tuple[QueueInfo, ...]:
    """QueueInfos for ``queues`` (their tenant loaded) and, with ``tree``, their tenants plus
    any of ``tenants`` (the cycle passes none: a tenant without queues has nothing to share).
    ``edits`` swaps in proposed values: ("queue" | "tenant", pk) -> fields. ``usage``: queue
    id -> its past use (UsageRecords), for the fairshare plugin."""
    edits = edits or {}
    usage = usage or {}
    parents: dict[int, Tenant] = {tenant.pk: tenant for tenant in tenants}
    infos = []
    for queue in queues:
        values = _values(queue, QUEUE_FIELDS, edits.get(("queue", queue.pk)))
        parents.setdefault(queue.tenant_id, queue.tenant)
        infos.append(
            quota_info(
                values,
                name=queue.name,
                parent=tenant_node_name(queue.tenant.name) if tree else None,
                priority=values["priority"],
                state="Open" if values["state"] == Queue.State.OPEN else "Closed",
                usage=usage.get(queue.pk, ()),
                min_runtime=queue.min_runtime_seconds,
            )
        )
    if tree:
        for tenant in sorted(parents.values(), key=lambda t: t.name):
            values = _values(tenant, QUOTA_FIELDS, edits.get(("tenant", tenant.pk)))
            infos.append(quota_info(values, name=tenant_node_name(tenant.name)))
    return tuple(infos)


def quota_info(
    values: Any,
    *,
    name: str,
    parent: str | None = None,
    priority: int = 0,
    state: str = "Open",
    usage: tuple = (),
    min_runtime: float = 0.0,
) -> QueueInfo:
    """The core's QueueInfo for a tenant or queue: ``values`` is the row or a mapping of the
    quota fields (portal.tenants.quota.QUOTA_FIELDS); ``min_runtime`` the queue's minimum run
    time (the cdp plugin's)."""

    def get(field: str) -> Any:
        return values[field] if isinstance(values, dict) else getattr(values, field)

    def limit(prefix: str) -> Resources:
        given = {
            "gpu": get(f"{prefix}_gpus"),
            "cpu": get(f"{prefix}_cpu_millis"),
            "memory": get(f"{prefix}_memory_bytes"),
        }
        return Resources.unlimited({k: v for k, v in given.items() if v is not None})

    return QueueInfo(
        name=name,
        weight=get("weight"),
        guarantee=Resources.of(
            gpu=get("guarantee_gpus"),
            cpu=get("guarantee_cpu_millis"),
            memory=get("guarantee_memory_bytes"),
        ),
        capability=limit("capability"),
        borrowing_limit=limit("borrowing_limit"),
        reclaimable=get("reclaimable"),
        priority=priority,
        state=state,
        parent=parent,
        usage=usage,
        min_runtime=min_runtime,
    )


def _values(row: Any, fields: tuple[str, ...], edit: dict[str, Any] | None) -> dict[str, Any]:
    values = {field: getattr(row, field) for field in fields}
    if edit:
        values.update({k: v for k, v in edit.items() if k in fields})
    return values
