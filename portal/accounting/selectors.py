"""Reads of the usage ledger, scoped to what the user may see: site admins every tenant,
anyone else the tenants they belong to (portal.tenants.access.visible_tenants)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.contrib.auth import get_user_model
from django.db.models import Sum

from portal.common.access import AnyUser
from portal.queues.models import Queue
from portal.tenants.access import visible_tenants
from portal.tenants.models import Tenant

from .models import LedgerEntry

GROUP_BY = ("tenant", "queue", "user")
MILLI_SECONDS_PER_HOUR = 1000 * 3600


@dataclass(frozen=True, slots=True)
class ReportRow:
    """One tenant, queue or user in one month. Amounts in milli-GPU-seconds and
    millicore-seconds (exact); the `_hours` properties are what pages show."""

    id: int
    name: str
    tenant: str  # the row's tenant ("" when grouping by user: a user may be in several)
    gpu_milli_seconds_within: int
    gpu_milli_seconds_borrowed: int
    cpu_milli_seconds_within: int
    cpu_milli_seconds_borrowed: int
    gpu_milli_seconds_lost: int
    cpu_milli_seconds_lost: int

    @property
    def gpu_milli_seconds(self) -> int:
        return self.gpu_milli_seconds_within + self.gpu_milli_seconds_borrowed

    @property
    def cpu_milli_seconds(self) -> int:
        return self.cpu_milli_seconds_within + self.cpu_milli_seconds_borrowed

    def hours(self) -> dict[str, float]:
        """GPU-hours and CPU-core-hours, rounded to the thousandth."""
        return {
            "gpu_hours": _hours(self.gpu_milli_seconds),
            "gpu_hours_within": _hours(self.gpu_milli_seconds_within),
            "gpu_hours_borrowed": _hours(self.gpu_milli_seconds_borrowed),
            "gpu_hours_lost": _hours(self.gpu_milli_seconds_lost),
            "cpu_core_hours": _hours(self.cpu_milli_seconds),
            "cpu_core_hours_within": _hours(self.cpu_milli_seconds_within),
            "cpu_core_hours_borrowed": _hours(self.cpu_milli_seconds_borrowed),
            "cpu_core_hours_lost": _hours(self.cpu_milli_seconds_lost),
        }


def _hours(milli_seconds: int) -> float:
    return round(milli_seconds / MILLI_SECONDS_PER_HOUR, 3)


def usage_report(*, user: AnyUser, group_by: str, month: date) -> list[ReportRow]:
    """The month's use per tenant, queue or user, largest GPU use first (then by name)."""
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {GROUP_BY}, not {group_by!r}")
    sums = {field: Sum(field) for field in LedgerEntry.AMOUNTS}
    rows = (
        LedgerEntry.objects.filter(month=month, tenant__in=visible_tenants(user))
        .values(f"{group_by}_id")
        .annotate(**sums)
        .order_by()
    )
    ids = [row[f"{group_by}_id"] for row in rows]
    names, tenants = _names(group_by, ids)
    report = [
        ReportRow(
            id=row[f"{group_by}_id"],
            name=names.get(row[f"{group_by}_id"], ""),
            tenant=tenants.get(row[f"{group_by}_id"], ""),
            **{field: row[field] or 0 for field in LedgerEntry.AMOUNTS},
        )
        for row in rows
    ]
    return sorted(report, key=lambda r: (-r.gpu_milli_seconds, r.name, r.id))


def _names(group_by: str, ids: list[int]) -> tuple[dict[int, str], dict[int, str]]:
    if group_by == "tenant":
        return dict(Tenant.objects.filter(pk__in=ids).values_list("pk", "name")), {}
    if group_by == "queue":
        queues = Queue.objects.filter(pk__in=ids).values_list("pk", "name", "tenant__name")
        names, tenants = {}, {}
        for pk, name, tenant in queues:
            names[pk], tenants[pk] = name, tenant
        return names, tenants
    users = get_user_model().objects.filter(pk__in=ids).values_list("pk", "username")
    return dict(users), {}


def usage_report_total(rows: list[ReportRow]) -> ReportRow:
    """The report's bottom line: every row added up."""
    return ReportRow(
        id=0,
        name="total",
        tenant="",
        **{field: sum(getattr(row, field) for row in rows) for field in LedgerEntry.AMOUNTS},
    )
