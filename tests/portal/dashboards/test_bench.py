import pytest

from portal.dashboards.bench import seed
from portal.scheduling.models import QueueUsageRollup, QueueUsageSample

pytestmark = pytest.mark.django_db


def test_seed_builds_usage_rollups(cluster):
    report = seed(n_jobs=40, days=1, n_queues=2, n_nodes=2)
    assert report["usage_samples"] == QueueUsageSample.objects.count() == 2 * 1440
    rolled = QueueUsageRollup.objects.filter(resolution="hour")
    assert sum(rolled.values_list("samples", flat=True)) == 2 * 1440
    assert report["usage_rollups"]["hour"] == rolled.count()
