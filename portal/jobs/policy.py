"""The cluster policy in force for a tenant's jobs (jobspec.tenancy.TenantPolicy): its pod
security level and what its site admins allow it and its queue, the names its templates may
give the objects of its namespace, from the rows and the settings of now. The rules are
jobspec's (podsecurity, tenancy); every way a job comes in is checked by them in job_build."""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings

from jobspec.podsecurity import DEFAULT_LEVEL
from jobspec.tenancy import ReferenceScope, TenantPolicy
from portal.cluster.namespaces import job_namespace
from portal.queues.models import Queue
from portal.tenants.models import Tenant


def job_policy(
    *, tenant: Tenant, queue: Queue | None, tenant_names: Iterable[str] | None = None
) -> TenantPolicy:
    """What `tenant`'s jobs in `queue` may do on the cluster. `tenant_names`: every tenant's
    name, when the caller has read them (else they are read here, if the namespace is
    shared)."""
    return TenantPolicy(
        tenant=tenant.name,
        level=tenant.security_level,
        tolerations=tuple(tenant.allowed_tolerations)
        + tuple(queue.allowed_tolerations if queue else ()),
        gpu_resource_names=tuple(settings.GPU_RESOURCE_NAMES),
        priority_classes=tuple(tenant.allowed_priority_classes)
        + tuple(queue.allowed_priority_classes if queue else ()),
        annotations=tuple(settings.JOB_ANNOTATIONS_ALLOWED),
        references=reference_scope(tenant.name, tenant_names),
    )


def offline_policy(*, level: str = DEFAULT_LEVEL, tenant: str | None = None) -> TenantPolicy:
    """The defaults at `level`, for a dry run that reads no rows: no admin's allowances; in a
    shared namespace, `tenant`'s prefix (no prefix check without a tenant)."""
    scope = reference_scope(tenant, ()) if tenant else ReferenceScope()
    return TenantPolicy(
        tenant=tenant or "",
        level=level,
        gpu_resource_names=tuple(settings.GPU_RESOURCE_NAMES),
        annotations=tuple(settings.JOB_ANNOTATIONS_ALLOWED),
        references=scope,
    )


def reference_scope(tenant: str, tenant_names: Iterable[str] | None) -> ReferenceScope:
    """Its own namespace: any name but the portal's; a shared one: `<tenant>-` names only,
    and none of a longer tenant's prefix."""
    if settings.KUBERNETES_NAMESPACE_PER_TENANT:
        return ReferenceScope()
    prefix = f"{tenant}-"
    if tenant_names is None:
        tenant_names = Tenant.objects.filter(name__startswith=prefix).values_list("name", flat=True)
    others = tuple(sorted(f"{name}-" for name in tenant_names if name.startswith(prefix)))
    return ReferenceScope(prefix=prefix, others=others, namespace=job_namespace(tenant))
