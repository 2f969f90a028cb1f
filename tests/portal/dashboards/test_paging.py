"""LargeTablePaginator: exact counts unless PostgreSQL's statistics say an unfiltered table is
large; the last page corrects an estimate."""

import pytest
from django.db import connection

from portal.dashboards.paging import LargeTablePaginator
from portal.jobs.models import Job
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs():
    return [JobFactory(status="pending" if i % 2 else "running") for i in range(7)]


def test_filtered_and_small_tables_count_exactly(jobs):
    paginator = LargeTablePaginator(Job.objects.filter(status="pending").order_by("id"), 2)
    assert paginator.count == 3
    assert not paginator.estimated
    paginator = LargeTablePaginator(Job.objects.order_by("id"), 2)
    assert paginator.count == 7
    assert not paginator.estimated


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_class.reltuples")
def test_unfiltered_large_table_uses_planner_estimate(jobs):
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Job._meta.db_table}")
    paginator = LargeTablePaginator(Job.objects.order_by("id"), 2)
    paginator.estimate_above = 1
    assert paginator.count == 7  # reltuples after ANALYZE
    assert paginator.estimated
    paginator = LargeTablePaginator(Job.objects.order_by("id"), 2)
    paginator.estimate_above = 1
    paginator.count = 40  # a stale estimate: the short last page tells the truth
    paginator.estimated = True
    page = paginator.page(4)
    assert len(page.object_list) == 1
    assert (paginator.count, paginator.num_pages, paginator.estimated) == (7, 4, False)
