from django.contrib import admin

from portal.common.admin import ReadOnlyAdminMixin

from .models import Job, JobTask, StartEstimate, TenantPodDelta


class JobTaskInline(admin.TabularInline):
    model = JobTask
    extra = 0


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "id",
        "tenant",
        "queue",
        "submitter",
        "status",
        "priority",
        "min_available",
        "preemption_count",
        "submitted_at",
    ]
    list_filter = ["status", "tenant", "queue"]
    search_fields = ["name", "submitter__username", "queue__name", "tenant__name"]
    date_hierarchy = "submitted_at"
    autocomplete_fields = ["tenant", "queue", "submitter"]
    inlines = [JobTaskInline]


@admin.register(JobTask)
class JobTaskAdmin(admin.ModelAdmin):
    list_display = ["job", "name", "replicas", "gpus", "cpu_millis", "memory_bytes", "image"]
    list_filter = ["job__queue"]
    search_fields = ["job__name", "name", "image"]
    autocomplete_fields = ["job"]


@admin.register(StartEstimate)
class StartEstimateAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Each waiting job's estimated start from the last plan ahead (the plan task's to write)."""

    list_display = ["job", "outlook", "earliest", "likely", "latest", "computed_at"]
    list_filter = ["outlook"]
    search_fields = ["job__name"]
    readonly_fields = ["job", "outlook", "earliest", "likely", "latest", "until", "computed_at"]


@admin.register(TenantPodDelta)
class TenantPodDeltaAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The tenants' pending-pod counts as the database keeps them (portal.jobs.pod_count)."""

    list_display = ["tenant", "replicas", "placed"]
    readonly_fields = ["tenant", "replicas", "placed"]
