"""Changelist filters whose choices come from indexes, not from reading every row."""

from django.contrib import admin

from jobs import metrics


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
