"""Preview the deserved share of every tenant and queue under proposed settings, with the core.

The nodes, queues and tenants come through the scheduling cycle's own mapping
(portal.scheduling.mapping), with the edited values swapped in; the demand is today's (pending
and running jobs' requests, one synthetic pending task per queue: the proportion plugin only
needs the total). Whether tenants split their shares among their queues follows the active
conf, so the preview computes what the cycle will. The core runs here inside a web request, so
the garbage collector stays on (scheduler.adapters.gc_pause pauses it for the cycle worker only).
"""

from dataclasses import dataclass
from typing import Any

from django.db.models import F, FloatField, Sum
from django.db.models.functions import Cast

from jobspec.gpushare import MILLI_PER_GPU, milli_cost
from portal.common.access import OTHER_TENANTS
from portal.jobs.lifecycle import SCHEDULED
from portal.jobs.models import Job, JobTask
from portal.scheduling.mapping import (
    active_conf,
    capacity_nodes,
    device_memory_mib,
    node_info,
    queue_tree,
    scheduled_queues,
    wants_tree,
)
from portal.tenants.access import visible_tenants
from portal.tenants.models import Tenant
from portal.tenants.quota import tenant_node_name
from scheduler.core.config import SchedulerConf, parse_conf
from scheduler.core.cycle import run_cycle
from scheduler.core.resources import Resources
from scheduler.core.types import JobInfo, NodeInfo, QueueInfo, Snapshot, TaskInfo

from .models import Queue

OTHER_TENANTS_LABEL = "combined"
KIND_TENANT = "tenant"
KIND_QUEUE = "queue"
DEMAND_STATUSES = tuple(sorted(SCHEDULED))


@dataclass(frozen=True)
class SharePreview:
    """One row: a tenant (its queues follow it) or a queue."""

    kind: str
    name: str
    tenant: str
    weight: int
    guarantee_gpus: int
    demand_gpus: float
    deserved_now: float
    deserved_after: float
    edited: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "tenant": self.tenant,
            "weight": self.weight,
            "guarantee_gpus": self.guarantee_gpus,
            "demand_gpus": self.demand_gpus,
            "deserved_now": round(self.deserved_now, 2),
            "deserved_after": round(self.deserved_after, 2),
            "edited": self.edited,
        }


def preview_conf(tree: bool) -> SchedulerConf:
    """Only what computes shares: enqueue with the proportion plugin. Each queue's demand is
    one pod of its whole sum (``deserved_gpus``), which no node could hold: the plugin must not
    leave it out as never runnable; the jobs that can never run are left out of the sum
    instead (``current_demand``)."""
    plugin: dict[str, Any] = {"name": "proportion", "arguments": {"excludeNeverRunnable": False}}
    if tree:
        plugin["enableHierarchy"] = True
    return parse_conf({"actions": "enqueue", "tiers": [{"plugins": [plugin]}]})


def deserved_gpus(
    *,
    nodes: list[NodeInfo],
    queues: tuple[QueueInfo, ...],
    demand: dict[str, Resources],
    tree: bool,
) -> dict[str, float]:
    """Pure: each queue's (and tenant's) deserved GPUs under the proportion plugin."""
    jobs = tuple(
        JobInfo(
            name=f"demand-{name}",
            queue=name,
            tasks=(TaskInfo(name=f"demand-{name}-0", requests=request),),
            min_available=1,
        )
        for name, request in sorted(demand.items())
        if not request.is_empty()
    )
    snapshot = Snapshot(nodes=tuple(nodes), queues=queues, jobs=jobs)
    result = run_cycle(snapshot, preview_conf(tree))
    return {
        queue.name: float(result.queues[queue.name].deserved.get("gpu"))
        if queue.name in result.queues
        else 0.0
        for queue in queues
    }


def current_demand(device_mib: int = 0) -> dict[str, Resources]:
    """Requests of pending and running jobs per queue name (one aggregate query, a row per
    queue and GPU shape), without the jobs the last cycle found can never run (the proportion
    plugin leaves them out of a queue's demand too). A pod's GPUs cost what the cycle counts
    before placement (jobspec.gpushare.milli_cost on a card of `device_mib`:
    mapping.device_memory_mib)."""
    # In floating point: a stored job's products can outgrow the database's integers.
    pods = Cast("replicas", FloatField())
    rows = (
        JobTask.objects.filter(job__status__in=DEMAND_STATUSES)
        .exclude(job__pending_kind=Job.PendingKind.NEVER)
        .values("job__queue__name", "gpus", "gpu_milli", "gpu_memory_mib")
        .annotate(
            pods=Sum(pods), cpu=Sum(pods * F("cpu_millis")), memory=Sum(pods * F("memory_bytes"))
        )
        .order_by()
    )
    totals: dict[str, list[float]] = {}
    for row in rows:
        milli = milli_cost(
            gpus=row["gpus"],
            gpu_milli=row["gpu_milli"],
            gpu_memory_mib=row["gpu_memory_mib"],
            device_memory_mib=device_mib,
        )
        total = totals.setdefault(row["job__queue__name"], [0.0, 0.0, 0.0])
        total[0] += row["pods"] * milli
        total[1] += row["cpu"] or 0
        total[2] += row["memory"] or 0
    return {
        name: Resources.of(gpu=milli / MILLI_PER_GPU, cpu=cpu, memory=memory)
        for name, (milli, cpu, memory) in totals.items()
    }


