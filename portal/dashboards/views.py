"""Dashboard page and one JSON endpoint per chart (polled by the page with Plotly.react).

Non-staff users see the queues of their tenants by name; GPUs of other tenants' queues are
shown as "other tenants" on the occupancy map and left out of the per-queue charts.
"""

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Max, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone

from jobspec.gpushare import SHARING_NONE
from portal.cluster.selectors import (
    gpus_allocated_per_queue,
    node_gpu_rows_others,
    node_list,
    node_schedulable_totals,
    placement_gpu_rows_active,
)
from portal.common import palette
from portal.common.access import OTHER_TENANTS, OTHER_WORKLOADS
from portal.jobs.selectors import pending_demand_per_queue, pending_wait_stats
from portal.queues.access import visible_queue_names, visible_queues
from portal.queues.models import Queue
from portal.scheduling.access import can_see_evictions
from portal.scheduling.selectors import preemption_counts, usage_latest_deserved, usage_series
from portal.tenants.access import visible_tenants
from portal.tenants.models import Tenant
from portal.tenants.selectors import tenant_usage_latest

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
EVICTIONS_FOR_ADMINS = "Evictions are shown to site admins."


def _range(request: HttpRequest) -> tuple[str, timedelta, str]:
    name = request.GET.get("range", DEFAULT_RANGE)
    if name not in RANGES:
        name = DEFAULT_RANGE
    span, bucket = RANGES[name]
    return name, span, bucket


def _tenant(request: HttpRequest) -> Tenant | None:
    """The tenant drilled into (`?tenant=<id>`), if the user may see it; else None: all."""
    pk = request.GET.get("tenant", "")
    if not pk.isdigit():
        return None
    return visible_tenants(request.user).filter(pk=int(pk)).first()


def _queues(request: HttpRequest) -> QuerySet[Queue]:
    """The queues the charts show: those the user may see, of the drilled-into tenant only."""
    queues = visible_queues(request.user)
    tenant = _tenant(request)
    return queues if tenant is None else queues.filter(tenant=tenant)


def _scope(request: HttpRequest) -> set[str] | None:
    """Queue names the charts show by name, of the drilled-into tenant; None means all."""
    return visible_queue_names(request.user, tenant=_tenant(request))


def _colours(request: HttpRequest) -> dict[str, str]:
    """Queue name -> colour for the queues the user may see, by queue id (the same for
    every viewer); the other tenants' queues share one grey."""
    queues = visible_queues(request.user).values_list("pk", "name")
    return {
        **palette.queue_colours(queues),
        OTHER_TENANTS: palette.OTHER_TENANTS,
        OTHER_WORKLOADS: palette.OTHER_WORKLOADS,
    }


def _allowed(scope: set[str] | None, queue: str) -> bool:
    return scope is None or queue in scope


def usage_data(request: HttpRequest) -> dict[str, Any]:
    name, span, bucket = _range(request)
    scope = _scope(request)
    now = timezone.now()
    rows = [
        {"bucket": row["bucket"], "queue": row["queue__name"], "gpus": row["gpus"]}
        for row in usage_series(since=now - span, bucket=bucket)
        if _allowed(scope, row["queue__name"])
    ]
    title = f"GPUs allocated per queue (last {name}, average per {bucket})"
    figure = charts.usage_area(
        rows, colours=_colours(request), title=title, since=now - span, until=now, bucket=bucket
    )
    return {"figure": figure, "range": name}


def quota_data(request: HttpRequest) -> dict[str, Any]:
    queues = _queues(request).order_by("name")
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
    figure = charts.quota_bars(
        rows,
        colours=_colours(request),
        cluster_gpus=node_schedulable_totals().gpus,
        shares=gpu_shares_on(),
    )
    return {"figure": figure}


def tenants_data(request: HttpRequest) -> dict[str, Any]:
    """Each visible tenant's use, stacked by queue, against its quota and share."""
    tenants = list(visible_tenants(request.user).order_by("name"))
    allocated = gpus_allocated_per_queue()
    queues: dict[int, list[tuple[str, int | float]]] = {tenant.pk: [] for tenant in tenants}
    for pk, name, tenant_id in visible_queues(request.user).values_list("pk", "name", "tenant_id"):
        if tenant_id in queues:
            queues[tenant_id].append((name, allocated.get(pk, 0)))
    shares = tenant_usage_latest(tenant_ids=list(queues))
    rows = [
        {
            "id": tenant.pk,
            "name": tenant.name,
            "guarantee": tenant.guarantee_gpus,
            "capability": tenant.capability_gpus,
            "deserved": shares[tenant.pk].gpus_deserved if tenant.pk in shares else None,
            "queues": sorted(queues[tenant.pk]),
        }
        for tenant in tenants
    ]
    return {"figure": charts.tenant_bars(rows, colours=_colours(request))}


