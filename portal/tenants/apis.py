"""Tenants over REST: the ones you belong to (all for site admins), with their quota, use and
share; site admins change a tenant's quota (audited)."""

from typing import Any

from django.db.models import Prefetch
from django.urls import reverse
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from portal.api.base import (
    INT32_MAX,
    INT64_MAX,
    ApiSerializer,
    ApiView,
    StrictSerializer,
    error_responses,
)
from portal.api.pagination import ApiPagination
from portal.cluster.namespaces import job_namespace
from portal.queues.access import visible_queues
from portal.queues.selectors import tenant_defaults
from portal.queues.services import queue_default_set

from .access import can_edit_tenant
from .models import Membership, Tenant
from .quota import WEIGHT_MAX, WEIGHT_MIN
from .selectors import tenant_get, tenant_list, tenant_quota_summaries
from .services import tenant_update


class QuotaInputSerializer(StrictSerializer):
    """The quota fields tenants and queues share, with the same names (shape only; the rules
    live in the services)."""

    weight = serializers.IntegerField(min_value=WEIGHT_MIN, max_value=WEIGHT_MAX)
    guarantee_gpus = serializers.IntegerField(min_value=0, max_value=INT32_MAX)
    guarantee_cpu_millis = serializers.IntegerField(min_value=0, max_value=INT64_MAX)
    guarantee_memory_bytes = serializers.IntegerField(min_value=0, max_value=INT64_MAX)
    capability_gpus = serializers.IntegerField(min_value=0, max_value=INT32_MAX, allow_null=True)
    capability_cpu_millis = serializers.IntegerField(
        min_value=0, max_value=INT64_MAX, allow_null=True
    )
    capability_memory_bytes = serializers.IntegerField(
        min_value=0, max_value=INT64_MAX, allow_null=True
    )
    borrowing_limit_gpus = serializers.IntegerField(
        min_value=0, max_value=INT32_MAX, allow_null=True
    )
    borrowing_limit_cpu_millis = serializers.IntegerField(
        min_value=0, max_value=INT64_MAX, allow_null=True
    )
    borrowing_limit_memory_bytes = serializers.IntegerField(
        min_value=0, max_value=INT64_MAX, allow_null=True
    )
    reclaimable = serializers.BooleanField()


class QuotaOutputFields(ApiSerializer):
    weight = serializers.IntegerField()
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


def _tenant_links(tenant: Tenant) -> dict[str, str]:
    return {
        "self": reverse("api:tenant_detail", kwargs={"tenant_id": tenant.pk}),
        "changes": reverse("api:tenant_changes", kwargs={"tenant_id": tenant.pk}),
    }


class TenantOutputSerializer(QuotaOutputFields):
    """A tenant's quota (the queues' field names), your role in it, its visible queues, what
    its queues guarantee of it, GPUs allocated now and deserved as of the latest cycle's
    sample (null before the first)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    display_name = serializers.CharField()
    max_runtime_seconds = serializers.IntegerField(allow_null=True)
    namespace = serializers.SerializerMethodField()
    security_level = serializers.ChoiceField(
        choices=Tenant.SecurityLevel.choices,
        help_text="The Pod Security Standards level its jobs' pods are held to (site admins "
        "set it): the portal refuses at submit what it forbids, naming the field.",
    )
    role = serializers.SerializerMethodField()
    queues = serializers.SerializerMethodField()
    queues_guarantee_gpus = serializers.SerializerMethodField()
    gpus_allocated = serializers.SerializerMethodField()
    gpus_deserved = serializers.SerializerMethodField()
    can_edit = serializers.SerializerMethodField()
    links = serializers.SerializerMethodField()

    def _summary(self, tenant: Tenant) -> Any:
        return self.context["summaries"][tenant.pk]

    def get_namespace(self, tenant: Tenant) -> str:
        """The Kubernetes namespace its new jobs' pods go to (a cluster admin creates it)."""
        return job_namespace(tenant.name)

    @extend_schema_field(serializers.ChoiceField(choices=Membership.Role.choices, allow_null=True))
    def get_role(self, tenant: Tenant) -> str | None:
        user_id = self.context["request"].user.pk
        memberships = [m for m in tenant.memberships.all() if m.user_id == user_id]
        return memberships[0].role if memberships else None

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_queues(self, tenant: Tenant) -> list[str]:
        return [queue.name for queue in tenant.queues.all()]

    def get_queues_guarantee_gpus(self, tenant: Tenant) -> int:
        return self._summary(tenant).queues_guarantee_gpus

    @extend_schema_field(serializers.FloatField())
    def get_gpus_allocated(self, tenant: Tenant) -> int | float:
        return self._summary(tenant).gpus_allocated

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_gpus_deserved(self, tenant: Tenant) -> float | None:
        return self._summary(tenant).gpus_deserved

    def get_can_edit(self, tenant: Tenant) -> bool:
        return can_edit_tenant(self.context["request"].user, tenant)

    @extend_schema_field(serializers.DictField(child=serializers.CharField()))
    def get_links(self, tenant: Tenant) -> dict[str, str]:
        return _tenant_links(tenant)


