from datetime import datetime

from django.db.models import QuerySet

from .models import CycleRun, PreemptionEvent, SchedulerConfig


def scheduler_config_get_active() -> SchedulerConfig | None:
    return SchedulerConfig.objects.filter(active=True).first()


def scheduler_config_list() -> QuerySet[SchedulerConfig]:
    return SchedulerConfig.objects.select_related("created_by").order_by("-version")


def preemption_event_list(
    *,
    action: str | None = None,
    queue_id: int | None = None,
    tenant_id: int | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[PreemptionEvent]:
    """Every preemption (site admins only: callers check the role)."""
    events = PreemptionEvent.objects.select_related(
        "victim_job", "victim_queue", "victim_tenant", "preemptor_job", "preemptor_queue", "cycle"
    )
    if action:
        events = events.filter(action=action)
    if queue_id is not None:
        events = events.filter(victim_queue_id=queue_id)
    if tenant_id is not None:
        events = events.filter(victim_tenant_id=tenant_id)
    if since is not None:
        events = events.filter(occurred_at__gte=since)
    if until is not None:
        events = events.filter(occurred_at__lt=until)
    return events.order_by("-occurred_at", "-id")


def cycle_run_list(*, limit: int = 100) -> QuerySet[CycleRun]:
    return CycleRun.objects.order_by("-started_at", "-id")[:limit]