def _largest_node_gpus(request: HttpRequest) -> int:
    nodes = node_list(user=request.user, schedulable=True)
    return nodes.aggregate(largest=Max("gpu_count"))["largest"] or 0


def occupancy_data(request: HttpRequest) -> dict[str, Any]:
    # The whole cluster whatever tenant is drilled into: free GPUs are everyone's.
    scope = visible_queue_names(request.user)
    schedulable = list(node_list(user=request.user, schedulable=True))
    nodes = [(node.name, node.gpu_count) for node in schedulable]
    placements = [
        (node, queue, job, milli, devices)
        if _allowed(scope, queue)
        else (node, OTHER_TENANTS, None, milli, devices)
        for node, queue, job, milli, devices in placement_gpu_rows_active()
    ]
    # Then what pods the portal did not start hold: neither a queue's nor free.
    placements += [
        (node, OTHER_WORKLOADS, None, milli, devices)
        for node, milli, devices in node_gpu_rows_others(schedulable)
    ]
    result = charts.occupancy(nodes, placements)
    blocks = charts.free_blocks(result["cells"])
    labels = charts.free_block_labels(max((gpus for _, gpus in nodes), default=0), blocks)
    return {
        "figure": charts.occupancy_heatmap(
            result["cells"],
            result["jobs"],
            colours=_colours(request),
            milli=result["milli"],
            holders=result["holders"],
        ),
        "shared_gpus": charts.shared_devices(result),
        "free_blocks": {str(size): count for size, count in blocks.items()},
        "free_block_labels": {str(size): label for size, label in labels.items()},
    }


def pending_data(request: HttpRequest) -> dict[str, Any]:
    scope = _scope(request)
    demand = {q: g for q, g in pending_demand_per_queue().items() if _allowed(scope, q)}
    never = {
        q: g for q, g in pending_demand_per_queue(never_runnable=True).items() if _allowed(scope, q)
    }
    # Quartiles per queue computed in the database where it can (PostgreSQL).
    waits = {
        queue: stats
        for queue, stats in pending_wait_stats(now=timezone.now()).items()
        if _allowed(scope, queue)
    }
    colours = _colours(request)
    return {
        "figure": charts.pending_demand_bars(demand, colours=colours, never=never),
        "waits": charts.wait_bars_from_stats(waits, colours=colours),
    }


def preemptions_data(request: HttpRequest) -> dict[str, Any]:
    name, span, bucket = _range(request)
    now = timezone.now()
    title = f"Evictions over time (last {name}, per {bucket})"
    if can_see_evictions(request.user):
        rows = preemption_counts(since=now - span, bucket=bucket)
        message = charts.EVICTIONS_EMPTY
    else:
        rows = []
        message = EVICTIONS_FOR_ADMINS
    figure = charts.preemptions_over_time(
        rows, title=title, since=now - span, until=now, bucket=bucket, empty_message=message
    )
    return {"figure": figure, "range": name}


def colours_data(request: HttpRequest) -> dict[str, Any]:
    """The palette as the other pages' scripts need it (the queue edit preview)."""
    return {"colours": _colours(request)}


CHARTS: dict[str, Callable[[HttpRequest], dict[str, Any]]] = {
    "usage": usage_data,
    "quota": quota_data,
    "tenants": tenants_data,
    "occupancy": occupancy_data,
    "pending": pending_data,
    "preemptions": preemptions_data,
    "colours": colours_data,
}
# What the dashboard page draws (the rest of CHARTS serves other pages).
DASHBOARD_CHARTS = ("tenants", "usage", "quota", "occupancy", "pending", "preemptions")


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    range_name, _, _ = _range(request)
    evictions = can_see_evictions(request.user)
    context = {
        "charts": [chart for chart in DASHBOARD_CHARTS if chart != "preemptions" or evictions],
        "can_see_evictions": evictions,
        "free_block_labels": list(charts.free_block_labels(_largest_node_gpus(request)).items()),
        "range": range_name,
        "ranges": list(RANGES),
        "tenant": _tenant(request),
        # Links as well as clicks on the bars: the drill-down works from the keyboard too.
        "drill_tenants": list(visible_tenants(request.user).order_by("name")),
        "refresh_seconds": REFRESH_SECONDS,
        "gpu_shares": gpu_shares_on(),
    }
    return render(request, "dashboards/overview.html", context)


def gpu_shares_on() -> bool:
    """Whether pods may ask for part of a GPU here (a sharing stack runs: GPU_SHARING)."""
    return settings.GPU_SHARING != SHARING_NONE


@login_required
def chart_data(request: HttpRequest, chart: str) -> HttpResponse:
    build = CHARTS.get(chart)
    if build is None:
        raise Http404(chart)
    response = JsonResponse(build(request))
    response["Cache-Control"] = "no-store"
    return response
