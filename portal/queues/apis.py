"""Queues over REST: list, retrieve, change (lead of the tenant or admin), audit, usage."""

from datetime import timedelta
from typing import Any

from django.urls import reverse
from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from jobspec.gpushare import MILLI_PER_GPU, gpus_number
from portal.api.base import (
    INT32_MAX,
    INT64_MAX,
    ApiSerializer,
    ApiView,
    TimeParameterField,
    error_responses,
)
from portal.api.pagination import ApiPagination
from portal.cluster.selectors import gpus_allocated_per_queue
from portal.scheduling.selectors import queue_usage_latest, queue_usage_series
from portal.tenants.apis import QuotaChangeSerializer, QuotaInputSerializer

from .access import can_edit_queue
from .models import Queue
from .selectors import queue_get, queue_list
from .services import queue_update

USAGE_RANGE_INVERTED = "until must be after since"
USAGE_RANGE_TOO_LONG = "at {resolution} resolution the range may span at most {days} days"
# The longest range per resolution keeps a series at most ~10k points.
USAGE_MAX_DAYS = {"minute": 7, "hour": 400, "day": 3660}
USAGE_DEFAULT_SPAN = timedelta(hours=24)


def _queue_links(queue: Queue) -> dict[str, str]:
    return {
        "self": reverse("api:queue_detail", kwargs={"queue_id": queue.pk}),
        "changes": reverse("api:queue_changes", kwargs={"queue_id": queue.pk}),
        "usage": reverse("api:queue_usage", kwargs={"queue_id": queue.pk}),
    }


class QueueOutputSerializer(ApiSerializer):
    """A queue's shares: weight, guarantee, capability, borrowing limit, and the latest
    usage sample's allocated/deserved/pending GPUs (null before the first cycle)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    tenant = serializers.CharField(source="tenant.name")
    tenant_id = serializers.IntegerField()
    state = serializers.ChoiceField(choices=Queue.State.choices)
    weight = serializers.IntegerField()
    priority = serializers.IntegerField()
    reclaimable = serializers.BooleanField()
    guarantee_gpus = serializers.IntegerField()
    guarantee_cpu_millis = serializers.IntegerField()
    guarantee_memory_bytes = serializers.IntegerField()
    capability_gpus = serializers.IntegerField(allow_null=True)
    capability_cpu_millis = serializers.IntegerField(allow_null=True)
    capability_memory_bytes = serializers.IntegerField(allow_null=True)
    borrowing_limit_gpus = serializers.IntegerField(allow_null=True)
    borrowing_limit_cpu_millis = serializers.IntegerField(allow_null=True)
    borrowing_limit_memory_bytes = serializers.IntegerField(allow_null=True)
    max_runtime_seconds = serializers.IntegerField(allow_null=True)
    min_runtime_seconds = serializers.IntegerField()
    preemption_notice_seconds = serializers.IntegerField(
        help_text="how long before its pods are deleted a victim is told (0: not told)"
    )
    gpus_allocated = serializers.SerializerMethodField()
    gpus_deserved = serializers.SerializerMethodField()
    gpus_pending = serializers.SerializerMethodField()
    usage_at = serializers.SerializerMethodField()
    can_edit = serializers.SerializerMethodField()
    links = serializers.SerializerMethodField()

    def _sample(self, queue: Queue) -> Any:
        return self.context.get("usage", {}).get(queue.pk)

    @extend_schema_field(serializers.FloatField())
    def get_gpus_allocated(self, queue: Queue) -> int | float:
        # Live, like the dashboard and the jobs' pending reasons: a usage sample is written once
        # a minute, and showing its figure contradicted jobs placed since.
        return self.context.get("allocated", {}).get(queue.pk, 0)

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_gpus_deserved(self, queue: Queue) -> float | None:
        sample = self._sample(queue)
        return None if sample is None else sample.gpus_deserved

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_gpus_pending(self, queue: Queue) -> int | float | None:
        sample = self._sample(queue)
        return None if sample is None else gpus_number(sample.gpus_pending * MILLI_PER_GPU)

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_usage_at(self, queue: Queue) -> Any:
        sample = self._sample(queue)
        return None if sample is None else serializers.DateTimeField().to_representation(sample.at)

    def get_can_edit(self, queue: Queue) -> bool:
        return can_edit_queue(self.context["request"].user, queue)

    @extend_schema_field(serializers.DictField(child=serializers.CharField()))
    def get_links(self, queue: Queue) -> dict[str, str]:
        return _queue_links(queue)


QUEUE_EXAMPLE = {
    "id": 1,
    "name": "nlp-train",
    "tenant": "nlp",
    "tenant_id": 1,
    "state": "open",
    "weight": 4,
    "priority": 0,
    "reclaimable": True,
    "guarantee_gpus": 8,
    "guarantee_cpu_millis": 0,
    "guarantee_memory_bytes": 0,
    "capability_gpus": 24,
    "capability_cpu_millis": None,
    "capability_memory_bytes": None,
    "borrowing_limit_gpus": 8,
    "borrowing_limit_cpu_millis": None,
    "borrowing_limit_memory_bytes": None,
    "max_runtime_seconds": 86400,
    "min_runtime_seconds": 600,
    "preemption_notice_seconds": 300,
    "gpus_allocated": 16,
    "gpus_deserved": 14.5,
    "gpus_pending": 8,
    "usage_at": "2025-01-01T12:00:00Z",
    "can_edit": True,
    "links": {
        "self": "/api/v1/queues/1/",
        "changes": "/api/v1/queues/1/changes/",
        "usage": "/api/v1/queues/1/usage/",
    },
}


def _queue_context(request: Request, queues: list[Queue]) -> dict[str, Any]:
    ids = [q.pk for q in queues]
    return {
        "request": request,
        "usage": queue_usage_latest(queue_ids=ids),
        "allocated": gpus_allocated_per_queue(queue_ids=ids),
    }


class QueueListApi(ApiView):
    """Queues you may see (your tenants'; all for site admins) with their latest shares."""

    pagination_class = ApiPagination

    class FilterSerializer(ApiSerializer):
        tenant = serializers.IntegerField(required=False, min_value=1, max_value=INT64_MAX)

    OutputSerializer = QueueOutputSerializer

    @extend_schema(
        operation_id="queues_list",
        tags=["queues"],
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), **error_responses(400, 401)},
        examples=[
            OpenApiExample(
                "One queue",
                response_only=True,
                value={"count": 1, "next": None, "previous": None, "results": [QUEUE_EXAMPLE]},
            )
        ],
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        queues = queue_list(user=request.user, tenant_id=filters.validated_data.get("tenant"))
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(queues, request, view=self)
        context = _queue_context(request, page)
        return paginator.get_paginated_response(
            self.OutputSerializer(page, many=True, context=context).data
        )


