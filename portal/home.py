"""The start page: it gathers every app's lists, so it lives at the project level (beside
urls.py), not in ``portal.common``, which stays below the apps."""

from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.views.generic import TemplateView

from portal.common.access import is_site_admin
from portal.jobs.selectors import job_gpu_asks, job_list
from portal.queues.selectors import queue_list, queue_list_editable
from portal.tenants.selectors import membership_list, tenant_list

HOME_JOB_LIMIT = 20


class HomeView(LoginRequiredMixin, TemplateView):
    """Role-specific start page: your queues and jobs; what you lead; everything for staff."""

    template_name = "common/home.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        user = self.request.user
        context["memberships"] = membership_list(user=user)
        context["queues"] = queue_list(user=user)
        context["my_jobs"] = job_gpu_asks(job_list(user=user, mine=True)[:HOME_JOB_LIMIT])
        context["editable_queues"] = queue_list_editable(user=user)
        if is_site_admin(user):
            context["tenants"] = tenant_list(user=user).prefetch_related("queues")
        return context
