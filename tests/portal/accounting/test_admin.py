"""The ledger is read-only in the Django admin, superusers included: only the cycle books."""

from http import HTTPStatus

import pytest
from django.test import Client

from portal.accounting.models import LedgerEntry
from tests.factories import UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("ledger")]


def test_a_superuser_may_read_the_ledger_but_not_change_it(ledger):
    client = Client()
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    entry = ledger[0]

    assert client.get("/admin/accounting/ledgerentry/").status_code == HTTPStatus.OK
    assert client.get("/admin/accounting/ledgerentry/add/").status_code == HTTPStatus.FORBIDDEN
    response = client.post(f"/admin/accounting/ledgerentry/{entry.pk}/delete/", {"post": "yes"})
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert LedgerEntry.objects.filter(pk=entry.pk).exists()
