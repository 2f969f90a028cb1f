from django.contrib import admin

from .models import Job, JobTask


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
