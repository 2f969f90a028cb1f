import copy
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction
from django.db.models import F

from portal.common.access import is_site_admin
from portal.common.services import model_update

from .access import can_edit_tenant
from .models import Membership, Tenant, TenantChange
from .quota import (
    QUOTA_FIELDS,
    RESOURCES,
    amount,
    audited_save,
    changes_record,
    named_parts,
    sum_parts,
)

FIELD_NOT_EDITABLE = "this field cannot be changed here"
# What site admins set on a tenant: its quota and the longest its jobs may run.
TENANT_FIELDS = (*QUOTA_FIELDS, "max_runtime_seconds")
TENANT_EDIT_FORBIDDEN = "Only a site admin may change a tenant's quota."
TENANT_BELOW_QUEUES = "{field}: {value} is below the sum of {tenant}'s queue guarantees, {parts}"
QUEUES_ABOVE_TENANT = (
    "{field}: {tenant}'s queues would guarantee {total} ({parts}) but tenant {tenant} "
    "guarantees {limit}"
)
POLICY_FIELDS = ("security_level", "allowed_tolerations", "allowed_priority_classes")
CLUSTER_POLICY_FORBIDDEN = (
    "Only a site admin may change what a tenant's or a queue's jobs may do on the cluster."
)
TENANTS_ABOVE_CLUSTER = (
    "{field}: the tenants' guarantees would be {total} ({parts}) but the cluster has {capacity}"
)


@transaction.atomic
def tenant_create(*, name: str, display_name: str = "", **quota: Any) -> Tenant:
    """Create a tenant; ``quota`` takes the quota fields (weight, guarantee_gpus, ...)."""
    _refuse_unknown(quota)
    tenant = Tenant(name=name, display_name=display_name, **quota)
    tenant.full_clean()
    check_tenant_guarantees_fit_cluster(tenant=tenant, previous={})
    tenant.save()
    return tenant


@transaction.atomic
def tenant_get_or_create(*, name: str, display_name: str = "", **quota: Any) -> tuple[Tenant, bool]:
    tenant = Tenant.objects.filter(name=name).first()
    if tenant is not None:
        return tenant, False
    return tenant_create(name=name, display_name=display_name, **quota), True


@transaction.atomic
def tenant_update(*, tenant: Tenant, actor: AbstractBaseUser | None, **changes: Any) -> Tenant:
    """Change a tenant's quota: site admins only (``actor=None`` is the system).

    Its guarantees may not fall below what its queues guarantee, nor the tenants' together
    exceed the cluster. Each field that really changes gets a TenantChange row.
    """
    _refuse_unknown(changes)
    if connection.vendor != "sqlite" and any(f.startswith("guarantee_") for f in changes):
        # The cluster check locks every tenant row: take them all now, in one order, so two
        # concurrent edits of two tenants cannot each hold one and wait for the other.
        list(Tenant.objects.select_for_update().order_by("pk").values_list("pk"))
    tenant = tenant_locked(tenant.pk)
    if actor is not None and not can_edit_tenant(actor, tenant):
        raise PermissionDenied(TENANT_EDIT_FORBIDDEN)
    before = {field: getattr(tenant, field) for field in TENANT_FIELDS}
    _tenant_changes_apply(tenant=tenant, changes=changes, lock=True)
    changed = [field for field in TENANT_FIELDS if getattr(tenant, field) != before[field]]
    if not changed:
        return tenant
    tenant.save(update_fields=[*changed, "updated_at"])
    changes_record(
        model=TenantChange, owner="tenant", row=tenant, before=before, fields=changed, actor=actor
    )
    return tenant


def tenant_update_check(*, tenant: Tenant, **changes: Any) -> None:
    """Raise what tenant_update would for ``changes``, saving and locking nothing: the edit
    page's preview shows the refusal under its field while the user types, not at Save."""
    _refuse_unknown(changes)
    _tenant_changes_apply(tenant=copy.copy(tenant), changes=changes, lock=False)


