"""The ORM -> scheduler core mapping: nodes, the queue tree, jobs, their tasks and
placements, task requests and the active conf.

The one translation of the portal's rows into the core's snapshot types, for the scheduling
cycle's snapshot (scheduler.adapters.snapshot, which reads the rows in one transaction and
keeps the index its decisions are written back through) and for the quota preview
(portal.queues.preview), so the preview computes with the cluster and quotas the cycle sees.
It knows the portal's models and the core's types, and nothing of the cycle's I/O.

The tree: root (the cluster) -> tenant -> queue. Under a hierarchical proportion (the shipped
conf) each tenant is the parent queue of its queues; other confs see the queues alone.

Jobs, tasks and placements come as slotted rows of plain column values, not model instances:
at 10,000 jobs, building model instances was most of the snapshot's cost.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from jobspec.affinity import HOSTNAME
from jobspec.gpushare import MILLI_PER_GPU, milli_cost, others_gpu_milli
from jobspec.labels import JOB_ID
from jobspec.labels import pod_name as task_key
from jobspec.podspec import affinity_for_job
from portal.cluster.models import GPU_MODEL_LABEL, Node, Placement
from portal.cluster.selectors import node_capacity_list
from portal.cluster.services import NODE_FIELDS
from portal.jobs.lifecycle import SCHEDULED
from portal.queues.models import Queue
from portal.tenants.models import Tenant
from portal.tenants.quota import QUOTA_FIELDS, tenant_node_name
from scheduler.core.config import SchedulerConf, default_conf, parse_conf_text
from scheduler.core.resources import Resources
from scheduler.core.types import (
    GpuDevice,
    JobInfo,
    NodeInfo,
    QueueInfo,
    Taint,
    TaskInfo,
    TaskStatus,
    Toleration,
)

from .models import SchedulerConfig

MIB = 1024**2
# What node_info reads (everything a node sync reports), and the id the cycle's persist links
# placements to.
NODE_COLUMNS = ("id", *NODE_FIELDS)
QUEUE_FIELDS = (*QUOTA_FIELDS, "priority", "state")
TREE_PLUGIN = "proportion"
# Jobs the scheduler still has work for; every other status is final or cancelled.
SCHEDULABLE_STATUSES = tuple(sorted(SCHEDULED))
_PLACEMENT_TASK_STATUS: dict[str, TaskStatus] = {
    Placement.State.BOUND: TaskStatus.BOUND,
    Placement.State.RUNNING: TaskStatus.RUNNING,
    Placement.State.RELEASING: TaskStatus.RELEASING,
    Placement.State.SUCCEEDED: TaskStatus.SUCCEEDED,
    # A failed pod waiting for its job's delayed policy action (portal.jobs.delays): neither
    # holding its node nor waiting to be placed.
    Placement.State.FAILED: TaskStatus.FAILED,
}


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
    Other confs see the queues alone, without their tenants."""
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
    is costed against before it lands on a card (jobspec.gpushare.milli_cost)."""
    return min((node.gpu_memory_mib for node in nodes if node.gpu_memory_mib), default=0)


def capacity_device_memory_mib() -> int:
    """device_memory_mib of the nodes the cycle reads (capacity_nodes), their memory alone:
    what the pages count a job's GPU memory as, the cycle's figure."""
    return device_memory_mib(node_capacity_list().only("gpu_memory_mib"))


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


# --- jobs ------------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class JobRow:
    """The Job columns the cycle reads; persist updates `status`, `pending_reason`,
    `pending_kind` and `preemption_count` in place as it writes them, so later steps see the
    new values."""

    id: int
    name: str
    queue_id: int
    priority: int
    min_available: int
    status: str
    created: float  # submitted_at as seconds since 1970 (the core's JobInfo.created)
    pending_reason: str
    pending_kind: str
    preemption_count: int
    object_prefix: str  # its objects' names (jobspec.labels.job_object_name)
    queue: Queue | None = None  # joined in memory from the queues read


@dataclasses.dataclass(frozen=True, slots=True)
class TaskRow:
    id: int
    job_id: int
    name: str
    replicas: int
    gpus: int
    gpu_milli: int  # a share of one device (jobspec.gpushare)
    gpu_memory_mib: int
    cpu_millis: int
    memory_bytes: int
    node_selector: dict[str, str]
    tolerations: tuple[Toleration, ...]
    # The template's spec.affinity (jobspec.affinity) and metadata.labels: None for
    # nearly every task.
    affinity: Any
    template_labels: Any


@dataclasses.dataclass(slots=True)
class PlacementRow:
    id: int
    job_id: int
    task_id: int
    replica: int
    node_name: str
    state: str
    gpus: int
    gpu_milli: int  # what the pod holds on its node (a memory request's cost is the node's)
    gpu_devices: list[int]
    started_at: datetime  # the bind: what cdp measures a pod's minimum run time from


def _read_columns(row: type) -> tuple[str, ...]:
    """The columns a row class is read from: its fields in order, but those with a default
    (filled in memory, like JobRow.queue)."""
    return tuple(f.name for f in dataclasses.fields(row) if f.default is dataclasses.MISSING)


JOB_COLUMNS = _read_columns(JobRow)
TASK_COLUMNS = _read_columns(TaskRow)
PLACEMENT_COLUMNS = _read_columns(PlacementRow)


class PendingReplica(NamedTuple):
    # A tuple: one per pending replica (12,000 at 10,000 jobs), built faster than a dataclass.
    task: TaskRow
    replica: int


class RowIndex(Protocol):
    """Where the rows behind the core's names are kept, to turn its decisions back into
    writes (scheduler.adapters.snapshot.SnapshotIndex)."""

    device_mib: int  # device_memory_mib of the nodes read
    pending: dict[str, PendingReplica]  # replicas without a placement
    pending_gpus: dict[str, float]  # queue name -> GPUs asked by pending replicas
    placements: dict[str, PlacementRow]  # active placements


def held_requests(requests: Resources, placement: PlacementRow) -> Resources:
    """A placed pod's requests with the GPUs it holds on its node: a GPU-memory request costs
    that node's device's share, which may be more than the snapshot's lower bound."""
    if not placement.gpu_milli or placement.gpu_milli / MILLI_PER_GPU == requests.get("gpu"):
        return requests
    return requests_of(int(requests.get("cpu")), int(requests.get("memory")), placement.gpu_milli)


