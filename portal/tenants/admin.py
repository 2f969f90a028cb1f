from django.contrib import admin

from portal.common.admin import SafeAutocompleteMixin

from .models import Membership, Tenant, TenantChange, TenantUsageSample
from .services import TENANT_FIELDS


class MembershipInline(SafeAutocompleteMixin, admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    """Names and members here; the quota is edited in the portal (tenant_update checks it
    against the queues and the cluster and writes the audit rows, listed under Tenant
    changes)."""

    list_display = [
        "name",
        "display_name",
        "weight",
        "guarantee_gpus",
        "capability_gpus",
        "max_runtime_seconds",
    ]
    search_fields = ["name", "display_name"]
    readonly_fields = list(TENANT_FIELDS)  # tenant_update writes the audit rows
    inlines = [MembershipInline]


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
