"""Audit records are read-only in the Django admin, for superusers too; the admin is for
staff, and a signed-in researcher is told so instead of seeing a login form."""

from http import HTTPStatus

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import (
    CycleRunFactory,
    PlacementFactory,
    PreemptionEventFactory,
    QueueChangeFactory,
    QueueUsageSampleFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

AUDIT_FACTORIES = [
    PreemptionEventFactory,
    CycleRunFactory,
    PlacementFactory,
    QueueChangeFactory,
    QueueUsageSampleFactory,
]


@pytest.fixture
def superuser_client():
    client = Client()
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    return client


def _admin_url(obj, view: str, *args) -> str:
    meta = obj._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=args)


@pytest.mark.parametrize("factory", AUDIT_FACTORIES)
def test_audit_records_cannot_be_added_changed_or_deleted(superuser_client, factory):
    record = factory()
    model = type(record)
    before = model.objects.filter(pk=record.pk).values().get()
    changelist = superuser_client.get(_admin_url(record, "changelist"))
    assert changelist.status_code == HTTPStatus.OK
    body = changelist.content.decode()
    assert _admin_url(record, "add") not in body
    assert "delete_selected" not in body
    assert superuser_client.get(_admin_url(record, "add")).status_code == HTTPStatus.FORBIDDEN
    change = superuser_client.get(_admin_url(record, "change", record.pk))
    assert change.status_code == HTTPStatus.OK  # viewable
    assert 'name="_save"' not in change.content.decode()
    posted = superuser_client.post(_admin_url(record, "change", record.pk), {"gpus_freed": 99})
    assert posted.status_code == HTTPStatus.FORBIDDEN
    deleted = superuser_client.post(_admin_url(record, "delete", record.pk), {"post": "yes"})
    assert deleted.status_code == HTTPStatus.FORBIDDEN
    assert model.objects.filter(pk=record.pk).values().get() == before


def test_a_signed_in_researcher_is_told_the_admin_is_for_staff(researcher_client):
    response = researcher_client.get("/admin/", follow=True)
    assert response.status_code == HTTPStatus.FORBIDDEN
    body = response.content.decode()
    assert "The Django admin is for site staff" in body
    assert 'name="password"' not in body


def test_anonymous_users_get_the_portal_login_and_come_back(client):
    response = client.get("/admin/")
    assert response.status_code == HTTPStatus.FOUND
    response = client.get(response.url)
    assert response.status_code == HTTPStatus.FOUND
    assert response.url == "/accounts/login/?next=/admin/"


def test_staff_reach_the_admin(staff_client):
    assert staff_client.get("/admin/").status_code == HTTPStatus.OK


def test_favicon_is_served(client):
    response = client.get("/favicon.ico")
    assert response.status_code == HTTPStatus.MOVED_PERMANENTLY
    assert response.url.endswith("favicon.svg")
    assert client.get(response.url).status_code == HTTPStatus.OK
