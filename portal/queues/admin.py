from typing import Any

from django.contrib import admin

from portal.common.admin import ReadOnlyAdminMixin, SafeAutocompleteMixin
from portal.tenants.admin import ClusterPolicyAdminMixin

from .models import Queue, QueueChange, QueueOrder
from .services import QUEUE_POLICY_FIELDS, queue_policy_update


class QueueChangeInline(admin.TabularInline):
    model = QueueChange
    extra = 0
    can_delete = False
    readonly_fields = ["changed_at", "changed_by", "field", "old_value", "new_value"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Queue)
class QueueAdmin(ClusterPolicyAdminMixin, SafeAutocompleteMixin, admin.ModelAdmin):
    """Read-mostly: edits belong in the portal (queue_update writes the audit rows); the
    taints and priority classes a queue's jobs may use beyond its tenant's are a site admin's
    to set here (queue_policy_update)."""

    policy_fields = QUEUE_POLICY_FIELDS

    list_display = [
        "name",
        "tenant",
        "state",
        "weight",
        "guarantee_gpus",
        "capability_gpus",
        "borrowing_limit_gpus",
        "reclaimable",
        "priority",
        "max_runtime_seconds",
        "min_runtime_seconds",
        "preemption_notice_seconds",
    ]
    list_filter = ["state", "reclaimable", "tenant"]
    search_fields = ["name", "tenant__name"]
    autocomplete_fields = ["tenant"]
    inlines = [QueueChangeInline]

    def policy_update(self, obj: Any, actor: Any, changes: dict) -> list[int]:
        return queue_policy_update(queue=obj, actor=actor, **changes)


@admin.register(QueueChange)
class QueueChangeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["queue", "field", "old_value", "new_value", "changed_by", "changed_at"]
    list_filter = ["field", "queue__tenant"]
    search_fields = ["queue__name", "changed_by__username", "field"]
    date_hierarchy = "changed_at"
    readonly_fields = ["queue", "changed_by", "changed_at", "field", "old_value", "new_value"]


@admin.register(QueueOrder)
class QueueOrderAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The lines the last cycle put the queues' waiting jobs in (the cycle's to write)."""

    list_display = ["queue", "waiting", "recorded_at"]
    search_fields = ["queue__name"]
    fields = ("queue", "waiting", "first_ids", "recorded_at")
    readonly_fields = ("queue", "waiting", "first_ids", "recorded_at")

    @admin.display(description="jobs waiting")
    def waiting(self, obj: QueueOrder) -> int:
        return len(obj.job_ids) // 8

    @admin.display(description="first job ids, in line")
    def first_ids(self, obj: QueueOrder) -> str:
        return ", ".join(map(str, QueueOrder.unpack(obj.job_ids)[:50]))