def _tenant_changes_apply(*, tenant: Tenant, changes: dict[str, Any], lock: bool) -> None:
    """Set ``changes`` on ``tenant`` (unsaved) and check them: each field's range, then its
    queues' guarantees and the cluster's size."""
    previous = {resource: getattr(tenant, f"guarantee_{resource}") for resource in RESOURCES}
    for field, value in changes.items():
        setattr(tenant, field, value)
    tenant.full_clean()
    _check_queues_fit_tenant(tenant=tenant, previous=previous)
    check_tenant_guarantees_fit_cluster(tenant=tenant, previous=previous, lock=lock)


@transaction.atomic
def tenant_policy_update(
    *, tenant: Tenant, actor: AbstractBaseUser | None, **changes: Any
) -> list[int]:
    """Change what a tenant's jobs may do on the cluster (its pod security level, the taints
    and priority classes its admins allow): site admins only (`actor=None` is the system).
    Each field that changes gets a TenantChange row; the tenant's jobs the new policy refuses
    are quarantined, saying what to change (portal.jobs.services.jobs_policy_hold). Returns
    their ids."""
    from portal.jobs.services import jobs_policy_hold

    policy_change_check(changes, POLICY_FIELDS, actor)
    tenant = tenant_locked(tenant.pk)
    fields = POLICY_FIELDS
    if not audited_save(
        model=TenantChange, owner="tenant", row=tenant, fields=fields, changes=changes, actor=actor
    ):
        return []
    return jobs_policy_hold(tenant_ids=[tenant.pk])


def tenant_locked(pk: int) -> Tenant:
    """The tenant row, locked until the transaction ends: edits of the tenant and of its
    queues' guarantees then apply one after another, and each audit row's old value is the
    previous row's new value. (SQLite ignores FOR UPDATE; writing first takes its write lock.)
    """
    if connection.vendor == "sqlite":
        Tenant.objects.filter(pk=pk).update(updated_at=F("updated_at"))
    return Tenant.objects.select_for_update().get(pk=pk)


def check_queue_guarantees_fit_tenant(
    *, tenant: Tenant, queue_name: str, proposed: dict[str, int], previous: dict[str, int]
) -> None:
    """A queue's guarantees, with ``proposed`` for one of them, may not add up past the
    tenant's. Only resources whose guarantee grows are checked: lowering is always possible."""
    grown = [r for r in RESOURCES if proposed[r] > previous.get(r, 0)]
    if not grown:
        return
    rows = _queue_guarantees(tenant, exclude=queue_name)
    errors: dict[str, str] = {}
    for resource in grown:
        field = f"guarantee_{resource}"
        parts = sorted(
            [(name, values[resource]) for name, values in rows] + [(queue_name, proposed[resource])]
        )
        total = sum(value for _, value in parts)
        limit = getattr(tenant, field)
        if total > limit:
            errors[field] = QUEUES_ABOVE_TENANT.format(
                field=field,
                tenant=tenant.name,
                total=amount(resource, total),
                parts=named_parts(resource, parts),
                limit=amount(resource, limit),
            )
    if errors:
        raise ValidationError(errors)


def _check_queues_fit_tenant(*, tenant: Tenant, previous: dict[str, int]) -> None:
    """A tenant's guarantees may not fall below the sum of its queues'."""
    shrunk = [r for r in RESOURCES if getattr(tenant, f"guarantee_{r}") < previous.get(r, 0)]
    if not shrunk:
        return
    rows = _queue_guarantees(tenant)
    errors: dict[str, str] = {}
    for resource in shrunk:
        field = f"guarantee_{resource}"
        parts = sorted((name, values[resource]) for name, values in rows)
        value = getattr(tenant, field)
        if sum(v for _, v in parts) > value:
            errors[field] = TENANT_BELOW_QUEUES.format(
                field=field,
                value=amount(resource, value),
                tenant=tenant.name,
                parts=sum_parts(resource, parts),
            )
    if errors:
        raise ValidationError(errors)


