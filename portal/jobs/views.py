from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views import View
from django.views.generic import TemplateView

from jobspec.job_plugins import RAY, plugins_config, ray_service_name
from portal.cluster.namespaces import placing_namespaces
from portal.cluster.selectors import node_gpu_model_list, placement_list_for_job
from portal.common.access import ROLE_MEMBER
from portal.common.ids import parse_id
from portal.dashboards.paging import LargeTablePaginator
from portal.jobs.limits import job_limits
from portal.queues.models import Queue
from portal.queues.selectors import queue_list
from portal.scheduling.selectors import pods_evicted_count, preemption_event_list_for_job
from portal.tenants.access import RoleRequiredMixin

from .access import can_cancel_job, can_release_job, readable_preemptions, visible_job_ids
from .estimates import estimate_text, estimate_texts, job_start_estimate
from .forms import JobSubmitForm, JobUploadForm, TaskFormSet, submit_errors_apply
from .lifecycle import Event, allows
from .models import Job
from .samples import SAMPLE_FILENAME, volcano_sample
from .selectors import (
    JobState,
    job_get,
    job_gpu_asks,
    job_list,
    job_pod_names,
    job_pod_notice,
    job_queue_rank,
    job_start_attempts,
    job_state,
    queue_position_text,
)
from .services import job_cancel, job_quarantine_release, job_submit, job_submit_manifests

JOB_CANCELLED = "Job {name} was cancelled."
JOB_RELEASED = "Job {name} was released from quarantine; it waits for the next cycle."
JOB_SUBMITTED = "Job {name} was submitted to queue {queue}."
JOB_LIST_PAGE_SIZE = 50
UPLOAD_SUBMITTED_SEVERAL = "{count} jobs submitted: {jobs}."
UPLOAD_WARNING = "{where}{warning}"


def _int_or_none(value: str | None) -> int | None:
    return parse_id(value)


class JobListView(LoginRequiredMixin, TemplateView):
    """Jobs the user may see, filtered by queue, status and `mine`, 50 per page."""

    template_name = "jobs/job_list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        params = self.request.GET
        status = params.get("status") or None
        if status not in Job.Status.values:
            status = None
        queue_id = _int_or_none(params.get("queue"))
        mine = params.get("mine") == "1"
        never = params.get("never") == "1"
        jobs = job_list(
            user=self.request.user,
            status=status,
            queue_id=queue_id,
            mine=mine,
            never_runnable=never,
        )
        page = LargeTablePaginator(_job_list_columns(jobs), JOB_LIST_PAGE_SIZE).get_page(
            params.get("page")
        )
        starts = estimate_texts(page.object_list)
        for job in page.object_list:
            job.start_text = starts.get(job.pk, "")
        query = params.copy()
        query.pop("page", None)
        context.update(
            jobs=job_gpu_asks(page.object_list),
            page=page,
            query=query.urlencode(),
            status=status,
            statuses=Job.Status.choices,
            queue_id=queue_id,
            queues=queue_list(user=self.request.user),
            mine=mine,
            never=never,
        )
        return context


def _job_list_columns(jobs):
    """Only the columns the job table shows (and the tasks' GPU fields for `gpu_ask`)."""
    from django.contrib.auth import get_user_model
    from django.db.models import Prefetch

    from .models import JobTask

    return (
        jobs.only(
            "id",
            "name",
            "status",
            "submitted_at",
            "pending_reason",
            "pending_kind",
            "queue__id",
            "queue__name",
            "tenant__id",
            "tenant__name",
            "submitter__id",
            f"submitter__{get_user_model().USERNAME_FIELD}",
        )
        .prefetch_related(None)
        .prefetch_related(
            Prefetch(
                "tasks",
                queryset=JobTask.objects.only(
                    "id", "job_id", "replicas", "gpus", "gpu_milli", "gpu_memory_mib"
                ),
            ),
        )
    )


STATUS_TIMELINE = (
    ("Submitted", "submitted_at"),
    ("Admitted", "admitted_at"),
    ("Started", "started_at"),
    ("Finished", "finished_at"),
    ("Cancelled", "cancelled_at"),
)


class JobDetailView(LoginRequiredMixin, TemplateView):
    template_name = "jobs/job_detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(_job_page(self.request, kwargs["job_id"]))
        context["log_retention_minutes"] = settings.FINISHED_POD_RETENTION_SECONDS // 60
        return context


class JobLiveView(LoginRequiredMixin, View):
    """The parts of the job page that change (state, reason, placement, the pods to read logs
    of, restarts, preemptions), for the page to swap in every few seconds
    (static/js/job_live.js). `X-Job-Final: 1` once the job has ended: nothing will change any
    more."""

    http_method_names = ["get"]

    def get(self, request: HttpRequest, job_id: int) -> HttpResponse:
        context = _job_page(request, job_id)
        response = render(request, "jobs/_job_live.html", context)
        if context["job"].is_terminal:
            response["X-Job-Final"] = "1"
        return response