class QueueDetailApi(ApiView):
    """One queue (404 if it belongs to a tenant you are not in)."""

    OutputSerializer = QueueOutputSerializer

    @extend_schema(
        operation_id="queues_retrieve",
        tags=["queues"],
        responses={200: OutputSerializer, **error_responses(401, 404)},
        examples=[OpenApiExample("A queue", response_only=True, value=QUEUE_EXAMPLE)],
    )
    def get(self, request: Request, queue_id: int) -> Response:
        queue = queue_get(user=request.user, queue_id=queue_id)
        context = _queue_context(request, [queue])
        return Response(self.OutputSerializer(queue, context=context).data)


class QueueUpdateApi(ApiView):
    """Change a queue's weight, guarantees, capability, borrowing limits, priority, state,
    reclaimable flag, run-time limit (within its tenant's maximum), minimum run time or
    preemption notice: a lead of its tenant or a site admin. Every change is audited
    (`links.changes`). The queues of a tenant may not guarantee more than the tenant."""

    class InputSerializer(QuotaInputSerializer):
        priority = serializers.IntegerField(min_value=-(2**31), max_value=INT32_MAX)
        state = serializers.ChoiceField(choices=Queue.State.choices)
        # Shape only; the bounds and the tenant's maximum are the service's, naming the field.
        max_runtime_seconds = serializers.IntegerField(allow_null=True)
        min_runtime_seconds = serializers.IntegerField()
        preemption_notice_seconds = serializers.IntegerField()

    OutputSerializer = QueueOutputSerializer

    @extend_schema(
        operation_id="queues_partial_update",
        tags=["queues"],
        request=InputSerializer(partial=True),
        responses={200: OutputSerializer, **error_responses(400, 401, 403, 404, 413, 415)},
        examples=[
            OpenApiExample(
                "Raise the weight, cap at 24 GPUs",
                request_only=True,
                value={"weight": 6, "capability_gpus": 24},
            ),
            OpenApiExample(
                "Guarantees beyond the tenant's",
                response_only=True,
                status_codes=["400"],
                value={
                    "detail": "Invalid input.",
                    "code": "invalid",
                    "errors": {
                        "guarantee_gpus": [
                            "guarantee_gpus: nlp's queues would guarantee 16 GPUs "
                            "(nlp-interactive 4 + nlp-train 12) but tenant nlp guarantees 12"
                        ]
                    },
                },
            ),
        ],
    )
    def patch(self, request: Request, queue_id: int) -> Response:
        queue = queue_get(user=request.user, queue_id=queue_id)
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        queue = queue_update(queue=queue, actor=request.user, **serializer.validated_data)
        queue = queue_get(user=request.user, queue_id=queue.pk)
        context = _queue_context(request, [queue])
        return Response(self.OutputSerializer(queue, context=context).data)