def check_tenant_guarantees_fit_cluster(
    *, tenant: Tenant, previous: dict[str, int], lock: bool = True
) -> None:
    """All tenants' guarantees together must fit the schedulable nodes (checked for the
    resources whose guarantee grows, so lowering works on a cluster that has shrunk).
    ``lock=False`` reads without locking, for a check that saves nothing."""
    from portal.cluster.selectors import node_schedulable_totals

    grown = [r for r in RESOURCES if getattr(tenant, f"guarantee_{r}") > previous.get(r, 0)]
    if not grown:
        return
    # Every tenant row locked, so two concurrent edits cannot both pass the check.
    columns = [f"guarantee_{r}" for r in RESOURCES]
    tenants = Tenant.objects.select_for_update() if lock else Tenant.objects.all()
    others = list(tenants.exclude(pk=tenant.pk).order_by("pk").values_list("name", *columns))
    capacity = node_schedulable_totals()
    errors: dict[str, str] = {}
    for index, resource in enumerate(RESOURCES):
        if resource not in grown:
            continue
        field = f"guarantee_{resource}"
        parts = sorted(
            [(row[0], row[index + 1]) for row in others] + [(tenant.name, getattr(tenant, field))]
        )
        total = sum(value for _, value in parts)
        if total > capacity.get(resource):
            errors[field] = TENANTS_ABOVE_CLUSTER.format(
                field=field,
                total=amount(resource, total),
                parts=named_parts(resource, parts),
                capacity=amount(resource, capacity.get(resource)),
            )
    if errors:
        raise ValidationError(errors)


def _queue_guarantees(tenant: Tenant, exclude: str | None = None) -> list[tuple[str, dict]]:
    from portal.queues.models import Queue

    queues = Queue.objects.filter(tenant=tenant).order_by("name")
    if exclude is not None:
        queues = queues.exclude(name=exclude)
    columns = [f"guarantee_{r}" for r in RESOURCES]
    return [
        (row[0], dict(zip(RESOURCES, row[1:], strict=True)))
        for row in queues.values_list("name", *columns)
    ]


def _refuse_unknown(changes: dict[str, Any]) -> None:
    refuse_unknown(changes, TENANT_FIELDS)


def refuse_unknown(changes: dict[str, Any], editable: tuple[str, ...]) -> None:
    """Refuse, each under its name, the fields of ``changes`` that are not ``editable``."""
    unknown = {field: FIELD_NOT_EDITABLE for field in changes if field not in editable}
    if unknown:
        raise ValidationError(unknown)


def policy_change_check(
    changes: dict[str, Any], editable: tuple[str, ...], actor: AbstractBaseUser | None
) -> None:
    """A cluster policy change (a tenant's or a queue's): only its fields, by a site admin
    (``actor=None`` is the system)."""
    refuse_unknown(changes, editable)
    if actor is not None and not is_site_admin(actor):
        raise PermissionDenied(CLUSTER_POLICY_FORBIDDEN)


@transaction.atomic
def membership_set(*, user: AbstractBaseUser, tenant: Tenant, role: str) -> Membership:
    """Make `user` a member of `tenant` with `role`, creating or updating the membership."""
    membership = Membership.objects.filter(user=user, tenant=tenant).first()
    if membership is None:
        membership = Membership(user=user, tenant=tenant, role=role)
        membership.full_clean()
        membership.save()
        return membership
    membership, _ = model_update(instance=membership, fields=["role"], data={"role": role})
    return membership


@transaction.atomic
def membership_delete(*, user: AbstractBaseUser, tenant: Tenant) -> None:
    Membership.objects.filter(user=user, tenant=tenant).delete()


@transaction.atomic
def user_create(
    *,
    username: str,
    password: str | None,
    email: str = "",
    is_staff: bool = False,
    is_superuser: bool = False,
) -> AbstractBaseUser:
    """Create a login. `password=None` creates a user that cannot log in with a password."""
    user_model = get_user_model()
    user = user_model(username=username, email=email, is_staff=is_staff, is_superuser=is_superuser)
    if password is None:
        user.set_unusable_password()
    else:
        _password_check(password, user)
        user.set_password(password)
    user.full_clean()
    user.save()
    return user


@transaction.atomic
def user_password_set(*, user: AbstractBaseUser, password: str) -> AbstractBaseUser:
    _password_check(password, user)
    user.set_password(password)
    user.save(update_fields=["password"])
    return user


def _password_check(password: str, user: AbstractBaseUser) -> None:
    """AUTH_PASSWORD_VALIDATORS, as the admin's and Django's own password forms apply them."""
    try:
        validate_password(password, user)
    except ValidationError as error:
        raise ValidationError({"password": error.messages}) from error