def _job_page(request: HttpRequest, job_id: int) -> dict[str, Any]:
    """What the job page shows; 404 for a job the user may not see."""
    (job,) = job_gpu_asks([job_get(user=request.user, job_id=job_id)])
    state = job_state(user=request.user, job=job)
    timeline = [
        _timeline_step(label, getattr(job, field), state)
        for label, field in STATUS_TIMELINE
        if field != "cancelled_at" or job.cancelled_at
    ]
    preemptions = list(preemption_event_list_for_job(job_id=job.pk)[:100])
    start_estimate = job_start_estimate(job)
    return {
        "job": job,
        "state": state,
        "tasks": list(job.tasks.all()),
        "placements": placement_list_for_job(job_id=job.pk),
        "log_pods": job_pod_names(job=job),
        "preemptions": preemptions,
        # An elastic job can lose pods and keep running: its count of preemptions (times sent
        # back to wait) alone would read 0 above a history of evictions.
        "pods_evicted": pods_evicted_count(job_id=job.pk),
        # Events naming another tenant's job are shown without the sentence.
        "readable_preemption_ids": readable_preemptions(request.user, preemptions),
        "visible_job_ids": visible_job_ids(
            request.user,
            [e.victim_job_id for e in preemptions] + [e.preemptor_job_id for e in preemptions],
        ),
        "timeline": timeline,
        "position": _position_text(job, state),
        "start_estimate": start_estimate,
        "start_text": estimate_text(start_estimate),
        "can_cancel": can_cancel_job(request.user, job) and not job.is_terminal,
        "can_release": allows(job.status, Event.RELEASE) and can_release_job(request.user, job),
        "plugins": sorted((job.plugins or {}).items()),
        "ray_dashboard": _ray_dashboard(job),
        "start_attempts": job_start_attempts(job=job, now=timezone.now()),
        "pod_notice": job_pod_notice(job=job),
    }


def _position_text(job: Job, state: JobState) -> str:
    """Where the last cycle put a waiting job in its queue's line ("" when not in it)."""
    if not state.waiting or state.never:
        return ""
    position = job_queue_rank(job=job)
    if position is None:
        return ""
    return queue_position_text(position=position, queue=job.queue.name)


def _ray_dashboard(job: Job) -> dict[str, str] | None:
    """How to reach a ray job's dashboard from a machine with kubectl: its head's Service."""
    if RAY not in (job.plugins or {}):
        return None
    namespace = placing_namespaces({job.pk: job.tenant.name})[job.pk]
    port = plugins_config(job.plugins).ray_dashboard_port
    return {
        "command": f"kubectl -n {namespace} port-forward svc/{ray_service_name(job.object_name)} {port}",
        "url": f"http://localhost:{port}/",
    }


def _timeline_step(label: str, at: Any, state: JobState) -> dict[str, Any]:
    """A waiting job's admission and start belong to an earlier run: shown as such, so the
    page never claims a start time for a job that waits."""
    if state.waiting and label in ("Admitted", "Started"):
        return {"label": label, "at": None, "earlier": at}
    return {"label": label, "at": at, "earlier": None}


def _job_action(
    request: HttpRequest, job_id: int, action: Callable[..., Job], done: str
) -> HttpResponse:
    """Run a job service as the user (`action(job=, actor=)`), say how it went, show the job."""
    job = job_get(user=request.user, job_id=job_id)
    try:
        action(job=job, actor=request.user)
    except ValidationError as error:
        for message in error.messages:
            messages.error(request, message)
    else:
        messages.success(request, done.format(name=job.name))
    return redirect("jobs:job_detail", job_id=job.pk)


class JobCancelView(LoginRequiredMixin, View):
    http_method_names = ["post"]

    def post(self, request: HttpRequest, job_id: int) -> HttpResponse:
        return _job_action(request, job_id, job_cancel, JOB_CANCELLED)


class JobReleaseView(LoginRequiredMixin, View):
    """A site admin sends a quarantined job back to pending."""

    http_method_names = ["post"]

    def post(self, request: HttpRequest, job_id: int) -> HttpResponse:
        return _job_action(request, job_id, job_quarantine_release, JOB_RELEASED)


def _submittable_queues(request: HttpRequest):
    return queue_list(user=request.user).filter(state=Queue.State.OPEN)


