from typing import Any

from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views import View
from django.views.generic import TemplateView

from portal.cluster.selectors import placement_list_active
from portal.common.access import can_cancel_job

from .models import Job
from .selectors import job_get, job_list
from .services import job_cancel

JOB_CANCELLED = "Job {name} was cancelled."


class JobListView(LoginRequiredMixin, TemplateView):
    template_name = "jobs/job_list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        status = self.request.GET.get("status") or None
        if status not in Job.Status.values:
            status = None
        context["jobs"] = job_list(user=self.request.user, status=status)[:200]
        context["status"] = status
        context["statuses"] = Job.Status.choices
        return context


class JobDetailView(LoginRequiredMixin, TemplateView):
    template_name = "jobs/job_detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        job = job_get(user=self.request.user, job_id=kwargs["job_id"])
        context["job"] = job
        context["tasks"] = job.tasks.all()
        context["placements"] = placement_list_active(job_id=job.pk)
        context["can_cancel"] = can_cancel_job(self.request.user, job) and not job.is_terminal
        return context


class JobCancelView(LoginRequiredMixin, View):
    http_method_names = ["post"]

    def post(self, request: HttpRequest, job_id: int) -> HttpResponse:
        job = job_get(user=request.user, job_id=job_id)
        try:
            job_cancel(job=job, actor=request.user)
        except ValidationError as error:
            for message in error.messages:
                messages.error(request, message)
        else:
            messages.success(request, JOB_CANCELLED.format(name=job.name))
        return redirect("jobs:job_detail", job_id=job.pk)
