from django.contrib import admin

from portal.common.admin import ReadOnlyAdminMixin

from .models import (
    CycleRun,
    PreemptionEvent,
    QueueUsageRollup,
    QueueUsageSample,
    SchedulerConfig,
)


@admin.register(SchedulerConfig)
class SchedulerConfigAdmin(admin.ModelAdmin):
    """Read-only: new versions go through scheduler_config_create (validation, one active)."""

    list_display = ["version", "active", "created_by", "created_at", "comment"]
    list_filter = ["active"]
    search_fields = ["comment", "text"]
    readonly_fields = ["version", "text", "active", "created_by", "created_at", "comment"]

    def has_add_permission(self, request):
        return False


@admin.register(CycleRun)
class CycleRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "started_at",
        "finished_at",
        "core_ms",
        "binds",
        "evictions",
        "pending_jobs",
        "error",
    ]
    date_hierarchy = "started_at"
    search_fields = ["error"]


@admin.register(PreemptionEvent)
class PreemptionEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "occurred_at",
        "action",
        "victim_job",
        "victim_task_name",
        "victim_queue",
        "node_name",
        "preemptor_job",
        "preemptor_queue",
        "gpus_freed",
    ]
    list_filter = ["action", "victim_tenant", "victim_queue"]
    search_fields = ["victim_job__name", "preemptor_job__name", "node_name", "sentence"]
    date_hierarchy = "occurred_at"
    raw_id_fields = ["victim_job", "preemptor_job", "cycle", "placement"]


@admin.register(QueueUsageSample)
class QueueUsageSampleAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Written by the scheduling cycle; the rollups are derived from them: read-only."""

    list_display = ["queue", "at", "gpus_allocated", "gpus_deserved", "gpus_pending"]
    list_filter = ["queue"]
    date_hierarchy = "at"


@admin.register(QueueUsageRollup)
class QueueUsageRollupAdmin(admin.ModelAdmin):
    """Derived from the samples (persist, `manage.py usage_rollup_rebuild`): read-only."""

    list_display = ["queue", "resolution", "bucket", "gpus_allocated_avg", "samples"]
    list_filter = ["resolution", "queue"]
    date_hierarchy = "bucket"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
