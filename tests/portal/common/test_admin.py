from http import HTTPStatus

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.factories import (
    CycleRunFactory,
    JobTaskFactory,
    MembershipFactory,
    PlacementFactory,
    PreemptionEventFactory,
    QueueChangeFactory,
    QueueFactory,
    QueueUsageSampleFactory,
    SchedulerConfigFactory,
    SimulatedPodFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

PORTAL_APPS = {"tenants", "queues", "jobs", "cluster", "scheduling", "api"}


def _queue_order():
    from portal.queues.models import QueueOrder
    from portal.queues.services import queue_orders_record

    queue = QueueFactory()
    queue_orders_record(orders={queue.pk: [3, 1, 2]}, at=timezone.now())
    return QueueOrder.objects.get(queue=queue)


@pytest.fixture
def superuser_client():
    user = UserFactory(username="root", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    return client


def test_every_portal_model_is_registered():
    from django.apps import apps

    for label in PORTAL_APPS:
        for model in apps.get_app_config(label).get_models():
            assert model in admin.site._registry, model


def test_admin_changelists_and_change_pages_render(superuser_client):
    objects = [
        MembershipFactory(),
        QueueChangeFactory(),
        PlacementFactory(),
        JobTaskFactory(),
        SimulatedPodFactory(),
        SchedulerConfigFactory(),
        CycleRunFactory(),
        PreemptionEventFactory(cycle=CycleRunFactory()),
        QueueUsageSampleFactory(),
        _queue_order(),
    ]
    seen = set()
    for obj in objects:
        for related in (
            obj,
            getattr(obj, "tenant", None),
            getattr(obj, "job", None),
            getattr(obj, "queue", None),
            getattr(obj, "node", None),
        ):
            if related is None or type(related) in seen:
                continue
            seen.add(type(related))
            meta = related._meta
            changelist = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
            assert superuser_client.get(changelist).status_code == HTTPStatus.OK, changelist
            change = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[related.pk])
            assert superuser_client.get(change).status_code == HTTPStatus.OK, change
            response = superuser_client.get(changelist, {"q": "x"})
            assert response.status_code == HTTPStatus.OK, changelist
