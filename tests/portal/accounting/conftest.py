from datetime import UTC, date, datetime

import pytest
from django.utils import timezone

from portal.accounting.models import LedgerEntry
from tests.factories import QueueFactory, UserFactory

NOW = datetime(2026, 12, 5, 9, 30, tzinfo=UTC)
NOVEMBER = date(2026, 11, 1)
HOUR = 3_600_000  # milli-seconds of one GPU (or core) for an hour


@pytest.fixture
def frozen(monkeypatch):
    monkeypatch.setattr(timezone, "now", lambda: NOW)


@pytest.fixture
def ledger(nlp, vision, nlp_queue, vision_queue, researcher, outsider):
    """November: nlp-train and nlp-dev (researcher, and bob), vision-train (outsider)."""
    nlp_dev = QueueFactory(tenant=nlp, name="nlp-dev")
    bob = UserFactory(username="bob")

    def entry(queue, user, *, within=0, borrowed=0, lost=0, cpu=0, month=NOVEMBER):
        return LedgerEntry.objects.create(
            month=month,
            tenant=queue.tenant,
            queue=queue,
            user=user,
            gpu_milli_seconds_within=within * HOUR,
            gpu_milli_seconds_borrowed=borrowed * HOUR,
            gpu_milli_seconds_lost=lost * HOUR,
            cpu_milli_seconds_within=cpu * HOUR,
        )

    return [
        entry(nlp_queue, researcher, within=10, borrowed=5, lost=2, cpu=40),
        entry(nlp_dev, researcher, within=1),
        entry(nlp_dev, bob, borrowed=3),
        entry(vision_queue, outsider, within=7),
        entry(vision_queue, outsider, within=100, month=date(2026, 10, 1)),
    ]


@pytest.fixture
def outsider_client(outsider):
    from django.test import Client

    client = Client()
    client.force_login(outsider)
    return client
