"""Concurrent quota edits, each thread on its own connection: two admins raising two tenants'
guarantees towards the cluster's size cannot both succeed, and nothing deadlocks."""

import pytest
from django.core.exceptions import ValidationError
from django.db import close_old_connections

from portal.tenants.models import Tenant, TenantChange
from portal.tenants.services import tenant_update
from tests.factories import TenantFactory
from tests.portal.queues.test_concurrent_edits import run_threads

pytestmark = pytest.mark.django_db(transaction=True)
ROUNDS = 5


def test_concurrent_guarantee_raises_never_exceed_the_cluster(staff, cluster):
    tenants = [TenantFactory(name=f"team-{i}") for i in range(4)]
    close_old_connections()
    refused: list[str] = []

    def raise_guarantee(index: int) -> None:
        tenant = tenants[index]
        for step in range(1, ROUNDS + 1):
            try:
                # 4 tenants x 10 > the cluster's 32 GPUs: some raises must be refused.
                tenant_update(tenant=tenant, actor=staff, guarantee_gpus=2 * step)
            except ValidationError as error:
                refused.append(error.message_dict["guarantee_gpus"][0])
                return

    errors = run_threads(raise_guarantee, len(tenants))

    assert errors == []
    total = sum(Tenant.objects.values_list("guarantee_gpus", flat=True))
    assert total <= 32
    assert refused, "4 x 10 GPUs cannot all fit 32"
    assert all("but the cluster has 32" in message for message in refused)
    # Every accepted change was audited, and only those.
    assert TenantChange.objects.count() == sum(t.guarantee_gpus for t in Tenant.objects.all()) // 2
