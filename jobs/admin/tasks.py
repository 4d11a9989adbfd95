"""The task admin: a changelist that stays fast on a million rows, a read-only detail page, and
retry / cancel as bulk actions and as buttons, each behind its own permission."""

import functools
import uuid

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import HttpResponseNotAllowed
from django.shortcuts import redirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext

from jobs import states
from jobs.admin import actions, dashboard, display, errors, history, live, select_all, workflows
from jobs.admin.display import HEAVY_FIELDS, PROGRESS_SHOWN
from jobs.admin.filters import ErrorFilter, FinishedFilter, NameFilter, QueueFilter
from jobs.admin.inputs import HostileInputAdmin
from jobs.admin.paginator import EstimatedCountPaginator
from jobs.humanize import seconds_text
from jobs.metrics import waiting as waiting_reasons
from jobs.models import Task, TaskPause

SUMMARY_SHOWN = 60  # characters of a summary in the task list
PAUSE_TYPES = "jobs.pause_task_type"  # pausing and resuming a task type


class TaskChangeList(ChangeList):
    """The changelist, with why each waiting row of the page waits: two queries for the page."""

    def get_results(self, request):
        super().get_results(request)
        if request.method != "GET":
            return  # an action's POST: the page is most often not shown, so not read for it
        reasons = waiting_reasons.why_waiting_many(self.result_list)
        for task in self.result_list:
            task.jobs_waiting = reasons.get(task.pk)


