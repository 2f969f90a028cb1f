from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet, Sum
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404

from .access import visible_tenants
from .models import Membership, Tenant, TenantChange, TenantUsageSample


def tenant_list(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Tenant]:
    return visible_tenants(user).order_by("name")


def tenant_get(*, user: AbstractBaseUser | AnonymousUser, tenant_id: int) -> Tenant:
    """The tenant if the user may see it (a member, or a site admin); Http404 otherwise."""
    return get_object_or_404(visible_tenants(user), pk=tenant_id)


def membership_list(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Membership]:
    if not user.is_authenticated:
        return Membership.objects.none()
    return Membership.objects.filter(user=user).select_related("tenant").order_by("tenant__name")


def tenant_change_list(*, tenant: Tenant, limit: int = 50) -> QuerySet[TenantChange]:
    return tenant.changes.select_related("changed_by").order_by("-changed_at", "-id")[:limit]


def tenant_usage_latest(*, tenant_ids: list[int]) -> dict[int, TenantUsageSample]:
    """The newest share sample of each tenant (one indexed lookup per tenant)."""
    latest = {}
    for tenant_id in tenant_ids:
        sample = (
            TenantUsageSample.objects.filter(tenant_id=tenant_id).order_by("-at", "-id").first()
        )
        if sample is not None:
            latest[tenant_id] = sample
    return latest


def gpus_allocated_per_tenant(*, tenant_ids: list[int]) -> dict[int, int | float]:
    """Tenant id -> GPUs held by its active placements now, shares of a device counted
    exactly (one aggregate query)."""
    from jobspec.gpushare import gpus_number
    from portal.cluster.models import Placement, placement_milli

    rows = (
        Placement.objects.filter(state__in=Placement.ACTIVE_STATES, job__tenant_id__in=tenant_ids)
        .values("job__tenant_id")
        .annotate(milli=Sum(placement_milli()))
    )
    return {row["job__tenant_id"]: gpus_number(row["milli"] or 0) for row in rows}


@dataclass(frozen=True)
class TenantQuota:
    """A tenant's quota in GPUs, what its queues guarantee of it, its use and its share."""

    tenant: Tenant
    queues_guarantee_gpus: int
    gpus_allocated: int | float  # shares of a device counted exactly
    gpus_deserved: float | None  # from the latest cycle's sample; None before the first

    @property
    def unassigned_guarantee_gpus(self) -> int:
        return self.tenant.guarantee_gpus - self.queues_guarantee_gpus


def tenant_quota_summary(*, tenant: Tenant) -> TenantQuota:
    return tenant_quota_summaries(tenants=[tenant])[0]


def tenant_quota_summaries(*, tenants: list[Tenant]) -> list[TenantQuota]:
    """Quota, queue guarantees, live use and latest share of each tenant (three queries plus
    one indexed lookup per tenant)."""
    from portal.queues.models import Queue

    ids = [tenant.pk for tenant in tenants]
    guaranteed = dict(
        Queue.objects.filter(tenant_id__in=ids)
        .values("tenant_id")
        .annotate(total=Coalesce(Sum("guarantee_gpus"), 0))
        .values_list("tenant_id", "total")
    )
    used = gpus_allocated_per_tenant(tenant_ids=ids)
    shares = tenant_usage_latest(tenant_ids=ids)
    return [
        TenantQuota(
            tenant=tenant,
            queues_guarantee_gpus=int(guaranteed.get(tenant.pk, 0)),
            gpus_allocated=used.get(tenant.pk, 0),
            gpus_deserved=shares[tenant.pk].gpus_deserved if tenant.pk in shares else None,
        )
        for tenant in tenants
    ]
