from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from jobspec.gpushare import MILLI_PER_GPU, gpus_number
from portal.common.access import staff_required

from .selectors import (
    node_gpu_milli_others,
    node_gpus_free,
    node_gpus_used,
    node_list_with_usage,
)


@staff_required
def node_list(request: HttpRequest) -> HttpResponse:
    """Inventory with per-node GPUs the portal's pods hold (active placements), other
    workloads' pods hold (as the cluster reported them), and free."""
    nodes = list(node_list_with_usage(user=request.user))
    for node in nodes:
        node.gpus_used = node_gpus_used(node)
        node.gpu_milli_others = node_gpu_milli_others(node)
        node.gpus_others = gpus_number(node.gpu_milli_others)
        node.gpus_free = node_gpus_free(node)
        capacity = node.gpu_count * MILLI_PER_GPU
        node.used_percent = (
            round(100 * min(node.gpu_milli_used, capacity) / capacity) if capacity else 0
        )
        # the bar's second part: what other workloads hold, after the portal's
        others_percent = round(100 * node.gpu_milli_others / capacity) if capacity else 0
        node.others_percent = max(0, min(others_percent, 100 - node.used_percent))
    totals = {
        "gpus": sum(n.gpu_count for n in nodes if n.schedulable),
        "used": gpus_number(sum(n.gpu_milli_used + n.gpu_milli_others for n in nodes)),
        "others": gpus_number(sum(n.gpu_milli_others for n in nodes)),
        "free": gpus_number(
            sum(
                max(n.gpu_count * MILLI_PER_GPU - n.gpu_milli_used - n.gpu_milli_others, 0)
                for n in nodes
                if n.schedulable
            )
        ),
        "nodes": len(nodes),
    }
    return render(request, "cluster/node_list.html", {"nodes": nodes, "totals": totals})
