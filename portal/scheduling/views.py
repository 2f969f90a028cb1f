from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from portal.common.access import ROLE_STAFF, rule_required
from portal.common.csvsafe import CsvLines
from portal.dashboards.paging import LargeTablePaginator

from .access import can_change_scheduler_config, can_see_evictions
from .forms import PreemptionFilterForm, SchedulerConfigForm
from .models import SchedulerConfig
from .selectors import preemption_event_list, scheduler_config_get_active, scheduler_config_list
from .services import (
    CONF_HARD_FEASIBILITY,
    scheduler_config_activate,
    scheduler_config_create,
    scheduler_config_notes,
)

PREEMPTION_PAGE_SIZE = 50
CSV_HEADER = (
    "occurred_at",
    "action",
    "victim_job_id",
    "victim_job",
    "victim_task",
    "victim_queue",
    "victim_tenant",
    "node",
    "preemptor_job_id",
    "preemptor_job",
    "preemptor_queue",
    "gpus_freed",
    "cycle_id",
    "sentence",
    "notice",
)
CONFIG_SAVED = "Scheduler config v{version} saved{active}."
CONFIG_ACTIVATED = "Scheduler config v{version} is now active."


def _filtered_events(request: HttpRequest):
    form = PreemptionFilterForm(request.GET or None)
    return form, preemption_event_list(**form.filters())


@rule_required(can_see_evictions, ROLE_STAFF)
def preemption_list(request: HttpRequest) -> HttpResponse:
    """Every preemption and reclaim, newest first, filterable, 50 per page."""
    form, events = _filtered_events(request)
    page = LargeTablePaginator(_history_columns(events), PREEMPTION_PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "form": form,
        "events": page.object_list,
        "page": page,
        "query": query.urlencode(),
    }
    return render(request, "scheduling/preemption_list.html", context)


def _history_columns(events):
    """Only the columns the history table shows (no join to the cycle: its id is enough)."""
    return (
        events.select_related(None)
        .select_related(
            "victim_job",
            "victim_queue",
            "victim_tenant",
            "preemptor_job",
            "preemptor_queue",
            "placement",
        )
        .only(
            "id",
            "occurred_at",
            "action",
            "victim_task_name",
            "node_name",
            "gpus_freed",
            "gpu_milli_freed",
            "gpu_devices",
            "cycle_id",
            "sentence",
            "victim_job__id",
            "victim_job__name",
            "victim_queue__id",
            "victim_queue__name",
            "victim_tenant__id",
            "victim_tenant__name",
            "preemptor_job__id",
            "preemptor_job__name",
            "preemptor_queue__id",
            "preemptor_queue__name",
            # the victim's preemption notice (Placement.notice_text)
            "placement__id",
            "placement__notice_given_at",
            "placement__notice_deadline",
            "placement__notice_end",
            "placement__notice_ended_at",
        )
    )


@rule_required(can_see_evictions, ROLE_STAFF)
def preemption_csv(request: HttpRequest) -> HttpResponse:
    """The same filtered history as CSV (streamed, no row limit)."""
    from django.http import StreamingHttpResponse

    _, events = _filtered_events(request)
    writer = CsvLines()

    def rows():
        yield writer.line(CSV_HEADER)
        for event in events.iterator(chunk_size=2000):
            yield writer.line(
                [
                    event.occurred_at.isoformat(),
                    event.action,
                    event.victim_job_id,
                    event.victim_job.name,
                    event.victim_task_name,
                    event.victim_queue.name,
                    event.victim_tenant.name,
                    event.node_name,
                    event.preemptor_job_id or "",
                    event.preemptor_job.name if event.preemptor_job else "",
                    event.preemptor_queue.name if event.preemptor_queue else "",
                    event.gpus_freed_text,
                    event.cycle_id or "",
                    event.sentence,
                    event.notice_text,
                ]
            )

    response = StreamingHttpResponse(rows(), content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="preemptions.csv"'
    return response


@rule_required(can_change_scheduler_config, ROLE_STAFF)
def config_edit(request: HttpRequest) -> HttpResponse:
    """Edit the Volcano-format conf; the core's parser validates it, errors name the field."""
    active = scheduler_config_get_active()
    if request.method == "POST":
        form = SchedulerConfigForm(request.POST)
        if form.is_valid():
            try:
                config = scheduler_config_create(
                    text=form.cleaned_data["text"],
                    actor=request.user,
                    activate=form.cleaned_data["activate"],
                    comment=form.cleaned_data["comment"],
                )
            except ValidationError as error:
                for field, field_messages in error.message_dict.items():
                    form.add_error(field if field in form.fields else None, field_messages)
            else:
                suffix = " and activated" if config.active else ""
                messages.success(
                    request, CONFIG_SAVED.format(version=config.version, active=suffix)
                )
                for note in scheduler_config_notes(text=config.text):
                    messages.warning(request, note)
                return redirect("scheduling:config_edit")
    else:
        initial = {"text": active.text if active else _default_text(), "activate": True}
        form = SchedulerConfigForm(initial=initial)
    context = {
        "form": form,
        "active": active,
        "versions": scheduler_config_list()[:50],
        "hard_feasibility": CONF_HARD_FEASIBILITY,
    }
    return render(request, "scheduling/config_edit.html", context)


def _default_text() -> str:
    from scheduler.core.config import DEFAULT_CONF_TEXT

    return DEFAULT_CONF_TEXT


@require_POST
@rule_required(can_change_scheduler_config, ROLE_STAFF)
def config_activate(request: HttpRequest, config_id: int) -> HttpResponse:
    config = get_object_or_404(SchedulerConfig, pk=config_id)
    config = scheduler_config_activate(config=config, actor=request.user)
    messages.success(request, CONFIG_ACTIVATED.format(version=config.version))
    return redirect("scheduling:config_edit")