TENANT_EXAMPLE = {
    "id": 1,
    "name": "nlp",
    "display_name": "Natural language processing",
    "max_runtime_seconds": 604800,
    "namespace": "gpu-jobs",
    "security_level": "baseline",
    "weight": 2,
    "reclaimable": True,
    "guarantee_gpus": 12,
    "guarantee_cpu_millis": 0,
    "guarantee_memory_bytes": 0,
    "capability_gpus": 24,
    "capability_cpu_millis": None,
    "capability_memory_bytes": None,
    "borrowing_limit_gpus": None,
    "borrowing_limit_cpu_millis": None,
    "borrowing_limit_memory_bytes": None,
    "role": "lead",
    "queues": ["nlp-interactive", "nlp-train"],
    "queues_guarantee_gpus": 12,
    "gpus_allocated": 5,
    "gpus_deserved": 16.0,
    "can_edit": False,
    "links": {"self": "/api/v1/tenants/1/", "changes": "/api/v1/tenants/1/changes/"},
}


def _tenants(request: Request):
    return tenant_list(user=request.user).prefetch_related(
        "memberships",
        Prefetch("queues", queryset=visible_queues(request.user).order_by("name")),
    )


def _context(request: Request, tenants: list[Tenant]) -> dict[str, Any]:
    summaries = tenant_quota_summaries(tenants=tenants)
    return {"request": request, "summaries": {s.tenant.pk: s for s in summaries}}


class TenantListApi(ApiView):
    """Tenants you belong to (all for site admins), with your role, their quota and use."""

    pagination_class = ApiPagination
    OutputSerializer = TenantOutputSerializer

    @extend_schema(
        operation_id="tenants_list",
        tags=["tenants"],
        responses={200: OutputSerializer(many=True), **error_responses(401)},
    )
    def get(self, request: Request) -> Response:
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(_tenants(request), request, view=self)
        serializer = self.OutputSerializer(page, many=True, context=_context(request, page or []))
        return paginator.get_paginated_response(serializer.data)


class TenantDetailApi(ApiView):
    """One tenant (404 if you are not a member)."""

    OutputSerializer = TenantOutputSerializer

    @extend_schema(
        operation_id="tenants_retrieve",
        tags=["tenants"],
        responses={200: OutputSerializer, **error_responses(401, 404)},
        examples=[OpenApiExample("A tenant", response_only=True, value=TENANT_EXAMPLE)],
    )
    def get(self, request: Request, tenant_id: int) -> Response:
        tenant = tenant_get(user=request.user, tenant_id=tenant_id)
        tenant = _tenants(request).get(pk=tenant.pk)
        return Response(self.OutputSerializer(tenant, context=_context(request, [tenant])).data)


