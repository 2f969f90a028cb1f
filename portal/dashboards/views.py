"""Dashboard page and one JSON endpoint per chart (polled by the page with Plotly.react).

Non-staff users see the queues of their tenants by name; GPUs of other tenants' queues are
shown as "other tenants" on the occupancy map and left out of the per-queue charts.
"""

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone

from portal.cluster.selectors import gpus_allocated_per_queue, node_list, placement_gpu_rows_active
from portal.common.access import OTHER_TENANTS, is_site_admin, visible_queues
from portal.jobs.selectors import pending_demand_per_queue, pending_wait_stats
from portal.scheduling.selectors import preemption_counts, usage_latest_deserved, usage_series

from . import charts

# range name -> (how far back, time bucket aggregated in the database)
RANGES = {
    "hour": (timedelta(hours=1), "minute"),
    "day": (timedelta(days=1), "hour"),
    "week": (timedelta(days=7), "hour"),
    "month": (timedelta(days=30), "day"),
}
DEFAULT_RANGE = "day"
REFRESH_SECONDS = 10


def _range(request: HttpRequest) -> tuple[str, timedelta, str]:
    name = request.GET.get("range", DEFAULT_RANGE)
    if name not in RANGES:
        name = DEFAULT_RANGE
    span, bucket = RANGES[name]
    return name, span, bucket


def _scope(request: HttpRequest) -> set[str] | None:
    """Queue names the user may see by name; None means all (site admin)."""
    if is_site_admin(request.user):
        return None
    return set(visible_queues(request.user).values_list("name", flat=True))


def _colours(request: HttpRequest) -> dict[str, str]:
    names = visible_queues(request.user).values_list("name", flat=True)
    return {**charts.queue_colours(names), OTHER_TENANTS: "#9aa4b2"}


def _allowed(scope: set[str] | None, queue: str) -> bool:
    return scope is None or queue in scope


def usage_data(request: HttpRequest) -> dict[str, Any]:
    name, span, bucket = _range(request)
    scope = _scope(request)
    rows = [
        {"bucket": row["bucket"], "queue": row["queue__name"], "gpus": row["gpus"]}
        for row in usage_series(since=timezone.now() - span, bucket=bucket)
        if _allowed(scope, row["queue__name"])
    ]
    title = f"GPUs allocated per queue (last {name}, per {bucket})"
    return {
        "figure": charts.usage_area(rows, title=title, colours=_colours(request)),
        "range": name,
    }


def quota_data(request: HttpRequest) -> dict[str, Any]:
    queues = visible_queues(request.user).order_by("name")
    allocated = gpus_allocated_per_queue()
    deserved = usage_latest_deserved()
    rows = [
        {
            "name": queue.name,
            "allocated": allocated.get(queue.pk, 0),
            "deserved": deserved.get(queue.pk, 0.0),
            "guarantee": queue.guarantee_gpus,
            "capability": queue.capability_gpus,
        }
        for queue in queues
    ]
    return {"figure": charts.quota_bars(rows)}


def occupancy_data(request: HttpRequest) -> dict[str, Any]:
    scope = _scope(request)
    nodes = [(node.name, node.gpu_count) for node in node_list(user=request.user, schedulable=True)]
    placements = [
        (node, queue, job, gpus) if _allowed(scope, queue) else (node, OTHER_TENANTS, None, gpus)
        for node, queue, job, gpus in placement_gpu_rows_active()
    ]
    result = charts.occupancy(nodes, placements)
    blocks = charts.free_blocks(result["cells"])
    return {
        "figure": charts.occupancy_heatmap(
            result["cells"], result["jobs"], colours=_colours(request)
        ),
        "free_blocks": {str(size): count for size, count in blocks.items()},
    }


def pending_data(request: HttpRequest) -> dict[str, Any]:
    scope = _scope(request)
    demand = {q: g for q, g in pending_demand_per_queue().items() if _allowed(scope, q)}
    # Quartiles per queue computed in the database where it can (PostgreSQL).
    waits = {
        queue: stats
        for queue, stats in pending_wait_stats(now=timezone.now()).items()
        if _allowed(scope, queue)
    }
    return {
        "figure": charts.pending_demand_bars(demand, colours=_colours(request)),
        "waits": charts.wait_box_from_stats(waits),
    }


def preemptions_data(request: HttpRequest) -> dict[str, Any]:
    name, span, bucket = _range(request)
    rows = preemption_counts(since=timezone.now() - span, bucket=bucket)
    if not is_site_admin(request.user):
        rows = []  # who preempted whom is admin information
    title = f"Evictions over time (last {name}, per {bucket})"
    return {"figure": charts.preemptions_over_time(rows, title=title), "range": name}


CHARTS: dict[str, Callable[[HttpRequest], dict[str, Any]]] = {
    "usage": usage_data,
    "quota": quota_data,
    "occupancy": occupancy_data,
    "pending": pending_data,
    "preemptions": preemptions_data,
}


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    range_name, _, _ = _range(request)
    context = {
        "charts": list(CHARTS),
        "range": range_name,
        "ranges": list(RANGES),
        "refresh_seconds": REFRESH_SECONDS,
    }
    return render(request, "dashboards/overview.html", context)


@login_required
def chart_data(request: HttpRequest, chart: str) -> HttpResponse:
    build = CHARTS.get(chart)
    if build is None:
        raise Http404(chart)
    response = JsonResponse(build(request))
    response["Cache-Control"] = "no-store"
    return response
