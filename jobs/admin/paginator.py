"""A changelist paginator that never counts a million rows."""

import json

from django.core.paginator import Paginator
from django.db import connections
from django.utils.functional import cached_property

# Counting up to this many rows is cheap; beyond it the planner's estimate is good enough to
# page through, and the exact number would cost a scan of the table.
EXACT_COUNT_LIMIT = 10_000


class EstimatedCountPaginator(Paginator):
    """Count exactly up to EXACT_COUNT_LIMIT rows; past that, use PostgreSQL's estimate."""

    @cached_property
    def count(self):
        queryset = self.object_list
        capped = queryset.order_by()[: EXACT_COUNT_LIMIT + 1].count()
        if capped <= EXACT_COUNT_LIMIT:
            return capped
        return max(capped, planner_estimate(queryset) or 0)


def planner_estimate(queryset) -> int | None:
    """Return how many rows PostgreSQL's planner expects ``queryset`` to return (else None)."""
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return None
    sql, params = queryset.order_by().query.get_compiler(connection=connection).as_sql()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])
