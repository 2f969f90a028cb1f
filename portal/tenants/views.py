"""Tenant pages: every member sees their tenants' quota and use; site admins edit the quota,
with the live preview of every tenant's and queue's deserved share and the audit trail."""

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views import View
from django.views.generic import TemplateView

from jobspec.tolerations import tolerations_text
from portal.cluster.namespaces import SHARED_NAMESPACE, job_namespace, shared_on_cluster
from portal.common.access import is_site_admin
from portal.queues.access import can_edit_queue, can_manage_queues_of
from portal.queues.preview import preview_rows_for, tenant_preview
from portal.queues.selectors import queue_list, tenant_defaults
from portal.queues.services import queue_default_set

from .access import can_edit_tenant
from .forms import TenantQuotaForm
from .models import Tenant
from .selectors import (
    tenant_change_list,
    tenant_get,
    tenant_list,
    tenant_quota_summaries,
    tenant_quota_summary,
)
from .services import TENANT_EDIT_FORBIDDEN, tenant_update, tenant_update_check

TENANT_SAVED = "Tenant {name} saved."
DEFAULT_QUEUE_SAVED = "Default queue of {whom}: {queue}."
TENANT_UNCHANGED = "Nothing changed."
# What each pod security level (jobspec.podsecurity) means for a tenant's jobs.
LEVEL_TEXT = {
    "baseline": (
        "its pods may not be privileged, add capabilities beyond the container runtime's "
        "default set, mount a node's directory or run unconfined by seccomp or AppArmor "
        "(Kubernetes' Pod Security Standards). The portal refuses such a job at submit, naming "
        "the field, and the namespace's pod-security label refuses such a pod. Pods mount no "
        "service-account token and run with seccomp RuntimeDefault."
    ),
    "restricted": (
        "baseline, and its pods run as a non-root user with every capability dropped and no "
        "privilege escalation (the portal sets these in every pod). Images that run as root "
        "fail to start under it: vLLM, many NGC containers, sshd for the mpi and ssh plugins."
    ),
    "privileged": (
        "its pods may do anything a pod can, to the node too (privileged containers, host "
        "paths where JOB_ALLOW_HOST_PATH allows them, a service-account token): a site "
        "admin's explicit choice for a tenant it trusts with its nodes."
    ),
}
ANY_BUT_SYSTEM = "any but the cluster's own (system-*)"


def cluster_policy_context(user: Any, tenant: Tenant, queues: list[Any]) -> dict[str, Any]:
    """What the tenant's jobs may do on the cluster, as its pages show it; for a site admin,
    where to change it and, on a real cluster whose tenants share a namespace, the warning."""
    admin = is_site_admin(user)
    gpu_taints = [f"{name}:NoSchedule" for name in settings.GPU_RESOURCE_NAMES]
    return {
        "level": tenant.security_level,
        "level_text": LEVEL_TEXT[tenant.security_level],
        "tolerations": gpu_taints + _taints(tenant.allowed_tolerations),
        "priority_classes": ", ".join(tenant.allowed_priority_classes) or ANY_BUT_SYSTEM,
        "queues": [
            {
                "name": q.name,
                "text": "; ".join(_taints(q.allowed_tolerations) + q.allowed_priority_classes),
            }
            for q in queues
            if q.allowed_tolerations or q.allowed_priority_classes
        ],
        "admin_url": reverse("admin:tenants_tenant_change", args=[tenant.pk]) if admin else "",
        "shared_warning": (
            SHARED_NAMESPACE.format(namespace=settings.KUBERNETES_NAMESPACE)
            if admin and shared_on_cluster()
            else ""
        ),
    }


def _taints(tolerations: list[dict]) -> list[str]:
    return [line for line in tolerations_text(tolerations).splitlines() if line]


class TenantListView(LoginRequiredMixin, TemplateView):
    template_name = "tenants/tenant_list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        tenants = list(tenant_list(user=self.request.user))
        context["quotas"] = tenant_quota_summaries(tenants=tenants)
        context["editable_tenant_ids"] = {
            tenant.pk for tenant in tenants if can_edit_tenant(self.request.user, tenant)
        }
        return context


