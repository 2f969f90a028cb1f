"""The ledger is permanent: retention prunes its own tables and never a ledger row."""

from datetime import UTC, date, datetime

import pytest

from portal.accounting.models import LedgerClock, LedgerEntry
from portal.ops.retention import PRUNED_MODELS, retention_run
from tests.factories import QueueFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_retention_never_prunes_the_ledger():
    assert LedgerEntry not in PRUNED_MODELS
    assert LedgerClock not in PRUNED_MODELS
    queue = QueueFactory()
    entry = LedgerEntry.objects.create(
        month=date(2020, 1, 1),
        tenant=queue.tenant,
        queue=queue,
        user=UserFactory(),
        gpu_milli_seconds_within=3_600_000,
        gpu_milli_seconds_lost=1000,
    )
    LedgerClock.objects.create(booked_until=datetime(2020, 1, 31, tzinfo=UTC))

    retention_run(
        now=datetime(2026, 12, 1, tzinfo=UTC),
        sample_days=1,
        preemption_event_days=1,
        cycle_run_days=1,
    )

    kept = LedgerEntry.objects.get()
    assert [getattr(kept, f) for f in LedgerEntry.AMOUNTS] == [
        getattr(entry, f) for f in LedgerEntry.AMOUNTS
    ]
    assert LedgerClock.objects.count() == 1
