from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views import View
from django.views.generic import TemplateView

from jobspec.gpushare import gpus_number
from portal.cluster.selectors import gpus_allocated_per_queue
from portal.jobs.estimates import estimate_text, queue_next_starts
from portal.scheduling.selectors import queue_usage_latest
from portal.tenants.selectors import tenant_quota_summary

from .access import can_edit_queue
from .forms import QueueEditForm
from .models import Queue
from .preview import preview_rows_for, queue_preview
from .selectors import queue_change_list, queue_get, queue_list
from .services import QUEUE_EDIT_FORBIDDEN, queue_update, queue_update_check

QUEUE_SAVED = "Queue {name} saved."
QUEUE_UNCHANGED = "Nothing changed."


class QueueListView(LoginRequiredMixin, TemplateView):
    template_name = "queues/queue_list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        user = self.request.user
        queues = list(queue_list(user=user))
        ids = [queue.pk for queue in queues]
        # As the API and the CLI's `queues`: allocated is live, deserved and pending are the
        # last cycle's usage sample (none before the first cycle).
        allocated = gpus_allocated_per_queue(queue_ids=ids)
        samples = queue_usage_latest(queue_ids=ids)
        next_starts = queue_next_starts(ids)
        for queue in queues:
            queue.editable = can_edit_queue(user, queue)
            sample = samples.get(queue.pk)
            queue.usage = QueueUsage(
                allocated=allocated.get(queue.pk, 0),
                deserved=None if sample is None else sample.gpus_deserved,
                pending=None if sample is None else gpus_number(sample.gpus_pending * 1000),
                next_start=estimate_text(next_starts.get(queue.pk)),
            )
        context["queues"] = queues
        context["usage_at"] = max((sample.at for sample in samples.values()), default=None)
        return context


@dataclass(frozen=True)
class QueueUsage:
    allocated: int
    deserved: float | None
    pending: int | None
    next_start: str = ""  # the soonest estimated start among its waiting jobs, in words


class QueueEditView(LoginRequiredMixin, View):
    """Lead of the queue's tenant or staff. As in the API: 404 for a queue the user cannot
    see (another tenant's, or none), 403 for a queue of their tenant they may not edit."""

    template_name = "queues/queue_edit.html"

    def _queue(self, request: HttpRequest, queue_id: int) -> Queue:
        queue = queue_get(user=request.user, queue_id=queue_id)
        if not can_edit_queue(request.user, queue):
            raise PermissionDenied(QUEUE_EDIT_FORBIDDEN)
        return queue

    def _render(self, request: HttpRequest, queue: Queue, form: QueueEditForm) -> HttpResponse:
        context = {
            "queue": queue,
            "form": form,
            "changes": queue_change_list(queue=queue),
            "preview": preview_rows_for(request.user, queue_preview(queue=queue, changes={})),
            "tenant_quota": tenant_quota_summary(tenant=queue.tenant),
        }
        return render(request, self.template_name, context, status=200)

    def get(self, request: HttpRequest, queue_id: int) -> HttpResponse:
        queue = self._queue(request, queue_id)
        return self._render(request, queue, QueueEditForm(initial=QueueEditForm.initial_for(queue)))

    def post(self, request: HttpRequest, queue_id: int) -> HttpResponse:
        queue = self._queue(request, queue_id)
        form = QueueEditForm(request.POST)
        if not form.is_valid():
            return self._render(request, queue, form)
        before = queue.changes.count()
        try:
            queue = queue_update(queue=queue, actor=request.user, **form.cleaned_data)
        except ValidationError as error:
            form.add_service_errors(error)
            return self._render(request, queue, form)
        if queue.changes.count() == before:
            messages.info(request, QUEUE_UNCHANGED)
        else:
            messages.success(request, QUEUE_SAVED.format(name=queue.name))
        return redirect("queues:queue_edit", queue_id=queue.pk)


class QueuePreviewView(QueueEditView):
    """JSON: every queue's deserved GPUs now and under the settings in the query string."""

    http_method_names = ["get"]

    def get(self, request: HttpRequest, queue_id: int) -> HttpResponse:
        queue = self._queue(request, queue_id)
        form = QueueEditForm(request.GET)
        if not form.is_valid():
            return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
        try:
            queue_update_check(queue=queue, **form.cleaned_data)
        except ValidationError as error:
            # What Save would refuse, under the same fields: no shares drawn for it.
            form.add_service_errors(error)
            return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
        rows = queue_preview(queue=queue, changes=form.cleaned_data)
        return JsonResponse({"queue": queue.name, "queues": preview_rows_for(request.user, rows)})
