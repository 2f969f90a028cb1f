from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.views.generic import TemplateView

from portal.common.access import is_site_admin
from portal.jobs.selectors import job_list
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
        context["my_jobs"] = job_list(user=user, mine=True)[:HOME_JOB_LIMIT]
        context["editable_queues"] = queue_list_editable(user=user)
        if is_site_admin(user):
            context["tenants"] = tenant_list(user=user).prefetch_related("queues")
        return context


API_PREFIX = "/api/"


def page_not_found(request, exception):
    """404 for every unmatched URL: JSON under /api/ (clients parse it; a malformed id such as
    /api/v1/jobs/abc/ matches no route), the HTML page elsewhere."""
    from django.http import JsonResponse
    from django.views import defaults

    if request.path.startswith(API_PREFIX):
        return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request):
    from django.http import JsonResponse
    from django.views import defaults

    if request.path.startswith(API_PREFIX):
        return JsonResponse({"detail": "Internal server error.", "code": "error"}, status=500)
    return defaults.server_error(request)
