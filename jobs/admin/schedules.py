"""Admin of periodic schedules: what each runs, when it last ran and when it runs next.

Schedules are declared in settings or code; the rows only mirror them, so the admin can pause
one (``enabled``) and delete rows of schedules no longer declared, and change nothing else.
"""

from django.apps import apps
from django.contrib import admin
from django.core.exceptions import ImproperlyConfigured
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

from jobs.admin.display import FullWidthChangeList
from jobs.admin.inputs import HostileInputAdmin
from jobs.exceptions import UnknownTaskError
from jobs.maintenance import schedulable
from jobs.models import Schedule
from jobs.tasks.definition import JOBS_API


class ScheduleAdmin(FullWidthChangeList, HostileInputAdmin, admin.ModelAdmin):
    list_display = [
        "name",
        "task",
        "runs",
        "every",
        "time_zone",
        "enabled",
        "last_run_at",
        "next_run_at",
    ]
    list_filter = ["enabled"]
    list_editable = ["enabled"]
    search_fields = ["name", "task"]
    readonly_fields = [
        "name",
        "task",
        "runs",
        "cron",
        "interval_seconds",
        "time_zone",
        "last_run_at",
        "last_task",
        "next_run_at",
        "created_at",
        "updated_at",
    ]
    fields = ["enabled", *readonly_fields]

    def has_add_permission(self, request):
        return False

    @admin.display(description="Every")
    def every(self, obj):
        return obj.every

    @admin.display(description="Runs")
    def runs(self, obj):
        """Say what the task is: jobs' or Django's (and its backend), or why it cannot run."""
        try:
            task = schedulable.resolve(obj.task)
        except UnknownTaskError:
            return "not found: removed or renamed?"
        except ImproperlyConfigured:
            return "refused: not stored by a jobs backend"
        if task.backend == JOBS_API:
            return "@jobs.task"
        return f"Django @task, backend {task.backend}"

    @admin.display(description="Last task")
    def last_task(self, obj):
        if obj.last_task_id is None:
            return "-"
        try:
            url = reverse("admin:jobs_task_change", args=[obj.last_task_id])
        except NoReverseMatch:
            return str(obj.last_task_id)
        return format_html('<a href="{}">{}</a>', url, obj.last_task_id)


# Only where the admin is installed: admin.site does not exist without it.
if apps.is_installed("django.contrib.admin"):
    admin.site.register(Schedule, ScheduleAdmin)