def job_info(
    job: JobRow,
    job_tasks: list[TaskRow],
    by_replica: dict[tuple[int, int], PlacementRow],
    index: RowIndex,
) -> JobInfo:
    """The core's JobInfo of a job's rows (`by_replica`: its placements by (task id,
    replica)); each of its replicas goes into `index` under the core's name for it."""
    schedulable = job.status in SCHEDULABLE_STATUSES
    queue = job.queue
    tasks = []
    # Pod labels matter only to pod anti-affinity, which the portal confines to the job's own
    # pods (podspec.affinity_for_job): labelled only in the jobs that have some.
    job_label = (JOB_ID, str(job.id))
    labelled = any((task.affinity or {}).get("podAntiAffinity") for task in job_tasks)
    for task in job_tasks:
        requests = task_requests(task, index.device_mib)
        selector = tuple(sorted(task.node_selector.items())) if task.node_selector else ()
        affinity = affinity_for_job(task.affinity, job_label[1]) if task.affinity else None
        labels: tuple[tuple[str, str], ...] = ()
        if labelled:
            labels = tuple(sorted({**(task.template_labels or {}), JOB_ID: job_label[1]}.items()))
        for replica in range(task.replicas):
            # the pod's first name, so the core's sentences name the pod the user sees
            name = task_key(job.id, task.name, replica, prefix=job.object_prefix)
            placement = by_replica.get((task.id, replica))
            if placement is None and not schedulable:
                continue
            if placement is None:
                index.pending[name] = PendingReplica(task=task, replica=replica)
                index.pending_gpus[queue.name] += requests.get("gpu")
                status, node = TaskStatus.PENDING, None
            else:
                status, node = _PLACEMENT_TASK_STATUS[placement.state], placement.node_name
                if placement.state in Placement.ACTIVE_STATES:
                    index.placements[name] = placement
            tasks.append(
                TaskInfo(
                    name=name,
                    requests=requests if placement is None else held_requests(requests, placement),
                    gpu_memory=task.gpu_memory_mib * MIB,
                    gpu_indices=tuple(placement.gpu_devices or ()) if placement else (),
                    started=placement.started_at.timestamp() if placement else None,
                    status=status,
                    node=node,
                    role=task.name,
                    node_selector=selector,
                    tolerations=task.tolerations,
                    affinity=affinity,
                    labels=labels,
                )
            )
    return JobInfo(
        name=str(job.id),
        queue=queue.name,
        tasks=tuple(tasks),
        priority=job.priority,
        min_available=job.min_available,
        created=job.created,
        # The queue's tenant, as the job's own tenant_id is always the queue's (job_submit).
        namespace=queue.tenant.name,
    )


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
