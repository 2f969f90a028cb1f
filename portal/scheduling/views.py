from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.common.access import staff_required
from portal.queues.models import Queue

from .models import PreemptionEvent
from .selectors import preemption_event_list

PREEMPTION_PAGE_LIMIT = 500


@staff_required
def preemption_list(request: HttpRequest) -> HttpResponse:
    """Every preemption and reclaim, newest first, filterable by action and victim queue."""
    action = request.GET.get("action") or None
    if action not in PreemptionEvent.Action.values:
        action = None
    queue_id = request.GET.get("queue")
    queue_id = int(queue_id) if queue_id and queue_id.isdigit() else None
    events = preemption_event_list(action=action, queue_id=queue_id)[:PREEMPTION_PAGE_LIMIT]
    context = {
        "events": events,
        "action": action,
        "queue_id": queue_id,
        "actions": PreemptionEvent.Action.choices,
        "queues": Queue.objects.order_by("name"),
    }
    return render(request, "scheduling/preemption_list.html", context)
