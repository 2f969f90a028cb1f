"""Tenants over REST: the ones you belong to (all for site admins)."""

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from portal.api.base import ApiSerializer, ApiView, error_responses
from portal.api.pagination import ApiPagination
from portal.common.access import visible_queues

from .models import Membership, Tenant
from .selectors import tenant_list


class TenantListApi(ApiView):
    """Tenants you belong to (all for site admins), with your role and their queues."""

    pagination_class = ApiPagination

    class OutputSerializer(ApiSerializer):
        id = serializers.IntegerField()
        name = serializers.CharField()
        display_name = serializers.CharField()
        role = serializers.SerializerMethodField()
        queues = serializers.SerializerMethodField()

        @extend_schema_field(
            serializers.ChoiceField(choices=Membership.Role.choices, allow_null=True)
        )
        def get_role(self, tenant: Tenant) -> str | None:
            memberships = [m for m in tenant.memberships.all() if m.user_id == self._user_id]
            return memberships[0].role if memberships else None

        @extend_schema_field(serializers.ListField(child=serializers.CharField()))
        def get_queues(self, tenant: Tenant) -> list[str]:
            return [queue.name for queue in tenant.queues.all()]

        @property
        def _user_id(self) -> int | None:
            return self.context["request"].user.pk

    @extend_schema(
        operation_id="tenants_list",
        tags=["tenants"],
        responses={200: OutputSerializer(many=True), **error_responses(401)},
    )
    def get(self, request: Request) -> Response:
        tenants = tenant_list(user=request.user).prefetch_related(
            "memberships",
            Prefetch("queues", queryset=visible_queues(request.user).order_by("name")),
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(tenants, request, view=self)
        serializer = self.OutputSerializer(page, many=True, context={"request": request})
        return paginator.get_paginated_response(serializer.data)
