"""Which namespace a job's objects live in (pods, their bindings and Events, the owner object,
the svc plugin's Service, ConfigMap and NetworkPolicy): one rule for every writer and reader.

With KUBERNETES_NAMESPACE_PER_TENANT, a tenant's jobs go to `<KUBERNETES_NAMESPACE_PREFIX>
<tenant name>` (jobspec.labels.tenant_namespace), else all to KUBERNETES_NAMESPACE.
A placement keeps the namespace its pod was made in (Placement.namespace), and a job placed
again while some of its pods run joins them, so changing the setting never moves, orphans or
deletes a running job's objects: new jobs follow the new rule, running ones end where they
started.

The portal never creates namespaces (that would need cluster-wide rights on them); a cluster
admin does, with the Role the portal needs there and the `pod-security.kubernetes.io/enforce`
label at the tenant's pod security level (`python -m portal.cluster.rbac_for_tenant`), so the
API server refuses a pod the portal should not have let through. In a shared namespace the label
can only be the least restrictive of its tenants' levels, and the tenants are not isolated from
each other on the cluster: the configuration check (`/readyz?check=config`) and the admin's
tenant page say so, and the check compares the labels with the levels.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from jobspec.labels import tenant_namespace
from jobspec.podsecurity import ENFORCE_LABEL, least_restrictive

NAMESPACE_MISSING = (
    "namespace {namespace} does not exist; ask the cluster admin to create it "
    "(python -m portal.cluster.rbac_for_tenant {tenant} | kubectl apply -f -)"
)
SHARED_NAMESPACE = (
    "KUBERNETES_NAMESPACE_PER_TENANT is off on a Kubernetes cluster: tenants are not isolated "
    "on the cluster (every tenant's pods run in namespace {namespace}, with its Secrets, "
    "ConfigMaps and volume claims, under the least restrictive of their pod security levels). "
    "Turn it on and create each tenant's namespace (deploy/README-kubernetes.md)"
)
LEVEL_DRIFT = (
    "namespace {namespace} enforces pod security level {found}, but {expected_of} is "
    "{expected}: kubectl label namespace {namespace} {label}={expected} --overwrite"
)
NO_LEVEL = "none (no {label} label: privileged)"
NAMESPACE_FORBIDDEN = (
    "the portal may not work in namespace {namespace} (its Roles are not there); ask the "
    "cluster admin to apply them (python -m portal.cluster.rbac_for_tenant {tenant} | "
    "kubectl apply -f -)"
)


def job_namespace(tenant: str) -> str:
    """Where a new job of `tenant` (its name) is placed under the current settings."""
    if not settings.KUBERNETES_NAMESPACE_PER_TENANT:
        return settings.KUBERNETES_NAMESPACE
    try:
        return tenant_namespace(tenant, settings.KUBERNETES_NAMESPACE_PREFIX)
    except ValueError as error:
        raise ImproperlyConfigured(str(error)) from error


def placement_namespace(stored: str) -> str:
    """The namespace of a placement's pod: the one it was made in. Placements from before
    namespaces were stored have none, and were all made in KUBERNETES_NAMESPACE."""
    return stored or settings.KUBERNETES_NAMESPACE


def job_namespaces() -> set[str]:
    """Every namespace the portal's job objects may be in now: KUBERNETES_NAMESPACE, each
    tenant's (per tenant), and those of active placements (jobs started under another
    setting). The backend lists its owner objects and svc objects in each of these."""
    from portal.cluster.models import Placement
    from portal.tenants.models import Tenant

    found = {settings.KUBERNETES_NAMESPACE}
    if settings.KUBERNETES_NAMESPACE_PER_TENANT:
        found |= {job_namespace(name) for name in Tenant.objects.values_list("name", flat=True)}
    found |= {
        placement_namespace(stored)
        for stored in Placement.objects.filter(state__in=Placement.ACTIVE_STATES)
        .values_list("namespace", flat=True)
        .distinct()
    }
    return found


def placing_namespaces(tenant_of: dict[int, str]) -> dict[int, str]:
    """job id -> the namespace its new placements go to, for jobs `tenant_of` (id -> tenant
    name): where the job's active pods are, if any (a gang's pods must share the namespace of
    its svc objects), else the tenant's under the current rule."""
    from portal.cluster.models import Placement

    running = dict(
        Placement.objects.filter(job_id__in=tenant_of, state__in=Placement.ACTIVE_STATES)
        .order_by("id")
        .values_list("job_id", "namespace")
    )
    return {
        job_id: placement_namespace(running[job_id]) if job_id in running else job_namespace(tenant)
        for job_id, tenant in tenant_of.items()
    }


def namespace_settings_check(**kwargs: object) -> list:
    """Django system check: KUBERNETES_NAMESPACE_PREFIX can start a namespace's name."""
    from django.core import checks

    try:
        tenant_namespace("tenant", settings.KUBERNETES_NAMESPACE_PREFIX)
    except ValueError as error:
        return [checks.Error(str(error), id="cluster.E001")]
    return []


def namespace_levels() -> dict[str, tuple[str, str]]:
    """namespace -> (the pod security level its label should enforce, whose level that is) for
    the jobs namespaces of the current rule: each tenant's its level; the shared one the least
    restrictive of every tenant's, so that none of their pods is refused."""
    from portal.tenants.models import Tenant

    rows = list(Tenant.objects.order_by("name").values_list("name", "security_level"))
    if settings.KUBERNETES_NAMESPACE_PER_TENANT:
        return {job_namespace(name): (level, f"tenant {name}'s level") for name, level in rows}
    level = least_restrictive([level for _, level in rows])
    return {settings.KUBERNETES_NAMESPACE: (level, "the least restrictive of its tenants' levels")}


def level_drift(
    expected: dict[str, tuple[str, str]], labels: dict[str, dict[str, str]]
) -> list[str]:
    """A warning, with the command that mends it, for each namespace in `labels` (those that
    exist) whose enforce label differs from the level `expected` of it."""
    warnings = []
    for namespace, (level, whose) in sorted(expected.items()):
        if namespace not in labels:
            continue  # missing: namespaces_hold says so to the jobs that wait for it
        found = labels[namespace].get(ENFORCE_LABEL)
        if found == level:
            continue
        warnings.append(
            LEVEL_DRIFT.format(
                namespace=namespace,
                found=found or NO_LEVEL.format(label=ENFORCE_LABEL),
                expected_of=whose,
                expected=level,
                label=ENFORCE_LABEL,
            )
        )
    return warnings


def shared_on_cluster() -> bool:
    """A real cluster whose tenants share one namespace (the setting's default)."""
    return settings.CLUSTER_BACKEND == "kubernetes" and not settings.KUBERNETES_NAMESPACE_PER_TENANT
