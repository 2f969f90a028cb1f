from dataclasses import dataclass

from django.db.models import QuerySet, Sum
from django.db.models.functions import Coalesce

from .models import Node, Placement


@dataclass(frozen=True)
class ClusterTotals:
    gpus: int
    cpu_millis: int
    memory_bytes: int

    def get(self, resource: str) -> int:
        return int(getattr(self, resource))


def node_list(*, schedulable: bool | None = None) -> QuerySet[Node]:
    nodes = Node.objects.all().order_by("name")
    if schedulable is not None:
        nodes = nodes.filter(schedulable=schedulable)
    return nodes


def node_schedulable_totals() -> ClusterTotals:
    """Sum of the inventory of schedulable nodes (what guarantees are checked against)."""
    totals = Node.objects.filter(schedulable=True).aggregate(
        gpus=Coalesce(Sum("gpu_count"), 0),
        cpu_millis=Coalesce(Sum("cpu_millis"), 0),
        memory_bytes=Coalesce(Sum("memory_bytes"), 0),
    )
    return ClusterTotals(
        gpus=int(totals["gpus"]),
        cpu_millis=int(totals["cpu_millis"]),
        memory_bytes=int(totals["memory_bytes"]),
    )


def placement_list_active(*, job_id: int | None = None) -> QuerySet[Placement]:
    placements = Placement.objects.filter(state__in=Placement.ACTIVE_STATES)
    if job_id is not None:
        placements = placements.filter(job_id=job_id)
    return placements.select_related("task", "node").order_by("task_id", "replica")