class TaskAdmin(display.FullWidthChangeList, HostileInputAdmin, admin.ModelAdmin):
    empty_value_display = display.EMPTY
    list_display = [
        "name_display",
        "summary_display",
        "status_badge",
        "queue",
        "attempts_display",
        "progress_display",
        "age",
        "run_time",
        "owner",
    ]
    list_filter = ["status", NameFilter, QueueFilter, ErrorFilter, FinishedFilter, "created_at"]
    search_fields = ["name"]  # shows the search box; get_search_results does the searching
    search_help_text = (
        "A task id, a task name (its start, or its short name: import_contacts), an idempotency "
        "key, summary words, or an owner's username."
    )
    list_select_related = ["owner"]
    list_per_page = 100
    # No COUNT(*) of the whole table, no facet counts: both read every row.
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = EstimatedCountPaginator
    actions = ["retry_tasks", "cancel_tasks", "run_now_tasks"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "id",
                    "name",
                    "status_badge",
                    "waiting_display",
                    "workflow_display",
                    "waits_for_display",
                    "queue",
                    "priority",
                    "summary",
                    "owner",
                ]
            },
        ),
        ("Progress", {"fields": ["progress_display", "steps_pretty"]}),
        (
            "Attempts and errors",
            {"fields": ["attempts_display", "last_error", "cancelled_by", "error_history"]},
        ),
        (
            "Timings",
            {"fields": ["timings", "worker_id"]},
        ),
        ("Input and output", {"fields": ["payload_pretty", "result_pretty"]}),
        (
            "Identity",
            {
                "fields": ["idempotency_key", "unique_key", "unique_while", "backend"],
                "classes": ["collapse"],
            },
        ),
    ]
    readonly_fields = [
        *(field.name for field in Task._meta.fields),
        "status_badge",
        "waiting_display",
        "workflow_display",
        "waits_for_display",
        "attempts_display",
        "progress_display",
        "steps_pretty",
        "error_history",
        "timings",
        "payload_pretty",
        "result_pretty",
    ]

    class Media:
        css = {"all": ["jobs/admin/jobs.css"]}
        js = ["jobs/admin/live.js"]

    # Permissions -------------------------------------------------------------------------------

    def has_add_permission(self, request):
        return False  # tasks are enqueued by code, with a validated payload

    def has_change_permission(self, request, obj=None):
        # Saving the form would write every column, status included, over whatever a worker
        # recorded meanwhile: state changes go through the actions only.
        return False

    def has_retry_permission(self, request, obj=None):
        return request.user.has_perm("jobs.retry_task")

    def has_cancel_permission(self, request, obj=None):
        return request.user.has_perm("jobs.cancel_task")

    # Changelist --------------------------------------------------------------------------------

    def changelist_view(self, request, extra_context=None):
        # The rows' states and progress update in place (jobs.admin.live, jobs/admin/live.js).
        extra_context = {"live_interval": dashboard.live_interval_ms(), **(extra_context or {})}
        return super().changelist_view(request, extra_context)

    def get_changelist(self, request, **kwargs):
        return TaskChangeList

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        match = request.resolver_match
        if match and match.url_name == "jobs_task_changelist":
            queryset = queryset.defer(*HEAVY_FIELDS)
        return queryset

    def get_search_results(self, request, queryset, search_term):
        # Each lookup can use an index (the primary key, the name index, the idempotency
        # constraint); only the summary needs a scan, cut short by the page's LIMIT.
        term = self.bounded_search_term(request, search_term).strip()
        if not term:
            return queryset, False
        try:
            return queryset.filter(pk=uuid.UUID(term)), False
        except ValueError:
            pass
        users = get_user_model()
        owners = users._default_manager.filter(**{users.USERNAME_FIELD: term}).values("pk")
        found = (
            Q(name__startswith=term)
            | Q(name__endswith=f".{term}")  # the function's name: what a person remembers
            | Q(idempotency_key=term)
            | Q(summary__icontains=term)
            | Q(owner__in=owners)
        )
        return queryset.filter(found), False

    @admin.display(description="name", ordering="name")
    def name_display(self, task):
        # The function's name, the dotted path on hover (and on the task's page): a column of
        # "demo_project.demo.tasks." repeated left no room for the rest at 1,280 px.
        return format_html('<span title="{}">{}</span>', task.name, task.name.rpartition(".")[2])

    @admin.display(description="summary")
    def summary_display(self, task):
        # Cut, with the whole of it on hover: a long summary must not widen the list.
        return display.cut(task.summary, SUMMARY_SHOWN)

    @admin.display(description="status", ordering="status")
    def status_badge(self, task):
        return display.status_badge(
            task.status,
            cancel_requested=bool(task.cancel_requested_at),
            note=display.status_note(task),
        )

    @admin.display(description="waiting")
    def waiting_display(self, task):
        # jobs.metrics.waiting's lines, each escaped: a key is whatever the enqueuing code gave.
        waiting = waiting_reasons.why_waiting(task)
        if waiting is None:
            return "—"
        lines = waiting_reasons.operator_lines(waiting)
        return format_html_join("", "<div>{}</div>", ((line,) for line in lines))

    @admin.display(description="workflow")
    def workflow_display(self, task):
        return workflows.workflow_link(task)

    @admin.display(description="waits for")
    def waits_for_display(self, task):
        return workflows.waits_for_display(task)

    @admin.display(description="attempts")
    def attempts_display(self, task):
        return f"{task.attempts}/{task.max_attempts}"

    @admin.display(description="progress")
    def progress_display(self, task):
        return display.cut(display.progress_text(task), PROGRESS_SHOWN)

    @admin.display(description="age", ordering="created_at")
    def age(self, task):
        return seconds_text((timezone.now() - task.created_at).total_seconds())

    @admin.display(description="run time")
    def run_time(self, task):
        if not task.started_at:
            return "—"
        end = task.finished_at or (timezone.now() if task.status == states.Status.RUNNING else None)
        return seconds_text((end - task.started_at).total_seconds()) if end else "—"

    @admin.display(description="timings")
    def timings(self, task):
        wait = None
        if task.started_at:
            wait = (task.started_at - task.run_after).total_seconds()
        return display.timings(task, wait=seconds_text(wait), run=self.run_time(task))

    @admin.display(description="steps")
    def steps_pretty(self, task):
        # The latest steps only: a long import records thousands.
        latest = task.recorded_steps.order_by("-id").values_list("name", "result")[:50]
        steps = dict(reversed(latest))
        return display.pretty_json(steps) if steps else "—"

    @admin.display(description="error history")
    def error_history(self, task):
        return display.error_history(task.error_details)

    @admin.display(description="payload")
    def payload_pretty(self, task):
        return display.pretty_json(task.payload)

    @admin.display(description="result")
    def result_pretty(self, task):
        return display.pretty_json(task.result)

    # Actions -----------------------------------------------------------------------------------

    @admin.action(permissions=["retry"], description="Retry selected tasks (failed or cancelled)")
    def retry_tasks(self, request, queryset):
        return self._run(request, queryset, "retry_tasks", actions.retry, "Retry tasks")

    @admin.action(permissions=["cancel"], description="Cancel selected tasks")
    def cancel_tasks(self, request, queryset):
        cancel = functools.partial(actions.cancel, by=request.user)
        return self._run(request, queryset, "cancel_tasks", cancel, "Cancel tasks")

    # Making a waiting task due now is the retry permission's: both make a task run sooner.
    @admin.action(permissions=["retry"], description="Run selected waiting tasks now")
    def run_now_tasks(self, request, queryset):
        return self._run(request, queryset, "run_now_tasks", actions.run_now, "Run tasks now")

    def _run(self, request, queryset, name, act, label):
        """Act on the ticked rows, or on "select all"; past the exact count, confirm first.

        Django checks the action's permission (and the view permission, and CSRF) on every
        POST, the confirmation's included: the page grants nothing by itself.
        """
        counted = select_all.confirmed_count(request, name)
        if counted is not None and request.POST.get("select_across") == "1":
            self._report(request, select_all.act_on_counted(act, queryset, *counted))
        elif select_all.beyond_the_count(request, queryset):
            verbs = {actions.retry: "requeued", actions.run_now: actions.RUN_NOW}
            verb = verbs.get(act, "cancelled")  # not a status: a verb
            return select_all.confirmation_page(self, request, queryset, name, verb, label)
        else:
            self._report(request, act(queryset))
        return None

    def _report(self, request, report):
        level = messages.SUCCESS if report.done or report.requested else messages.WARNING
        self.message_user(request, report.message(), level)

    # Detail page buttons and extra pages -------------------------------------------------------

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("dashboard/", view(self.dashboard_view), name="jobs_task_dashboard"),
            path(
                "dashboard/live/",
                live.view(self, live.dashboard_figures),
                name="jobs_task_live_dashboard",
            ),
            path("live/", live.view(self, live.task_rows), name="jobs_task_live"),
            path(
                "<path:object_id>/live/", live.view(self, live.one_task), name="jobs_task_live_one"
            ),
            path("dashboard/pause/", view(self.pause_view), name="jobs_task_pause"),
            path("dashboard/pause-type/", view(self.pause_type_view), name="jobs_task_pause_type"),
            path("errors/", view(self.errors_view), name="jobs_task_errors"),
            path("task-type/", view(self.task_type_view), name="jobs_task_type"),
            path("<path:object_id>/retry/", view(self.retry_view), name="jobs_task_retry"),
            path("<path:object_id>/cancel/", view(self.cancel_view), name="jobs_task_cancel"),
            path("<path:object_id>/run-now/", view(self.run_now_view), name="jobs_task_run_now"),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        task = self.get_object(request, unquote(object_id))
        extra_context = dict(extra_context or {})
        if task is not None:
            extra_context.update(self.offered_actions(request, task))
            # Every button the user may press is on the page, hidden while it cannot apply:
            # the live updates (jobs.admin.live) show it when the task's state lets it.
            extra_context["may_retry"] = self.has_retry_permission(request)
            extra_context["may_cancel"] = self.has_cancel_permission(request)
            extra_context["live_url"] = reverse("admin:jobs_task_live_one", args=[quote(task.pk)])
            extra_context["live_interval"] = dashboard.live_interval_ms()
            extra_context["can_pause_type"] = request.user.has_perm(PAUSE_TYPES)
            extra_context["type_paused"] = TaskPause.objects.filter(name=task.name).exists()
        return super().change_view(request, object_id, form_url, extra_context)

    def offered_actions(self, request, task) -> dict[str, bool]:
        """Return which of the task page's buttons apply to ``task`` now, for this user."""
        return {
            "can_retry": task.status in states.REQUEUE.sources
            and self.has_retry_permission(request),
            "can_cancel": self.has_cancel_permission(request)
            and (
                # Waiting: cancelled at once, even if a stop was asked of an earlier attempt.
                task.status in states.CANCEL.sources
                or (task.status in states.CANCEL_RUNNING.sources and not task.cancel_requested_at)
            ),
            "can_run_now": task.status in states.CLAIM.sources
            and task.run_after > timezone.now()
            and self.has_retry_permission(request),
        }

    def retry_view(self, request, object_id):
        return self._act_on_one(request, object_id, self.has_retry_permission, actions.retry)

    def cancel_view(self, request, object_id):
        cancel = functools.partial(actions.cancel, by=request.user)
        return self._act_on_one(request, object_id, self.has_cancel_permission, cancel)

    def run_now_view(self, request, object_id):
        return self._act_on_one(request, object_id, self.has_retry_permission, actions.run_now)

    def _act_on_one(self, request, object_id, allowed, action):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        # As for the bulk actions, which live on the changelist: acting needs seeing too.
        if not (self.has_view_permission(request) and allowed(request)):
            raise PermissionDenied
        task = self.get_object(request, unquote(object_id))
        if task is None:
            return self._missing(request, object_id)
        self._report(request, action(Task.objects.filter(pk=task.pk)))
        return redirect(reverse("admin:jobs_task_change", args=[quote(task.pk)]))

    def _missing(self, request, object_id):
        """Warn and go to the admin's index, as its change page does for a deleted object.

        Django's own ``_get_obj_does_not_exist_redirect`` is private and this path is not hot:
        the same message (Django's translation of it) through public calls instead.
        """
        # Django's msgid, character for character, so that its catalogues translate it.
        message = gettext("%(name)s with ID “%(key)s” doesn’t exist. Perhaps it was deleted?")  # noqa: RUF001
        name, key = self.opts.verbose_name, unquote(object_id)
        self.message_user(request, message % {"name": name, "key": key}, messages.WARNING)
        return redirect(reverse("admin:index", current_app=self.admin_site.name))

    def dashboard_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Queue dashboard",
            # A console of wide tables: the whole width, as at 1,280 px the sidebar left the
            # queue table 300 px short (the breadcrumbs still lead back).
            "is_nav_sidebar_enabled": False,
            "can_pause": request.user.has_perm("jobs.pause_queue"),
            "can_pause_types": request.user.has_perm(PAUSE_TYPES),
        }
        return dashboard.render_dashboard(request, context)

    def errors_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {**self.admin_site.each_context(request), "opts": self.opts, "title": "Errors"}
        return errors.render_errors(request, context)

    def task_type_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {**self.admin_site.each_context(request), "opts": self.opts}
        return history.render_task_type(request, context)

    def pause_view(self, request):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not request.user.has_perm("jobs.pause_queue"):
            raise PermissionDenied
        text, level = dashboard.pause_or_resume(request)
        self.message_user(request, text, level)
        return redirect(reverse("admin:jobs_task_dashboard"))

    def pause_type_view(self, request):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not request.user.has_perm(PAUSE_TYPES):
            raise PermissionDenied
        text, level = dashboard.pause_or_resume_task_type(request)
        self.message_user(request, text, level)
        return redirect(dashboard.way_back(request))
