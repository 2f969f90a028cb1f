import pytest

from bench.pages import seed
from portal.scheduling.models import QueueUsageRollup, QueueUsageSample

pytestmark = pytest.mark.django_db


def test_seed_builds_usage_rollups(cluster):
    report = seed(n_jobs=40, days=1, n_queues=2, n_nodes=2)
    assert report["usage_samples"] == QueueUsageSample.objects.count() == 2 * 1440
    rolled = QueueUsageRollup.objects.filter(resolution="hour")
    assert sum(rolled.values_list("samples", flat=True)) == 2 * 1440
    assert report["usage_rollups"]["hour"] == rolled.count()


def test_seed_books_a_year_of_ledger_rows_and_every_page_answers(cluster):
    from bench.pages import measure
    from portal.accounting.models import LedgerEntry

    report = seed(n_jobs=40, days=1, n_queues=2, n_nodes=2)
    assert report["ledger_entries"] == LedgerEntry.objects.count() == 12 * 2 * 20
    assert LedgerEntry.objects.values("month").distinct().count() == 12
    pages = measure(repeat=1)  # raises on any answer but 200
    assert {"usage page (per user)", "api usage report CSV (per queue)", "chart tenants"} <= set(
        pages
    )
