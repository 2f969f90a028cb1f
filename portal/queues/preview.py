"""Preview the deserved share of every queue under proposed settings, with the pure core.

A tiny portal-side builder (the portal may not import scheduler.adapters): current nodes,
every queue with the edited values swapped in, and the current demand (pending and running
jobs' requests, one synthetic pending task per queue: the proportion plugin only needs the
total). The core's proportion plugin does the water-filling.
"""

from dataclasses import dataclass
from typing import Any

from django.db.models import F, Sum

from portal.cluster.models import Node
from portal.jobs.models import Job, JobTask
from scheduler.core.config import parse_conf_text
from scheduler.core.cycle import run_cycle
from scheduler.core.resources import Resources
from scheduler.core.types import JobInfo, NodeInfo, QueueInfo, Snapshot, TaskInfo

from .models import Queue

PREVIEW_CONF_TEXT = """\
actions: "enqueue"
tiers:
- plugins:
  - name: proportion
"""
DEMAND_STATUSES = (
    Job.Status.PENDING,
    Job.Status.ADMITTED,
    Job.Status.RUNNING,
    Job.Status.PREEMPTED,
)


@dataclass(frozen=True)
class QueuePreview:
    name: str
    tenant: str
    weight: int
    demand_gpus: float
    deserved_now: float
    deserved_after: float
    edited: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tenant": self.tenant,
            "weight": self.weight,
            "demand_gpus": self.demand_gpus,
            "deserved_now": round(self.deserved_now, 2),
            "deserved_after": round(self.deserved_after, 2),
            "edited": self.edited,
        }


def _limit(gpus: int | None, cpu: int | None, memory: int | None) -> Resources:
    given = {"gpu": gpus, "cpu": cpu, "memory": memory}
    return Resources.unlimited({k: v for k, v in given.items() if v is not None})


def queue_info_from(values: dict[str, Any], name: str) -> QueueInfo:
    """A core QueueInfo from a dict of Queue field values."""
    return QueueInfo(
        name=name,
        weight=values["weight"],
        guarantee=Resources.of(
            gpu=values["guarantee_gpus"],
            cpu=values["guarantee_cpu_millis"],
            memory=values["guarantee_memory_bytes"],
        ),
        capability=_limit(
            values["capability_gpus"],
            values["capability_cpu_millis"],
            values["capability_memory_bytes"],
        ),
        borrowing_limit=_limit(
            values["borrowing_limit_gpus"],
            values["borrowing_limit_cpu_millis"],
            values["borrowing_limit_memory_bytes"],
        ),
        reclaimable=values["reclaimable"],
        priority=values["priority"],
        state="Open" if values["state"] == Queue.State.OPEN else "Closed",
    )


def node_info_from(node: Node) -> NodeInfo:
    return NodeInfo(
        name=node.name,
        allocatable=Resources.of(
            {"cpu": node.cpu_millis, "memory": node.memory_bytes, "gpu": node.gpu_count}
        ),
        unschedulable=not node.schedulable,
    )


def deserved_gpus(
    *, nodes: list[NodeInfo], queues: list[QueueInfo], demand: dict[str, Resources]
) -> dict[str, float]:
    """Pure: each queue's deserved GPUs under the proportion plugin."""
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
    snapshot = Snapshot(nodes=tuple(nodes), queues=tuple(queues), jobs=jobs)
    result = run_cycle(snapshot, parse_conf_text(PREVIEW_CONF_TEXT))
    return {
        queue.name: float(result.queues[queue.name].deserved.get("gpu"))
        if queue.name in result.queues
        else 0.0
        for queue in queues
    }


def current_demand() -> dict[str, Resources]:
    """Requests of pending and running jobs per queue name (one aggregate query)."""
    rows = (
        JobTask.objects.filter(job__status__in=DEMAND_STATUSES)
        .values("job__queue__name")
        .annotate(
            gpus=Sum(F("replicas") * F("gpus")),
            cpu=Sum(F("replicas") * F("cpu_millis")),
            memory=Sum(F("replicas") * F("memory_bytes")),
        )
    )
    return {
        row["job__queue__name"]: Resources.of(
            gpu=row["gpus"] or 0, cpu=row["cpu"] or 0, memory=row["memory"] or 0
        )
        for row in rows
    }


def queue_preview(*, queue: Queue, changes: dict[str, Any]) -> list[QueuePreview]:
    """Every queue's deserved GPUs now and with `changes` applied to `queue`."""
    from .services import EDITABLE_FIELDS

    queues = list(Queue.objects.select_related("tenant").order_by("name"))
    nodes = [node_info_from(node) for node in Node.objects.order_by("name")]
    demand = current_demand()
    now_infos, after_infos = [], []
    for row in queues:
        values = {field: getattr(row, field) for field in EDITABLE_FIELDS}
        now_infos.append(queue_info_from(values, row.name))
        if row.pk == queue.pk:
            values.update({k: v for k, v in changes.items() if k in EDITABLE_FIELDS})
        after_infos.append(queue_info_from(values, row.name))
    now = deserved_gpus(nodes=nodes, queues=now_infos, demand=demand)
    after = deserved_gpus(nodes=nodes, queues=after_infos, demand=demand)
    return [
        QueuePreview(
            name=row.name,
            tenant=row.tenant.name,
            weight=info.weight,
            demand_gpus=float(demand[row.name].get("gpu")) if row.name in demand else 0.0,
            deserved_now=now[row.name],
            deserved_after=after[row.name],
            edited=row.pk == queue.pk,
        )
        for row, info in zip(queues, after_infos)
    ]
