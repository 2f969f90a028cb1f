"""`GET /api/v1/usage/report/`: GPU-hours and CPU-core-hours of a month per tenant, queue or
user, from the permanent ledger; `?format=csv` for a spreadsheet."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from portal.api.base import ApiSerializer, ApiView, error_responses
from portal.common.csvsafe import CsvLines

from .report import current_month, month_parse
from .selectors import GROUP_BY, ReportRow, usage_report, usage_report_total

FORMAT_UNKNOWN = "expected json or csv"
HOURS = (
    "gpu_hours",
    "gpu_hours_within",
    "gpu_hours_borrowed",
    "gpu_hours_lost",
    "cpu_core_hours",
    "cpu_core_hours_within",
    "cpu_core_hours_borrowed",
    "cpu_core_hours_lost",
)
EXACT = (
    "gpu_milli_seconds_within",
    "gpu_milli_seconds_borrowed",
    "gpu_milli_seconds_lost",
    "cpu_milli_seconds_within",
    "cpu_milli_seconds_borrowed",
    "cpu_milli_seconds_lost",
)


class ReportFilterSerializer(ApiSerializer):
    group_by = serializers.ChoiceField(choices=GROUP_BY, default="tenant")
    month = serializers.CharField(
        required=False, help_text="YYYY-MM (UTC); the current month when absent"
    )

    def validate_month(self, value: str) -> Any:
        try:
            return month_parse(value, now=timezone.now())
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.messages) from error

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs.setdefault("month", current_month(timezone.now()))
        return attrs


def report_row_data(row: ReportRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "tenant": row.tenant,
        **row.hours(),
        **{field: getattr(row, field) for field in EXACT},
    }


def report_csv_lines(group_by: str, rows: list[dict[str, Any]]):
    """The report as CSV lines: one per row, text cells neutralised (portal/common/csvsafe)."""
    writer = CsvLines()
    yield writer.line([group_by, "tenant", *HOURS, *EXACT])
    for row in rows:
        yield writer.line([row["name"], row["tenant"], *(row[f] for f in (*HOURS, *EXACT))])


class ReportCsvRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None):
        return "".join(report_csv_lines(data["group_by"], data["rows"]))


class UsageReportApi(ApiView):
    """A month's use per tenant, queue or user (site admins: every tenant; others: the
    tenants they belong to). Amounts are hours rounded to the thousandth, and exact integers
    (milli-GPU-seconds, millicore-seconds). `within` is use under the queue's guarantee as
    its cycle honoured it, `borrowed` the rest, `lost` work thrown away by evictions (a part
    of the use). A past month never changes; the current one grows until it ends."""

    permission_classes = [IsAuthenticated]
    renderer_classes = [JSONRenderer, ReportCsvRenderer]

    class RowSerializer(ApiSerializer):
        id = serializers.IntegerField()
        name = serializers.CharField()
        tenant = serializers.CharField(help_text="The queue's tenant; empty for other groups")
        gpu_hours = serializers.FloatField()
        gpu_hours_within = serializers.FloatField()
        gpu_hours_borrowed = serializers.FloatField()
        gpu_hours_lost = serializers.FloatField()
        cpu_core_hours = serializers.FloatField()
        cpu_core_hours_within = serializers.FloatField()
        cpu_core_hours_borrowed = serializers.FloatField()
        cpu_core_hours_lost = serializers.FloatField()
        gpu_milli_seconds_within = serializers.IntegerField()
        gpu_milli_seconds_borrowed = serializers.IntegerField()
        gpu_milli_seconds_lost = serializers.IntegerField()
        cpu_milli_seconds_within = serializers.IntegerField()
        cpu_milli_seconds_borrowed = serializers.IntegerField()
        cpu_milli_seconds_lost = serializers.IntegerField()

    class OutputSerializer(ApiSerializer):
        month = serializers.CharField()
        group_by = serializers.ChoiceField(choices=GROUP_BY)
        complete = serializers.BooleanField(help_text="The month has ended: figures are final")
        rows = serializers.ListField(child=serializers.DictField())
        total = serializers.DictField()

    @extend_schema(
        operation_id="usage_report",
        tags=["usage"],
        parameters=[
            ReportFilterSerializer,
            OpenApiParameter("format", str, enum=["json", "csv"], description="csv: a download"),
        ],
        responses={200: OutputSerializer, **error_responses(400, 401)},
    )
    def get(self, request: Request) -> Response:
        filters = ReportFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        group_by, month = filters.validated_data["group_by"], filters.validated_data["month"]
        rows = usage_report(user=request.user, group_by=group_by, month=month)
        data = {
            "month": f"{month:%Y-%m}",
            "group_by": group_by,
            "complete": month < current_month(timezone.now()),
            "rows": [report_row_data(row) for row in rows],
            "total": report_row_data(usage_report_total(rows)),
        }
        response = Response(data)
        if request.accepted_renderer.format == "csv":
            response["Content-Disposition"] = (
                f'attachment; filename="usage-{group_by}-{month:%Y-%m}.csv"'
            )
        return response

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        try:
            return super().perform_content_negotiation(request, force=force)
        except Http404 as error:  # DRF's answer to a ?format= no renderer has
            raise serializers.ValidationError({"format": [FORMAT_UNKNOWN]}) from error

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any):
        # Anything but a report (an error, OPTIONS' metadata) is JSON whatever format was
        # asked for: the CSV renderer has only a report's rows to write.
        if not (isinstance(response, Response) and "rows" in (response.data or {})):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)
