"""A changelist paginator that never counts a million rows."""

from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.utils.functional import cached_property

from jobs import sql

# Counting up to this many rows is cheap; beyond it the planner's estimate is good enough to
# page through, and the exact number would cost a scan of the table.
EXACT_COUNT_LIMIT = 10_000


class EstimatedCountPaginator(Paginator):
    """Count exactly up to EXACT_COUNT_LIMIT rows; past that, use PostgreSQL's estimate."""

    @cached_property
    def count(self):
        queryset = self.object_list
        # The admin pages a QuerySet; a list would have no database to ask for an estimate.
        assert isinstance(queryset, QuerySet), "pages a QuerySet"
        capped = queryset.order_by()[: EXACT_COUNT_LIMIT + 1].count()
        if capped <= EXACT_COUNT_LIMIT:
            return capped
        return max(capped, planner_estimate(queryset) or 0)


def planner_estimate(queryset) -> int | None:
    """Return how many rows the database's planner expects ``queryset`` to return (else None)."""
    connection = connections[queryset.db]
    sql_text, params = queryset.order_by().query.get_compiler(connection=connection).as_sql()
    with connection.cursor() as cursor:
        return sql.dialect(connection).planner_rows(cursor, sql_text, params)
