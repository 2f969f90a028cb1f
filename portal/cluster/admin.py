from django.contrib import admin

from portal.common.admin import ReadOnlyAdminMixin

from .models import Node, Placement, SimulatedPod


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "gpu_model",
        "gpu_count",
        "gpu_resource_name",
        "cpu_millis",
        "memory_bytes",
        "schedulable",
        "last_seen_at",
    ]
    list_filter = ["schedulable", "gpu_model", "gpu_resource_name"]
    search_fields = ["name", "gpu_model"]


@admin.register(Placement)
class PlacementAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "pod_name",
        "job",
        "task",
        "replica",
        "node_name",
        "state",
        "gpus",
        "created_at",
    ]
    list_filter = ["state", "node_name"]
    search_fields = ["pod_name", "job__name", "node_name"]
    raw_id_fields = ["job", "task", "node"]


@admin.register(SimulatedPod)
class SimulatedPodAdmin(admin.ModelAdmin):
    list_display = ["name", "namespace", "node_name", "phase", "created_at", "started_at"]
    list_filter = ["phase", "namespace", "node_name"]
    search_fields = ["name", "node_name"]
