from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.common.access import staff_required

from .selectors import node_list_with_usage


@staff_required
def node_list(request: HttpRequest) -> HttpResponse:
    """Inventory with per-node GPUs used (active placements) and free."""
    nodes = list(node_list_with_usage(user=request.user))
    for node in nodes:
        node.gpus_free = max(node.gpu_count - node.gpus_used, 0)
        node.used_percent = round(100 * node.gpus_used / node.gpu_count) if node.gpu_count else 0
    totals = {
        "gpus": sum(n.gpu_count for n in nodes if n.schedulable),
        "used": sum(n.gpus_used for n in nodes),
        "free": sum(n.gpus_free for n in nodes if n.schedulable),
        "nodes": len(nodes),
    }
    return render(request, "cluster/node_list.html", {"nodes": nodes, "totals": totals})