class JobSubmitView(RoleRequiredMixin, View):
    """Submit a job: one form for the job, a formset with one entry per role."""

    required_role = ROLE_MEMBER
    template_name = "jobs/job_submit.html"

    def _forms(self, request: HttpRequest, data: Any = None) -> tuple[JobSubmitForm, Any]:
        form = JobSubmitForm(
            data, queues=_submittable_queues(request), gpu_models=node_gpu_model_list()
        )
        formset = TaskFormSet(data, prefix="tasks")
        return form, formset

    def _render(self, request: HttpRequest, form: JobSubmitForm, formset: Any) -> HttpResponse:
        context = {"form": form, "formset": formset, "limits": job_limits()}
        return render(request, self.template_name, context)

    def get(self, request: HttpRequest) -> HttpResponse:
        form, formset = self._forms(request)
        queue_id = _int_or_none(request.GET.get("queue"))
        if queue_id is not None:
            form.initial["queue"] = queue_id
        return self._render(request, form, formset)

    def post(self, request: HttpRequest) -> HttpResponse:
        form, formset = self._forms(request, request.POST)
        if not (form.is_valid() and formset.is_valid()):
            return self._render(request, form, formset)
        data = form.cleaned_data
        task_forms = [f for f in formset.forms if not formset._should_delete_form(f)]
        tasks = [f.as_task(gpu_model=data["gpu_model"]) for f in task_forms]
        try:
            job = job_submit(
                submitter=request.user,
                queue=data["queue"],
                name=data["name"],
                tasks=tasks,
                priority=data["priority"],
                min_available=data["min_available"],
                expected_duration_seconds=data["expected_duration_seconds"],
            )
        except ValidationError as error:
            submit_errors_apply(error=error, form=form, formset=formset, task_forms=task_forms)
            return self._render(request, form, formset)
        messages.success(request, JOB_SUBMITTED.format(name=job.name, queue=job.queue.name))
        return redirect("jobs:job_detail", job_id=job.pk)


class JobUploadView(RoleRequiredMixin, View):
    """Submit the Volcano `batch.volcano.sh/v1alpha1` Jobs of a file, as the API submits one
    (`job_submit_manifests`): all of them or, when one is at fault, none; errors name manifest
    paths (and the document, in a file of several), and the page says which jobs it made."""

    required_role = ROLE_MEMBER
    template_name = "jobs/job_upload.html"

    def _render(
        self, request: HttpRequest, form: JobUploadForm, errors=None, kept: bool = False
    ) -> HttpResponse:
        context = {
            "form": form,
            "errors": errors or [],
            "sample_url": reverse("jobs:job_sample"),
            "kept_file": kept,
        }
        return render(request, self.template_name, context)

    def get(self, request: HttpRequest) -> HttpResponse:
        initial = {}
        if request.GET.get("sample") == "1":
            initial["text"] = volcano_sample(queue=_sample_queue(request))
        return self._render(request, JobUploadForm(initial=initial))

    def post(self, request: HttpRequest) -> HttpResponse:
        form = JobUploadForm(request.POST, request.FILES)
        if not form.is_valid():
            return self._render(request, form, kept=form.keep_file_text())
        try:
            upload = job_submit_manifests(
                submitter=request.user, documents=form.cleaned_data["documents"]
            )
        except ValidationError as error:
            errors = _lines(error.message_dict)
            return self._render(request, form, errors, kept=form.keep_file_text())
        jobs = [submitted.job for submitted in upload.submitted]
        if len(jobs) == 1:
            messages.success(
                request, JOB_SUBMITTED.format(name=jobs[0].name, queue=jobs[0].queue.name)
            )
        else:
            named = ", ".join(f"{job.name} (#{job.pk}, queue {job.queue.name})" for job in jobs)
            messages.success(request, UPLOAD_SUBMITTED_SEVERAL.format(count=len(jobs), jobs=named))
        for skipped in upload.skipped:
            messages.info(request, skipped)
        for submitted in upload.submitted:
            where = f"{submitted.job.name}: " if len(jobs) > 1 else ""
            for warning in submitted.warnings:
                messages.info(request, UPLOAD_WARNING.format(where=where, warning=warning))
        if len(jobs) == 1:
            return redirect("jobs:job_detail", job_id=jobs[0].pk)
        return redirect("jobs:job_list")


class JobSampleView(LoginRequiredMixin, View):
    """The upload page's sample manifest, as a file, for one of the user's queues."""

    http_method_names = ["get"]

    def get(self, request: HttpRequest) -> HttpResponse:
        response = HttpResponse(
            volcano_sample(queue=_sample_queue(request)), content_type="application/yaml"
        )
        response["Content-Disposition"] = f'attachment; filename="{SAMPLE_FILENAME}"'
        return response


def _sample_queue(request: HttpRequest) -> str:
    """The first queue the user may submit to, so the sample is accepted as it is."""
    queue = _submittable_queues(request).order_by("name").first()
    return queue.name if queue else "your-queue"


def _lines(errors: dict[str, list[str]]) -> list[str]:
    return [f"{path}: {message}" for path, msgs in errors.items() for message in msgs]
