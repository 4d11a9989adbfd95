"""Changelist filters whose choices come from indexes, not from reading every row."""

from datetime import timedelta

from django.contrib import admin
from django.db import connections
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from django.utils import timezone

from jobs import metrics, sql
from jobs.sql import errors

# The windows an operator acts on ("every failed import of the last hour"), in seconds.
FINISHED_WITHIN = {"1h": 3600, "24h": 86400, "7d": 7 * 86400}


class _IndexedValueFilter(admin.SimpleListFilter):
    """Offer the distinct values of one column (``field_name``), found by a skip scan."""

    field_name = ""

    def lookups(self, request, model_admin):
        values = metrics.queue_names() if self.field_name == "queue" else metrics.task_names()
        return [(value, value) for value in values]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(**{self.field_name: self.value()})
        return queryset


class QueueFilter(_IndexedValueFilter):
    title = "queue"
    parameter_name = "queue"
    field_name = "queue"


class NameFilter(_IndexedValueFilter):
    title = "task name"
    parameter_name = "name"
    field_name = "name"


class ErrorFilter(admin.SimpleListFilter):
    """Tasks one of whose attempts raised an exception class (``?error=builtins.ValueError``):
    the errors page links each error to its tasks by it, beside their name."""

    title = "error"
    parameter_name = "error"

    def lookups(self, request, model_admin):
        # No list of every exception (that would read every row's history): the chosen one only,
        # so the sidebar says what filters the list and offers "All" to drop it.
        value = self.value()
        return [(value, value)] if value else []

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        connection = connections[queryset.db]
        condition = errors.has_exception_sql(connection, sql.dialect(connection))
        raised = RawSQL(condition, [self.value()], output_field=BooleanField())
        return queryset.annotate(jobs_raised=raised).filter(jobs_raised=True)


class FinishedFilter(admin.SimpleListFilter):
    """Tasks that finished within a recent window (``?finished=1h``), counted from now, so a
    bulk retry or cancel can take "every failed import of the last hour"."""

    title = "finished"
    parameter_name = "finished"

    def lookups(self, request, model_admin):
        return [
            ("1h", "In the last hour"),
            ("24h", "In the last 24 hours"),
            ("7d", "In the last 7 days"),
        ]

    def queryset(self, request, queryset):
        seconds = FINISHED_WITHIN.get(self.value() or "")
        if seconds is None:  # no choice, or one not offered: the whole list
            return queryset
        since = timezone.now() - timedelta(seconds=seconds)
        return queryset.filter(finished_at__gte=since)
