"""Nodes over REST: read-only inventory and GPU occupancy, for members of any tenant and admins."""

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from jobspec.gpushare import gpus_number
from portal.api.base import ApiSerializer, ApiView, error_responses
from portal.api.pagination import ApiPagination

from .selectors import node_gpu_milli_others, node_gpus_free, node_gpus_used, node_list_with_usage


class NodeOutputSerializer(ApiSerializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    schedulable = serializers.BooleanField()
    gpu_resource_name = serializers.CharField()
    gpu_model = serializers.CharField()
    gpu_count = serializers.IntegerField()
    gpu_memory_mib = serializers.IntegerField(help_text="memory of each GPU (0: not reported)")
    gpus_used = serializers.SerializerMethodField(help_text="held by the portal's pods")
    gpus_others = serializers.SerializerMethodField(
        help_text="held by pods the portal did not start (other teams, other schedulers)"
    )
    gpus_free = serializers.SerializerMethodField(help_text="held by nobody")
    pods_active = serializers.IntegerField()
    cpu_millis = serializers.IntegerField()
    memory_bytes = serializers.IntegerField()
    labels = serializers.DictField(child=serializers.CharField())
    topology_labels = serializers.DictField(child=serializers.CharField())
    last_seen_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(OpenApiTypes.NUMBER)
    def get_gpus_used(self, node) -> int | float:
        return node_gpus_used(node)

    @extend_schema_field(OpenApiTypes.NUMBER)
    def get_gpus_others(self, node) -> int | float:
        return gpus_number(node_gpu_milli_others(node))

    @extend_schema_field(OpenApiTypes.NUMBER)
    def get_gpus_free(self, node) -> int | float:
        return node_gpus_free(node)


class NodeListApi(ApiView):
    """Every node: inventory, GPUs held by the portal's pods and by other workloads', and free
    GPUs."""

    pagination_class = ApiPagination

    class FilterSerializer(ApiSerializer):
        schedulable = serializers.BooleanField(required=False, allow_null=True, default=None)

    OutputSerializer = NodeOutputSerializer

    @extend_schema(
        operation_id="nodes_list",
        tags=["nodes"],
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), **error_responses(400, 401)},
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        nodes = node_list_with_usage(user=request.user)
        if filters.validated_data.get("schedulable") is not None:
            nodes = nodes.filter(schedulable=filters.validated_data["schedulable"])
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(nodes, request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


class NodeDetailApi(ApiView):
    """One node by id."""

    OutputSerializer = NodeOutputSerializer

    @extend_schema(
        operation_id="nodes_retrieve",
        tags=["nodes"],
        responses={200: OutputSerializer, **error_responses(401, 404)},
    )
    def get(self, request: Request, node_id: int) -> Response:
        node = get_object_or_404(node_list_with_usage(user=request.user), pk=node_id)
        return Response(self.OutputSerializer(node).data)
