"""A paginator for long histories (job list, preemption history).

Counting every row of an unfiltered 100k+ row table costs tens of milliseconds per page view
on PostgreSQL (a full scan: COUNT(*) is never answered from statistics). For an unfiltered
queryset over a table the planner's statistics say is large, the count is taken from
`pg_class.reltuples` instead (kept current by (auto)ANALYZE) and `estimated` is set; filtered
querysets (status, queue, role scoping) and other databases count exactly.
"""

from __future__ import annotations

from django.core.paginator import Page, Paginator
from django.db import connections
from django.db.models import QuerySet
from django.utils.functional import cached_property

ESTIMATE_ABOVE = 50_000


class LargeTablePaginator(Paginator):
    estimate_above = ESTIMATE_ABOVE
    estimated = False

    @cached_property
    def count(self) -> int:
        estimate = self._estimate()
        if estimate is not None:
            self.estimated = True
            return estimate
        return super().count

    def _estimate(self) -> int | None:
        queryset = self.object_list
        if not isinstance(queryset, QuerySet):
            return None
        connection = connections[queryset.db]
        query = queryset.query
        if connection.vendor != "postgresql" or query.where or query.low_mark or query.high_mark:
            return None
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)",
                [connection.ops.quote_name(queryset.model._meta.db_table)],
            )
            row = cursor.fetchone()
        if row is None or row[0] is None or row[0] < self.estimate_above:
            return None  # never analyzed (-1), or small enough to count
        return int(row[0])

    def page(self, number) -> Page:
        page = super().page(number)
        if self.estimated and len(page.object_list) < self.per_page:
            # The last page tells the exact count.
            exact = page.start_index() - 1 + len(page.object_list) if page.object_list else None
            if exact is not None:
                self.count = exact
                self.__dict__.pop("num_pages", None)
                self.estimated = False
        return page
