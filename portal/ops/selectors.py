"""Reads for the metrics endpoint: the whole installation, unscoped (the endpoint is guarded
by its own token, not by a user's roles)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Count, Sum

from portal.cluster.models import Node
from portal.jobs.models import Job
from portal.queues.models import Queue
from portal.scheduling.models import CycleRun


@dataclass(frozen=True)
class QueueRow:
    id: int
    name: str
    tenant: str
    weight: int
    guarantee_gpus: int
    capability_gpus: int | None


def queue_rows() -> list[QueueRow]:
    return [
        QueueRow(*row)
        for row in Queue.objects.order_by("name").values_list(
            "id", "name", "tenant__name", "weight", "guarantee_gpus", "capability_gpus"
        )
    ]


def job_counts_per_queue() -> dict[int, dict[str, int]]:
    """Queue id -> status -> number of jobs (one aggregate query)."""
    counts: dict[int, dict[str, int]] = defaultdict(dict)
    rows = Job.objects.values_list("queue_id", "status").annotate(n=Count("id")).order_by()
    for queue_id, status, n in rows:
        counts[queue_id][status] = n
    return counts


def node_totals() -> dict[bool, tuple[int, int]]:
    """schedulable -> (nodes, GPUs)."""
    rows = Node.objects.values_list("schedulable").annotate(n=Count("id"), gpus=Sum("gpu_count"))
    return {bool(schedulable): (n, int(gpus or 0)) for schedulable, n, gpus in rows.order_by()}


def cycle_latest_finished() -> CycleRun | None:
    return (
        CycleRun.objects.filter(finished_at__isnull=False).order_by("-finished_at", "-id").first()
    )
