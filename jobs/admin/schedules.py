"""Admin of periodic schedules: what each runs, when it last ran and when it runs next.

Two kinds of rows. A schedule declared in settings or code (``source`` "code") is mirrored by
the workers: the admin can pause it (``enabled``), run it now, and delete the row of one no
longer declared; its declaration is the truth, so nothing else of it is edited here. A schedule
added in the admin (``source`` "admin") is the row itself: added, changed and deleted with the
model's permissions, its values checked by ``jobs.admin.schedule_form``. Running one now needs
``jobs.run_schedule``. Every save from the admin writes only what the form holds, guarded by
the row's ``version``, so neither another operator's edit nor a worker's record of a slot is
written over.
"""

from django import forms
from django.apps import apps
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.db.models import F
from django.http import HttpResponseNotAllowed
from django.shortcuts import redirect
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from jobs.admin import scheduled
from jobs.admin.display import EMPTY, FullWidthChangeList
from jobs.admin.inputs import HostileInputAdmin
from jobs.admin.schedule_form import CHANGED_MEANWHILE, FIELDS, ScheduleForm
from jobs.exceptions import PayloadError, UnknownTaskError
from jobs.maintenance import periodic, schedulable
from jobs.models import Schedule
from jobs.tasks.definition import JOBS_API

SHOWN = [
    "source",
    "runs",
    "last_run_at",
    "last_task",
    "next_run_at",
    "created_at",
    "updated_at",
]
DECLARED = ["name", "task", "cron", "interval_seconds", "time_zone"]


class ScheduleAdmin(FullWidthChangeList, HostileInputAdmin, admin.ModelAdmin):
    empty_value_display = EMPTY
    list_display = [
        "name",
        "task",
        "source",
        "runs",
        "every",
        "time_zone",
        "enabled",
        "last_run_at",
        "next_run_at",
    ]
    list_filter = ["enabled", "source"]
    list_editable = ["enabled"]
    search_fields = ["name", "task"]
    actions = ["run_now_schedules"]
    form = ScheduleForm

    class Media:
        css = {"all": ["jobs/admin/jobs.css"]}  # the list's columns wrap, as the task list's

    # Which fields, by kind of row ---------------------------------------------------------

    def _declared_row(self, obj) -> bool:
        return obj is not None and obj.source == Schedule.Source.CODE

    def get_fields(self, request, obj=None):
        if self._declared_row(obj):
            return ["enabled", *DECLARED, *SHOWN]
        if obj is None:
            return [*FIELDS, "version"]
        return [*FIELDS, "version", *SHOWN]

    def get_readonly_fields(self, request, obj=None):
        if self._declared_row(obj):
            return [*DECLARED, *SHOWN]
        if obj is None:
            return []
        return ["name", *SHOWN]  # the name is in every slot's idempotency key: not renamed

    def get_form(self, request, obj=None, change=False, **kwargs):
        if self._declared_row(obj):
            kwargs["form"] = forms.ModelForm  # ``enabled`` alone, nothing to check
        return super().get_form(request, obj, change, **kwargs)

    # Saving: only what the form holds, guarded by the version -----------------------------

    def save_model(self, request, obj, form, change):
        now = timezone.now()
        if not change:
            obj.source = Schedule.Source.ADMIN
            obj.created_at, obj.version = now, 0
            obj.next_run_at = form.cleaned_data["next_run_at"]
            obj.save(force_insert=True)  # never over a row of the same name
            return
        values = {name: getattr(obj, name) for name in form.changed_data if name != "version"}
        if "next_run_at" in form.cleaned_data:
            values["next_run_at"] = form.cleaned_data["next_run_at"]
        row = Schedule.objects.filter(pk=obj.pk)
        if "version" in form.cleaned_data:  # the whole form: saved only over what it read
            row = row.filter(version=form.cleaned_data["version"])
        if not row.update(**values, version=F("version") + 1, updated_at=now):
            # Between this form's check and its save: rare, and said as the check says it.
            self.message_user(request, CHANGED_MEANWHILE, messages.ERROR)

    def has_run_permission(self, request, obj=None):
        return request.user.has_perm("jobs.run_schedule")

    # Columns ------------------------------------------------------------------------------

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
            return EMPTY
        try:
            url = reverse("admin:jobs_task_change", args=[obj.last_task_id])
        except NoReverseMatch:
            return str(obj.last_task_id)
        return format_html('<a href="{}">{}</a>', url, obj.last_task_id)

    # Run now ------------------------------------------------------------------------------

    @admin.action(permissions=["run"], description="Run selected schedules now")
    def run_now_schedules(self, request, queryset):
        done = 0
        skipped: dict[str, int] = {}
        by = request.user.get_username()
        for row in queryset:
            try:
                periodic.run_now(periodic.spec_of(row), by=by)
            except UnknownTaskError:
                reason = "task not found"
            except ImproperlyConfigured:
                reason = "not a valid schedule (no longer declared, or refused)"
            except PayloadError:
                reason = "arguments refused"
            else:
                done += 1
                continue
            skipped[reason] = skipped.get(reason, 0) + 1
        self.message_user(
            request, run_now_message(done, skipped), messages.SUCCESS if done else messages.WARNING
        )

    # The scheduled-tasks page -------------------------------------------------------------

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {**(extra_context or {}), "can_run_now": self.has_run_permission(request)}
        return super().change_view(request, object_id, form_url, extra_context)

    def run_now_view(self, request, object_id):
        """Run one schedule now, from its page: a POST, behind view and run permissions."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not (self.has_view_permission(request) and self.has_run_permission(request)):
            raise PermissionDenied
        row = self.get_object(request, unquote(object_id))
        if row is None:
            self.message_user(request, "No such schedule: deleted meanwhile?", messages.WARNING)
            return redirect(reverse("admin:jobs_schedule_changelist"))
        self.run_now_schedules(request, Schedule.objects.filter(pk=row.pk))
        return redirect(reverse("admin:jobs_schedule_change", args=[quote(row.pk)]))

    def get_urls(self):
        scheduled_view = self.admin_site.admin_view(self.scheduled_view)
        run_now_view = self.admin_site.admin_view(self.run_now_view)
        return [
            path("scheduled/", scheduled_view, name="jobs_schedule_scheduled"),
            path("<path:object_id>/run-now/", run_now_view, name="jobs_schedule_run_now"),
            *super().get_urls(),
        ]

    def scheduled_view(self, request):
        # What is waiting to run is the tasks' to see: the task list shows the same rows.
        if not request.user.has_perm("jobs.view_task"):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Scheduled tasks",
            "is_nav_sidebar_enabled": False,
        }
        return scheduled.render_scheduled(request, context)


def run_now_message(done: int, skipped: dict[str, int]) -> str:
    """Say it in one line: "2 schedules run now (a task each); 1 skipped: task not found"."""
    text = f"{done:,} schedule{'' if done == 1 else 's'} run now (a task each)"
    if skipped:
        reasons = ", ".join(f"{n:,} {reason}" for reason, n in sorted(skipped.items()))
        if len(skipped) == 1:
            reasons = next(iter(skipped))
        text += f"; {sum(skipped.values()):,} skipped: {reasons}"
    return text


# Only where the admin is installed: admin.site does not exist without it.
if apps.is_installed("django.contrib.admin"):
    admin.site.register(Schedule, ScheduleAdmin)