class QueueChangeListApi(ApiView):
    """The audit trail of a queue: one row per changed field, newest first."""

    pagination_class = ApiPagination
    OutputSerializer = QuotaChangeSerializer

    @extend_schema(
        operation_id="queues_changes_list",
        tags=["queues"],
        responses={200: OutputSerializer(many=True), **error_responses(401, 404)},
    )
    def get(self, request: Request, queue_id: int) -> Response:
        queue = queue_get(user=request.user, queue_id=queue_id)
        changes = queue.changes.select_related("changed_by").order_by("-changed_at", "-id")
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(changes, request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


class QueueUsageApi(ApiView):
    """A queue's GPU use over time, one point per minute/hour/day bucket, aggregated in the
    database from the usage samples. Default range: the last 24 hours."""

    class FilterSerializer(ApiSerializer):
        since = TimeParameterField(required=False)
        until = TimeParameterField(required=False)
        resolution = serializers.ChoiceField(
            choices=["minute", "hour", "day"], required=False, default="hour"
        )

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            until = attrs.get("until") or timezone.now()
            since = attrs.get("since") or until - USAGE_DEFAULT_SPAN
            if since >= until:
                raise serializers.ValidationError({"until": [USAGE_RANGE_INVERTED]})
            days = USAGE_MAX_DAYS[attrs["resolution"]]
            if until - since > timedelta(days=days):
                raise serializers.ValidationError(
                    {
                        "since": [
                            USAGE_RANGE_TOO_LONG.format(resolution=attrs["resolution"], days=days)
                        ]
                    }
                )
            return {**attrs, "since": since, "until": until}

    class OutputSerializer(ApiSerializer):
        class PointSerializer(ApiSerializer):
            at = serializers.DateTimeField(source="bucket")
            gpus_allocated_avg = serializers.FloatField()
            gpus_allocated_max = serializers.FloatField()
            gpus_deserved_avg = serializers.FloatField()
            gpus_pending_avg = serializers.FloatField()
            cpu_millis_allocated_avg = serializers.FloatField()
            memory_bytes_allocated_avg = serializers.FloatField()
            samples = serializers.IntegerField()

        queue = serializers.CharField()
        queue_id = serializers.IntegerField()
        since = serializers.DateTimeField()
        until = serializers.DateTimeField()
        resolution = serializers.CharField()
        points = PointSerializer(many=True)

    @extend_schema(
        operation_id="queues_usage",
        tags=["queues"],
        parameters=[FilterSerializer],
        responses={200: OutputSerializer, **error_responses(400, 401, 404)},
        examples=[
            OpenApiExample(
                "Two hours",
                response_only=True,
                value={
                    "queue": "nlp-train",
                    "queue_id": 1,
                    "since": "2025-01-01T10:00:00Z",
                    "until": "2025-01-01T12:00:00Z",
                    "resolution": "hour",
                    "points": [
                        {
                            "at": "2025-01-01T10:00:00Z",
                            "gpus_allocated_avg": 12.5,
                            "gpus_allocated_max": 16,
                            "gpus_deserved_avg": 14.0,
                            "gpus_pending_avg": 4.0,
                            "cpu_millis_allocated_avg": 96000.0,
                            "memory_bytes_allocated_avg": 274877906944.0,
                            "samples": 60,
                        }
                    ],
                },
            )
        ],
    )
    def get(self, request: Request, queue_id: int) -> Response:
        queue = queue_get(user=request.user, queue_id=queue_id)
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        data = filters.validated_data
        points = queue_usage_series(
            queue_id=queue.pk,
            since=data["since"],
            until=data["until"],
            resolution=data["resolution"],
        )
        body = {
            "queue": queue.name,
            "queue_id": queue.pk,
            "since": data["since"],
            "until": data["until"],
            "resolution": data["resolution"],
            "points": points,
        }
        return Response(self.OutputSerializer(body).data)