class TenantDetailView(LoginRequiredMixin, View):
    """A member's (or an admin's) view of one tenant: quota, use, its queues, history."""

    template_name = "tenants/tenant_detail.html"

    def get(self, request: HttpRequest, tenant_id: int) -> HttpResponse:
        tenant = tenant_get(user=request.user, tenant_id=tenant_id)
        queues = list(queue_list(user=request.user, tenant_id=tenant.pk))
        for queue in queues:
            queue.editable = can_edit_queue(request.user, queue)
        context = {
            "quota": tenant_quota_summary(tenant=tenant),
            "queues": queues,
            "changes": tenant_change_list(tenant=tenant),
            "can_edit": can_edit_tenant(request.user, tenant),
            "namespace": job_namespace(tenant.name),
            "namespace_per_tenant": settings.KUBERNETES_NAMESPACE_PER_TENANT,
            "defaults": tenant_defaults(user=request.user, tenant_id=tenant.pk),
            "can_set_defaults": can_manage_queues_of(request.user, tenant),
            "policy": cluster_policy_context(request.user, tenant, queues),
        }
        return render(request, self.template_name, context)


class TenantDefaultQueueView(LoginRequiredMixin, View):
    """A lead sets the queue a manifest without spec.queue goes to: the tenant's (no `user`)
    or one member's; an empty `queue` clears it. Errors come back as messages on the page."""

    http_method_names = ["post"]

    def post(self, request: HttpRequest, tenant_id: int) -> HttpResponse:
        tenant = tenant_get(user=request.user, tenant_id=tenant_id)
        queue = request.POST.get("queue") or None
        username = request.POST.get("user") or None
        try:
            queue_default_set(tenant=tenant, queue=queue, actor=request.user, username=username)
        except ValidationError as error:
            for messages_of_field in error.message_dict.values():
                for message in messages_of_field:
                    messages.error(request, message)
        else:
            whom = username or f"tenant {tenant.name}"
            messages.success(request, DEFAULT_QUEUE_SAVED.format(whom=whom, queue=queue or "none"))
        return redirect("tenants:tenant_detail", tenant_id=tenant.pk)


class TenantEditView(LoginRequiredMixin, View):
    """Site admins only. As in the API: 404 for a tenant the user is not in (or none), 403
    for one they are a member of."""

    template_name = "tenants/tenant_edit.html"

    def _tenant(self, request: HttpRequest, tenant_id: int) -> Tenant:
        tenant = tenant_get(user=request.user, tenant_id=tenant_id)
        if not can_edit_tenant(request.user, tenant):
            raise PermissionDenied(TENANT_EDIT_FORBIDDEN)
        return tenant

    def _render(self, request: HttpRequest, tenant: Tenant, form: TenantQuotaForm) -> HttpResponse:
        context = {
            "tenant": tenant,
            "quota": tenant_quota_summary(tenant=tenant),
            "form": form,
            "changes": tenant_change_list(tenant=tenant),
            "preview": preview_rows_for(request.user, tenant_preview(tenant=tenant, changes={})),
            "policy": cluster_policy_context(
                request.user, tenant, list(queue_list(user=request.user, tenant_id=tenant.pk))
            ),
        }
        return render(request, self.template_name, context)

    def get(self, request: HttpRequest, tenant_id: int) -> HttpResponse:
        tenant = self._tenant(request, tenant_id)
        return self._render(
            request, tenant, TenantQuotaForm(initial=TenantQuotaForm.initial_for(tenant))
        )

    def post(self, request: HttpRequest, tenant_id: int) -> HttpResponse:
        tenant = self._tenant(request, tenant_id)
        form = TenantQuotaForm(request.POST)
        if not form.is_valid():
            return self._render(request, tenant, form)
        before = tenant.changes.count()
        try:
            tenant = tenant_update(tenant=tenant, actor=request.user, **form.cleaned_data)
        except ValidationError as error:
            form.add_service_errors(error)
            return self._render(request, tenant, form)
        if tenant.changes.count() == before:
            messages.info(request, TENANT_UNCHANGED)
        else:
            messages.success(request, TENANT_SAVED.format(name=tenant.name))
        return redirect("tenants:tenant_edit", tenant_id=tenant.pk)


class TenantPreviewView(TenantEditView):
    """JSON: every tenant's and queue's deserved GPUs now and under the quota in the query."""

    http_method_names = ["get"]

    def get(self, request: HttpRequest, tenant_id: int) -> HttpResponse:
        tenant = self._tenant(request, tenant_id)
        form = TenantQuotaForm(request.GET)
        if not form.is_valid():
            return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
        try:
            tenant_update_check(tenant=tenant, **form.cleaned_data)
        except ValidationError as error:
            # What Save would refuse, under the same fields: no shares drawn for it.
            form.add_service_errors(error)
            return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
        rows = tenant_preview(tenant=tenant, changes=form.cleaned_data)
        return JsonResponse({"tenant": tenant.name, "queues": preview_rows_for(request.user, rows)})
