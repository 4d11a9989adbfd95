"""Changelist filters whose choices come from indexes, not from reading every row."""

from django.contrib import admin

from jobs import metrics


class _IndexedValueFilter(admin.SimpleListFilter):
    """Offer the distinct values of one column, found by a skip scan of its index."""

    field_name = ""

    def values(self) -> list[str]:
        raise NotImplementedError

    def lookups(self, request, model_admin):
        return [(value, value) for value in self.values()]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(**{self.field_name: self.value()})
        return queryset


class QueueFilter(_IndexedValueFilter):
    title = "queue"
    parameter_name = "queue"
    field_name = "queue"

    def values(self):
        return metrics.queue_names()


class NameFilter(_IndexedValueFilter):
    title = "task name"
    parameter_name = "name"
    field_name = "name"

    def values(self):
        return metrics.task_names()
