from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.common.access import staff_required
from portal.jobs.gpushare import MILLI_PER_GPU, gpus_number

from .selectors import node_gpus_free, node_gpus_used, node_list_with_usage


@staff_required
def node_list(request: HttpRequest) -> HttpResponse:
    """Inventory with per-node GPUs used (active placements) and free."""
    nodes = list(node_list_with_usage(user=request.user))
    for node in nodes:
        node.gpus_used = node_gpus_used(node)
        node.gpus_free = node_gpus_free(node)
        node.used_percent = (
            round(100 * node.gpu_milli_used / (node.gpu_count * MILLI_PER_GPU))
            if node.gpu_count
            else 0
        )
    totals = {
        "gpus": sum(n.gpu_count for n in nodes if n.schedulable),
        "used": gpus_number(sum(n.gpu_milli_used for n in nodes)),
        "free": gpus_number(
            sum(
                max(n.gpu_count * MILLI_PER_GPU - n.gpu_milli_used, 0)
                for n in nodes
                if n.schedulable
            )
        ),
        "nodes": len(nodes),
    }
    return render(request, "cluster/node_list.html", {"nodes": nodes, "totals": totals})
