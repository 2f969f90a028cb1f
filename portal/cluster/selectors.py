from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Q, QuerySet, Sum
from django.db.models.functions import Coalesce

from jobspec.gpushare import MILLI_PER_GPU, gpus_number, others_gpu_milli
from portal.common.access import AnyUser

from .access import visible_nodes
from .models import Node, Placement, placement_milli


@dataclass(frozen=True)
class ClusterTotals:
    gpus: int
    cpu_millis: int
    memory_bytes: int

    def get(self, resource: str) -> int:
        return int(getattr(self, resource))


def node_capacity_list() -> QuerySet[Node]:
    """The nodes whose capacity the scheduler shares out: still in the cluster and Ready.
    A node the kubelet does not report Ready, or one deleted from the cluster, is no
    capacity at all (Volcano's cache snapshot leaves NotReady nodes out the same way)."""
    return Node.objects.filter(in_cluster=True, ready=True)


def node_list(*, user: AnyUser, schedulable: bool | None = None) -> QuerySet[Node]:
    """The nodes `user` may see (portal.cluster.access.visible_nodes), by name."""
    nodes = visible_nodes(user).order_by("name")
    if schedulable is not None:
        nodes = nodes.filter(schedulable=schedulable)
    return nodes


def node_schedulable_totals() -> ClusterTotals:
    """Sum of the inventory of schedulable nodes (what guarantees are checked against)."""
    totals = (
        node_capacity_list()
        .filter(schedulable=True)
        .aggregate(
            gpus=Coalesce(Sum("gpu_count"), 0),
            cpu_millis=Coalesce(Sum("cpu_millis"), 0),
            memory_bytes=Coalesce(Sum("memory_bytes"), 0),
        )
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


def placement_list_ended(*, job_id: int) -> list[Placement]:
    """The job's pods that ran to an end (succeeded or failed), with how they ended; the
    latest ENDED_PODS_MAX, oldest first."""
    placements = Placement.objects.filter(
        job_id=job_id, state__in=(Placement.State.SUCCEEDED, Placement.State.FAILED)
    ).select_related("task")
    latest = list(placements.order_by("-id")[:ENDED_PODS_MAX])
    return sorted(latest, key=lambda placement: placement.id)


ENDED_PODS_MAX = 500


# --- pages and dashboards -------------------------------------------------------------------


def node_gpu_model_list() -> list[str]:
    """GPU models present in the inventory (for the submit form's node selector)."""
    models = Node.objects.exclude(gpu_model="").values_list("gpu_model", flat=True)
    return sorted(set(models))


def placement_list_for_job(*, job_id: int) -> QuerySet[Placement]:
    """Every placement of the job, past and active, oldest first."""
    return Placement.objects.filter(job_id=job_id).select_related("task").order_by("id")


def node_list_with_usage(*, user: AnyUser) -> QuerySet[Node]:
    """The nodes `user` may see, annotated with `gpu_milli_used` (milli-GPU held by active
    placements: shares of a device counted exactly) and `pods_active`."""
    from django.db.models import Count, Q

    active = Q(placements__state__in=Placement.ACTIVE_STATES)
    return (
        visible_nodes(user)
        .annotate(
            gpu_milli_used=Coalesce(Sum(placement_milli("placements__"), filter=active), 0),
            pods_active=Count("placements", filter=active),
        )
        .order_by("name")
    )


def node_gpus_used(node: Node) -> int | float:
    """GPUs the portal's pods hold on a node of `node_list_with_usage` (0.25 for a quarter of
    a card)."""
    return gpus_number(node.gpu_milli_used)


def node_gpu_milli_others(node: Node) -> int:
    """Milli-GPU other workloads' pods hold on `node` (other schedulers, other teams' pods):
    as the scheduler counts them (jobspec.gpushare.others_gpu_milli)."""
    _cards, milli = others_gpu_milli(
        node.used_by_others or {}, node.gpu_resource_name, node.gpu_uuids or [],
        node.gpu_memory_mib,
    )  # fmt: skip
    return milli


def node_gpu_rows_others(nodes: Iterable[Node]) -> list[tuple[str, int, list[int]]]:
    """(node name, milli-GPU, device indices) of what other workloads hold on `nodes`, in the
    shape of placement_gpu_rows_active: each registered card they name, with its index; then
    their shares of cards the node did not register and their whole GPUs of unnamed cards,
    with none (a picture fills those into free devices)."""
    rows: list[tuple[str, int, list[int]]] = []
    for node in nodes:
        used = node.used_by_others or {}
        on_cards, total = others_gpu_milli(
            used, node.gpu_resource_name, node.gpu_uuids or [], node.gpu_memory_mib
        )
        rows += [(node.name, milli, [index]) for index, (milli, _mib) in sorted(on_cards.items())]
        whole = used.get(node.gpu_resource_name, 0) * MILLI_PER_GPU
        unnamed_shares = total - whole - sum(milli for milli, _mib in on_cards.values())
        if unnamed_shares > 0:
            rows.append((node.name, unnamed_shares, []))
        if whole > 0:
            rows.append((node.name, whole, []))
    return rows


def node_gpus_free(node: Node) -> int | float:
    """GPUs nobody holds on a node of `node_list_with_usage`: whole cards and the rest of
    shared ones (a card three quarters shared leaves 0.25), after the portal's pods and other
    workloads'."""
    held = node.gpu_milli_used + node_gpu_milli_others(node)
    return gpus_number(max(node.gpu_count * MILLI_PER_GPU - held, 0))


def placement_gpu_rows_active() -> list[tuple[str, str, int, int, list[int]]]:
    """(node name, queue name, job id, milli-GPU, device indices) of every active placement
    holding GPUs (whole or a share of one device)."""
    rows = (
        Placement.objects.filter(state__in=Placement.ACTIVE_STATES)
        .filter(Q(gpus__gt=0) | Q(gpu_milli__gt=0))
        .order_by("node_name", "id")
        .values_list("node_name", "job__queue__name", "job_id", "gpus", "gpu_milli", "gpu_devices")
    )
    return [
        (node, queue, job, max(milli, gpus * MILLI_PER_GPU), list(devices or []))
        for node, queue, job, gpus, milli, devices in rows
    ]


def gpus_allocated_per_queue(queue_ids: list[int] | None = None) -> dict[int, int | float]:
    """Queue id -> GPUs held by active placements now, shares counted exactly (one aggregate
    query); every queue, or only `queue_ids`."""
    placements = Placement.objects.filter(state__in=Placement.ACTIVE_STATES)
    if queue_ids is not None:
        placements = placements.filter(job__queue_id__in=queue_ids)
    rows = placements.values("job__queue_id").annotate(milli=Sum(placement_milli()))
    return {row["job__queue_id"]: gpus_number(row["milli"] or 0) for row in rows}
