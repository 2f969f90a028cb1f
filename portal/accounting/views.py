"""The usage page (site admins and leads): a month's GPU-hours per tenant, queue or user, with
the same figures and CSV as GET /api/v1/usage/report/."""

from http import HTTPStatus

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views import View

from portal.common.access import ROLE_LEAD
from portal.tenants.access import RoleRequiredMixin

from .forms import ReportForm
from .report import current_month
from .selectors import usage_report, usage_report_total


class UsageReportView(RoleRequiredMixin, View):
    required_role = ROLE_LEAD

    def get(self, request: HttpRequest) -> HttpResponse:
        form = ReportForm.from_query(request.GET)
        context = {"form": form, "rows": [], "total": None}
        if not form.is_valid():
            return render(request, "accounting/report.html", context, status=HTTPStatus.BAD_REQUEST)
        group_by, month = form.cleaned_data["group_by"], form.cleaned_data["month"]
        rows = usage_report(user=request.user, group_by=group_by, month=month)
        context.update(
            group_by=group_by,
            month=f"{month:%Y-%m}",
            complete=month < current_month(timezone.now()),
            rows=rows,
            total=usage_report_total(rows),
        )
        return render(request, "accounting/report.html", context)
