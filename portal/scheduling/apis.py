"""Admin endpoints: preemption history and the scheduler configuration versions."""

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.api.base import (
    INT64_MAX,
    ApiSerializer,
    ApiView,
    StrictSerializer,
    TimeParameterField,
    error_responses,
)
from portal.api.pagination import ApiPagination
from portal.api.permissions import SITE_ADMIN_REQUIRED, allowed_by

from .access import can_change_scheduler_config, can_see_evictions, can_see_scheduler_config
from .models import PreemptionEvent, SchedulerConfig
from .selectors import preemption_event_list, scheduler_config_list
from .services import (
    scheduler_config_activate,
    scheduler_config_create,
    scheduler_config_notes,
)

RANGE_INVERTED = "until must be after since"
MAX_CONF_CHARS = 100_000

SeesEvictions = allowed_by(can_see_evictions, SITE_ADMIN_REQUIRED)
SeesSchedulerConfig = allowed_by(can_see_scheduler_config, SITE_ADMIN_REQUIRED)
ChangesSchedulerConfig = allowed_by(can_change_scheduler_config, SITE_ADMIN_REQUIRED)

CONF_EXAMPLE = 'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: proportion\n'


class PreemptionListApi(ApiView):
    """Every eviction (site admins): who lost which GPUs to whom, and why; newest first."""

    permission_classes = [SeesEvictions]
    pagination_class = ApiPagination

    class FilterSerializer(ApiSerializer):
        action = serializers.ChoiceField(choices=PreemptionEvent.Action.choices, required=False)
        queue = serializers.IntegerField(
            required=False, min_value=1, max_value=INT64_MAX, help_text="Victim queue id"
        )
        tenant = serializers.IntegerField(
            required=False, min_value=1, max_value=INT64_MAX, help_text="Victim tenant id"
        )
        since = TimeParameterField(required=False)
        until = TimeParameterField(required=False)

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if attrs.get("since") and attrs.get("until") and attrs["since"] >= attrs["until"]:
                raise serializers.ValidationError({"until": [RANGE_INVERTED]})
            return attrs

    class OutputSerializer(ApiSerializer):
        id = serializers.IntegerField()
        action = serializers.ChoiceField(choices=PreemptionEvent.Action.choices)
        occurred_at = serializers.DateTimeField()
        victim_job_id = serializers.IntegerField()
        victim_job = serializers.CharField(source="victim_job.name")
        victim_task = serializers.CharField(source="victim_task_name")
        victim_queue = serializers.CharField(source="victim_queue.name")
        victim_tenant = serializers.CharField(source="victim_tenant.name")
        node = serializers.CharField(source="node_name")
        preemptor_job_id = serializers.IntegerField(allow_null=True)
        preemptor_job = serializers.CharField(source="preemptor_job.name", allow_null=True)
        preemptor_queue = serializers.CharField(source="preemptor_queue.name", allow_null=True)
        gpus_freed = serializers.SerializerMethodField(
            help_text="GPUs the victim held (0.25: a share of a card)"
        )
        gpu_devices = serializers.ListField(
            child=serializers.IntegerField(), help_text="the card indices it held on the node"
        )
        cycle_id = serializers.IntegerField(allow_null=True)
        sentence = serializers.CharField()
        notice = serializers.CharField(
            source="notice_text",
            help_text="the victim's preemption notice and how its pod ended (empty: none)",
        )

        @extend_schema_field(OpenApiTypes.NUMBER)
        def get_gpus_freed(self, event: PreemptionEvent) -> int | float:
            return event.gpus_freed_number

    @extend_schema(
        operation_id="preemptions_list",
        tags=["admin"],
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), **error_responses(400, 401, 403)},
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        data = filters.validated_data
        events = preemption_event_list(
            action=data.get("action"),
            queue_id=data.get("queue"),
            tenant_id=data.get("tenant"),
            since=data.get("since"),
            until=data.get("until"),
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(events, request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


class SchedulerConfigOutputSerializer(ApiSerializer):
    id = serializers.IntegerField()
    version = serializers.IntegerField()
    active = serializers.BooleanField()
    comment = serializers.CharField()
    text = serializers.CharField()
    created_by = serializers.CharField(source="created_by.username", allow_null=True)
    created_at = serializers.DateTimeField()


class SchedulerConfigCreatedSerializer(SchedulerConfigOutputSerializer):
    notes = serializers.ListField(
        child=serializers.CharField(),
        help_text="How the scheduler runs this conf other than as written (e.g. the "
        "predicates plugin it adds when the conf has none).",
    )


class SchedulerConfigListApi(ApiView):
    """Every version of the Volcano-format scheduler conf, newest first (site admins)."""

    permission_classes = [SeesSchedulerConfig]
    pagination_class = ApiPagination
    OutputSerializer = SchedulerConfigOutputSerializer

    @extend_schema(
        operation_id="scheduler_configs_list",
        tags=["admin"],
        responses={200: OutputSerializer(many=True), **error_responses(401, 403)},
    )
    def get(self, request: Request) -> Response:
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(scheduler_config_list(), request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


class SchedulerConfigCreateApi(ApiView):
    """Store a new version (validated by the scheduler core's parser; errors name the
    offending path inside `text`), active at once unless `activate` is false."""

    permission_classes = [ChangesSchedulerConfig]

    class InputSerializer(StrictSerializer):
        text = serializers.CharField(max_length=MAX_CONF_CHARS, trim_whitespace=False)
        comment = serializers.CharField(max_length=500, required=False, allow_blank=True)
        activate = serializers.BooleanField(required=False, default=True)

    OutputSerializer = SchedulerConfigCreatedSerializer

    @extend_schema(
        operation_id="scheduler_configs_create",
        tags=["admin"],
        request=InputSerializer,
        responses={201: OutputSerializer, **error_responses(400, 401, 403, 413, 415)},
        examples=[
            OpenApiExample(
                "Gang + proportion",
                request_only=True,
                value={"text": CONF_EXAMPLE, "comment": "add proportion", "activate": True},
            ),
            OpenApiExample(
                "Unknown plugin",
                response_only=True,
                status_codes=["400"],
                value={
                    "detail": "Invalid input.",
                    "code": "invalid",
                    "errors": {"text": ["tiers[1].plugins[0].name: unknown plugin 'nope'"]},
                },
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        config = scheduler_config_create(actor=request.user, **serializer.validated_data)
        config.notes = scheduler_config_notes(text=config.text)
        return Response(self.OutputSerializer(config).data, status=status.HTTP_201_CREATED)


class SchedulerConfigDetailApi(ApiView):
    """One version of the scheduler conf (site admins)."""

    permission_classes = [SeesSchedulerConfig]
    OutputSerializer = SchedulerConfigOutputSerializer

    @extend_schema(
        operation_id="scheduler_configs_retrieve",
        tags=["admin"],
        responses={200: OutputSerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request: Request, config_id: int) -> Response:
        config = get_object_or_404(SchedulerConfig, pk=config_id)
        return Response(self.OutputSerializer(config).data)


class SchedulerConfigActivateApi(ApiView):
    """Make a stored version the only active one (site admins)."""

    permission_classes = [ChangesSchedulerConfig]
    OutputSerializer = SchedulerConfigOutputSerializer

    @extend_schema(
        operation_id="scheduler_configs_activate",
        tags=["admin"],
        request=None,
        responses={200: OutputSerializer, **error_responses(401, 403, 404)},
    )
    def post(self, request: Request, config_id: int) -> Response:
        config = get_object_or_404(SchedulerConfig, pk=config_id)
        config = scheduler_config_activate(config=config, actor=request.user)
        return Response(self.OutputSerializer(config).data)
