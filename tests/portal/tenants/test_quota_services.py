"""Tenant quotas: set by site admins, never below what the tenant's queues guarantee, all
tenants within the cluster; every change audited."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from portal.tenants import services
from portal.tenants.models import Tenant, TenantChange
from portal.tenants.services import tenant_create, tenant_update
from tests.factories import NodeFactory, QueueFactory

pytestmark = pytest.mark.django_db


class TestTenantUpdate:
    def test_admin_changes_the_quota_and_every_field_is_audited(self, nlp, staff, cluster):
        tenant = tenant_update(
            tenant=nlp,
            actor=staff,
            weight=3,
            guarantee_gpus=12,
            capability_gpus=24,
            borrowing_limit_gpus=4,
            reclaimable=False,
        )
        assert (tenant.weight, tenant.guarantee_gpus, tenant.capability_gpus) == (3, 12, 24)
        rows = {
            c.field: (c.old_value, c.new_value, c.changed_by)
            for c in TenantChange.objects.filter(tenant=nlp)
        }
        assert rows == {
            "weight": ("1", "3", staff),
            "guarantee_gpus": ("0", "12", staff),
            "capability_gpus": ("", "24", staff),
            "borrowing_limit_gpus": ("", "4", staff),
            "reclaimable": ("true", "false", staff),
        }

    def test_unchanged_values_write_nothing(self, nlp, staff):
        tenant_update(tenant=nlp, actor=staff, weight=nlp.weight)
        assert not TenantChange.objects.exists()

    @pytest.mark.parametrize("user", ["lead", "researcher"])
    def test_only_site_admins_may_change_a_tenant(self, request, nlp, user):
        with pytest.raises(PermissionDenied, match=services.TENANT_EDIT_FORBIDDEN):
            tenant_update(tenant=nlp, actor=request.getfixturevalue(user), weight=5)
        nlp.refresh_from_db()
        assert nlp.weight == 1

    def test_guarantee_below_the_queues_names_the_numbers(self, nlp, staff, cluster):
        tenant_update(tenant=nlp, actor=staff, guarantee_gpus=48 - 16)
        QueueFactory(tenant=nlp, name="nlp-train", guarantee_gpus=16)
        QueueFactory(tenant=nlp, name="nlp-dev", guarantee_gpus=16)
        with pytest.raises(ValidationError) as info:
            tenant_update(tenant=nlp, actor=staff, guarantee_gpus=20)
        assert info.value.message_dict == {
            "guarantee_gpus": [
                "guarantee_gpus: 20 GPUs is below the sum of nlp's queue guarantees, "
                "32 GPUs (nlp-dev 16 GPUs + nlp-train 16 GPUs)"
            ]
        }
        nlp.refresh_from_db()
        assert nlp.guarantee_gpus == 32
        assert TenantChange.objects.count() == 1  # only the first, accepted change

    def test_guarantee_may_equal_the_queues(self, nlp, staff, cluster):
        tenant_update(tenant=nlp, actor=staff, guarantee_gpus=16)
        QueueFactory(tenant=nlp, guarantee_gpus=8)
        assert tenant_update(tenant=nlp, actor=staff, guarantee_gpus=8).guarantee_gpus == 8

    def test_tenants_may_not_guarantee_more_than_the_cluster(self, nlp, vision, staff, cluster):
        tenant_update(tenant=vision, actor=staff, guarantee_gpus=20)
        with pytest.raises(ValidationError) as info:
            tenant_update(tenant=nlp, actor=staff, guarantee_gpus=16)
        assert info.value.message_dict == {
            "guarantee_gpus": [
                "guarantee_gpus: the tenants' guarantees would be 36 GPUs (nlp 16 GPUs + "
                "vision 20 GPUs) but the cluster has 32 GPUs"
            ]
        }

    def test_unschedulable_nodes_do_not_count(self, nlp, staff, cluster):
        NodeFactory(name="cordoned", gpu_count=8, schedulable=False)
        with pytest.raises(ValidationError) as info:
            tenant_update(tenant=nlp, actor=staff, guarantee_gpus=33)
        assert "but the cluster has 32" in info.value.message_dict["guarantee_gpus"][0]

    def test_lowering_works_on_a_shrunk_cluster(self, nlp, staff, cluster):
        tenant_update(tenant=nlp, actor=staff, guarantee_gpus=32)
        for node in cluster[:2]:
            node.schedulable = False
            node.save()
        assert tenant_update(tenant=nlp, actor=staff, guarantee_gpus=24).guarantee_gpus == 24
        assert tenant_update(tenant=nlp, actor=staff, weight=4).weight == 4

    def test_guarantee_above_capability(self, nlp, staff, cluster):
        with pytest.raises(ValidationError) as info:
            tenant_update(tenant=nlp, actor=staff, guarantee_gpus=9, capability_gpus=8)
        assert info.value.message_dict == {
            "guarantee_gpus": ["guarantee (9 GPUs) may not exceed capability (8 GPUs)"]
        }

    @pytest.mark.parametrize(
        ("field", "value"),
        [("weight", 0), ("weight", 65536), ("guarantee_gpus", -1), ("capability_gpus", -5)],
    )
    def test_out_of_range_values_name_the_field(self, nlp, staff, field, value):
        with pytest.raises(ValidationError) as info:
            tenant_update(tenant=nlp, actor=staff, **{field: value})
        assert field in info.value.message_dict
        assert not TenantChange.objects.exists()

    @pytest.mark.parametrize("field", ["name", "display_name", "priority", "state"])
    def test_other_fields_are_not_quota(self, nlp, staff, field):
        with pytest.raises(ValidationError) as info:
            tenant_update(tenant=nlp, actor=staff, **{field: "x"})
        assert info.value.message_dict == {field: [services.FIELD_NOT_EDITABLE]}


class TestTenantCreate:
    def test_creates_with_a_quota(self, cluster):
        tenant = tenant_create(name="speech", guarantee_gpus=8, capability_gpus=16, weight=2)
        assert (tenant.guarantee_gpus, tenant.capability_gpus, tenant.weight) == (8, 16, 2)

    def test_refuses_a_guarantee_beyond_the_cluster(self, cluster):
        with pytest.raises(ValidationError) as info:
            tenant_create(name="speech", guarantee_gpus=40)
        assert set(info.value.message_dict) == {"guarantee_gpus"}
        assert not Tenant.objects.filter(name="speech").exists()
