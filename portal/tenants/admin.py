from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import Model
from django.forms import ModelForm
from django.http import HttpRequest

from portal.common.admin import SafeAutocompleteMixin

from .models import Membership, Tenant, TenantChange, TenantUsageSample
from .services import POLICY_FIELDS, TENANT_FIELDS, tenant_policy_update

POLICY_HELD = "{count} job(s) of {owner} quarantined: the new policy refuses them (ids {ids})."


class ClusterPolicyAdminMixin:
    """An admin page whose cluster policy fields change through their service (audited, and
    the jobs the new policy refuses quarantined), not by a plain save."""

    policy_fields: tuple[str, ...] = ()

    # Each page names the service that applies its changes (obj, actor, changes) -> held ids.
    policy_update: Callable[[Any, Any, dict], list[int]]

    def save_model(self, request: HttpRequest, obj: Model, form: ModelForm, change: bool) -> None:
        changes = {f: form.cleaned_data[f] for f in self.policy_fields if f in form.changed_data}
        if change and changes:
            stored = type(obj)._default_manager.get(pk=obj.pk)
            for field in changes:
                setattr(obj, field, getattr(stored, field))
        super().save_model(request, obj, form, change)  # type: ignore[misc]
        if change and changes:
            held = self.policy_update(obj, request.user, changes)
            if held:
                ids = ", ".join(map(str, held))
                self.message_user(  # type: ignore[attr-defined]
                    request,
                    POLICY_HELD.format(count=len(held), owner=obj, ids=ids),
                    messages.WARNING,
                )


class MembershipInline(SafeAutocompleteMixin, admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Tenant)
class TenantAdmin(ClusterPolicyAdminMixin, admin.ModelAdmin):
    """Names, members and the cluster policy here (its changes go through
    tenant_policy_update); the quota is edited in the portal (tenant_update checks it against
    the queues and the cluster and writes the audit rows, listed under Tenant changes)."""

    policy_fields = POLICY_FIELDS
    list_display = [
        "name",
        "display_name",
        "security_level",
        "weight",
        "guarantee_gpus",
        "capability_gpus",
        "max_runtime_seconds",
    ]
    search_fields = ["name", "display_name"]
    readonly_fields = list(TENANT_FIELDS)  # tenant_update writes the audit rows
    inlines = [MembershipInline]

    def policy_update(self, obj: Any, actor: Any, changes: dict) -> list[int]:
        return tenant_policy_update(tenant=obj, actor=actor, **changes)


@admin.register(Membership)
class MembershipAdmin(SafeAutocompleteMixin, admin.ModelAdmin):
    list_display = ["user", "tenant", "role", "created_at"]
    list_filter = ["role", "tenant"]
    search_fields = ["user__username", "user__email", "tenant__name"]
    autocomplete_fields = ["user", "tenant"]


@admin.register(TenantChange)
class TenantChangeAdmin(admin.ModelAdmin):
    list_display = ["tenant", "field", "old_value", "new_value", "changed_by", "changed_at"]
    list_filter = ["field", "tenant"]
    search_fields = ["tenant__name", "changed_by__username", "field"]
    date_hierarchy = "changed_at"
    readonly_fields = ["tenant", "changed_by", "changed_at", "field", "old_value", "new_value"]


@admin.register(TenantUsageSample)
class TenantUsageSampleAdmin(admin.ModelAdmin):
    """Written by the scheduling cycle; read-only here."""

    list_display = ["tenant", "at", "gpus_allocated", "gpus_deserved"]
    list_filter = ["tenant"]
    date_hierarchy = "at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