def queue_preview(*, queue: Queue, changes: dict[str, Any]) -> list[SharePreview]:
    """Every tenant's and queue's deserved GPUs now and with `changes` applied to `queue`."""
    return share_preview(kind=KIND_QUEUE, pk=queue.pk, changes=changes)


def tenant_preview(*, tenant: Tenant, changes: dict[str, Any]) -> list[SharePreview]:
    """Every tenant's and queue's deserved GPUs now and with `changes` applied to `tenant`."""
    return share_preview(kind=KIND_TENANT, pk=tenant.pk, changes=changes)


def share_preview(*, kind: str, pk: int, changes: dict[str, Any]) -> list[SharePreview]:
    tree = wants_tree(active_conf())
    queues = scheduled_queues()
    tenants = list(Tenant.objects.order_by("name"))
    node_rows = capacity_nodes()
    nodes = [node_info(node) for node in node_rows]
    demand = current_demand(device_memory_mib(node_rows))
    edits = {(kind, pk): changes}
    # The core gets the cycle's tree; the rows also show the tenants without queues, which
    # have nothing to share (deserved 0).
    now_infos = queue_tree(queues, tree=tree)
    after_infos = queue_tree(queues, tree=tree, edits=edits)
    now = deserved_gpus(nodes=nodes, queues=now_infos, demand=demand, tree=tree)
    after = deserved_gpus(nodes=nodes, queues=after_infos, demand=demand, tree=tree)
    infos = {
        info.name: info for info in queue_tree(queues, tree=tree, tenants=tenants, edits=edits)
    }

    def gpus(res: Resources | None) -> float:
        return float(res.get("gpu")) if res is not None else 0.0

    def row(row_kind: str, name: str, node: str, tenant: Tenant, edited: bool) -> SharePreview:
        info = infos[node]
        if row_kind == KIND_TENANT:
            wanted = sum(gpus(demand.get(q.name)) for q in queues if q.tenant_id == tenant.pk)
        else:
            wanted = gpus(demand.get(name))
        return SharePreview(
            kind=row_kind,
            name=name,
            tenant=tenant.name,
            weight=info.weight,
            guarantee_gpus=int(info.guarantee.get("gpu")),
            demand_gpus=wanted,
            deserved_now=now.get(node, 0.0),
            deserved_after=after.get(node, 0.0),
            edited=edited,
        )

    rows = []
    if not tree:
        for queue in queues:
            rows.append(row(KIND_QUEUE, queue.name, queue.name, queue.tenant, _is(kind, pk, queue)))
        return rows
    for tenant in tenants:
        edited = kind == KIND_TENANT and tenant.pk == pk
        rows.append(row(KIND_TENANT, tenant.name, tenant_node_name(tenant.name), tenant, edited))
        for queue in queues:
            if queue.tenant_id == tenant.pk:
                rows.append(row(KIND_QUEUE, queue.name, queue.name, tenant, _is(kind, pk, queue)))
    return rows


def _is(kind: str, pk: int, queue: Queue) -> bool:
    return kind == KIND_QUEUE and queue.pk == pk


def preview_rows_for(user: Any, rows: list[SharePreview]) -> list[dict[str, Any]]:
    """Preview rows the user may read. The shares need every tenant and queue, but other
    tenants' names, weights and demand are their business (as on the dashboards): the
    top-level rows the user may not see (tenants, or queues under a flat conf) are summed into
    one row, and what is under them is left out; their total still shows what a change costs.
    """
    tenants = set(visible_tenants(user).values_list("name", flat=True))
    top = KIND_TENANT if any(row.kind == KIND_TENANT for row in rows) else KIND_QUEUE
    shown, hidden = [], []
    for row in rows:
        if row.tenant in tenants:
            shown.append(row.as_dict())
        elif row.kind == top:
            hidden.append(row.as_dict())
    if hidden:
        others: dict[str, Any] = {
            "kind": top,
            "name": OTHER_TENANTS,
            "tenant": OTHER_TENANTS_LABEL,
            "edited": False,
        }
        for key in ("weight", "guarantee_gpus", "demand_gpus", "deserved_now", "deserved_after"):
            others[key] = round(sum(row[key] for row in hidden), 2)
        shown.append(others)
    return shown