class TenantUpdateApi(ApiView):
    """Change a tenant's quota or maximum run time (site admins; members get 403): the same
    field names as a queue's. Its guarantees may not fall below what its queues guarantee, nor all tenants'
    exceed the cluster. Every change is audited (`links.changes`)."""

    class InputSerializer(QuotaInputSerializer):
        # Shape only; the bounds are the service's, naming the field.
        max_runtime_seconds = serializers.IntegerField(allow_null=True)

    OutputSerializer = TenantOutputSerializer

    @extend_schema(
        operation_id="tenants_partial_update",
        tags=["tenants"],
        request=InputSerializer(partial=True),
        responses={200: OutputSerializer, **error_responses(400, 401, 403, 404, 413, 415)},
        examples=[
            OpenApiExample(
                "Guarantee 12 GPUs, cap at 24",
                request_only=True,
                value={"guarantee_gpus": 12, "capability_gpus": 24},
            ),
            OpenApiExample(
                "Below what the queues guarantee",
                response_only=True,
                status_codes=["400"],
                value={
                    "detail": "Invalid input.",
                    "code": "invalid",
                    "errors": {
                        "guarantee_gpus": [
                            "guarantee_gpus: 8 is below the sum of nlp's queue guarantees, "
                            "12 (nlp-interactive 4 + nlp-train 8)"
                        ]
                    },
                },
            ),
        ],
    )
    def patch(self, request: Request, tenant_id: int) -> Response:
        tenant = tenant_get(user=request.user, tenant_id=tenant_id)
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        tenant = tenant_update(tenant=tenant, actor=request.user, **serializer.validated_data)
        tenant = _tenants(request).get(pk=tenant.pk)
        return Response(self.OutputSerializer(tenant, context=_context(request, [tenant])).data)


class QuotaChangeSerializer(ApiSerializer):
    """One audited change of a tenant's or queue's quota field."""

    id = serializers.IntegerField()
    field = serializers.CharField()
    old_value = serializers.CharField()
    new_value = serializers.CharField()
    changed_by = serializers.CharField(source="changed_by.username", allow_null=True)
    changed_at = serializers.DateTimeField()


class TenantChangeListApi(ApiView):
    """The audit trail of a tenant's quota: one row per changed field, newest first."""

    pagination_class = ApiPagination
    OutputSerializer = QuotaChangeSerializer

    @extend_schema(
        operation_id="tenants_changes_list",
        tags=["tenants"],
        responses={200: OutputSerializer(many=True), **error_responses(401, 404)},
    )
    def get(self, request: Request, tenant_id: int) -> Response:
        tenant = tenant_get(user=request.user, tenant_id=tenant_id)
        changes = tenant.changes.select_related("changed_by").order_by("-changed_at", "-id")
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(changes, request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


class DefaultQueuesOutputSerializer(ApiSerializer):
    default_queue = serializers.CharField(
        allow_null=True, help_text="Where a member's manifest without spec.queue goes."
    )
    members = serializers.DictField(
        child=serializers.CharField(allow_null=True),
        help_text="Username -> that member's own default queue (before the tenant's); a lead "
        "sees every member, a member their own.",
    )


class TenantDefaultQueueApi(ApiView):
    """The queue a Volcano manifest without `spec.queue` goes to: a member's own default, else
    the tenant's, else a queue of theirs named `default` (as Volcano's webhook would). GET: any
    member; PUT: a lead of the tenant or a site admin, `{"queue": name or id or null}` for the
    tenant's, with `"user": username` for that member's."""

    class InputSerializer(StrictSerializer):
        queue = serializers.CharField(allow_null=True, max_length=63)
        user = serializers.CharField(required=False, max_length=150)

    OutputSerializer = DefaultQueuesOutputSerializer

    @extend_schema(
        operation_id="tenants_default_queue_retrieve",
        tags=["tenants"],
        responses={200: OutputSerializer, **error_responses(401, 404)},
    )
    def get(self, request: Request, tenant_id: int) -> Response:
        return self._answer(request, tenant_id)

    @extend_schema(
        operation_id="tenants_default_queue_update",
        tags=["tenants"],
        request=InputSerializer,
        responses={200: OutputSerializer, **error_responses(400, 401, 403, 404, 413, 415)},
        examples=[
            OpenApiExample("The tenant's", request_only=True, value={"queue": "nlp-train"}),
            OpenApiExample(
                "A member's", request_only=True, value={"queue": "nlp-dev", "user": "alice"}
            ),
        ],
    )
    def put(self, request: Request, tenant_id: int) -> Response:
        tenant = tenant_get(user=request.user, tenant_id=tenant_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        queue_default_set(
            tenant=tenant, queue=data["queue"], actor=request.user, username=data.get("user")
        )
        return self._answer(request, tenant_id)

    def _answer(self, request: Request, tenant_id: int) -> Response:
        defaults = tenant_defaults(user=request.user, tenant_id=tenant_id)
        return Response(
            self.OutputSerializer(
                {"default_queue": defaults.tenant, "members": defaults.members}
            ).data
        )
