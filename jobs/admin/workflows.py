"""The workflow admin: a chain or batch, its members and their states, what each waits for, its
callbacks; cancel and retry (its failed members) as a whole, behind the task actions'
permissions (``cancel_task``, ``retry_task``). Reading one needs ``view_task``: its members are
tasks. Progress is ``jobs.workflows.progress``'s; the writes are ``jobs.workflows.api``'s."""

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseNotAllowed
from django.shortcuts import redirect
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext, ngettext

from jobs.admin import display
from jobs.models import Task, TaskDependency, Workflow
from jobs.states import TERMINAL
from jobs.workflows import api
from jobs.workflows.progress import MEMBER
from jobs.workflows.progress import progress as count_progress

MEMBERS_SHOWN = 500  # rows of the members table; the progress counts them all


def waits_for(task: Task) -> list[str]:
    """The dependencies of ``task`` that have not finished, as "name (status)" lines."""
    edges = TaskDependency.objects.filter(task=task).select_related("depends_on")
    return [
        f"{edge.depends_on.name.rpartition('.')[2]} {edge.depends_on_id} ({edge.depends_on.status})"
        for edge in edges.order_by("pk")[:20]
        if edge.depends_on.status not in TERMINAL
    ]


def workflow_link(task: Task):
    """The task page's line for a member or callback: its workflow, linked, and its role."""
    if task.workflow_id is None:
        return "—"
    url = reverse("admin:jobs_workflow_change", args=[task.workflow_id])
    return format_html('<a href="{}">{}</a> ({})', url, task.workflow, task.workflow_role)


def waits_for_display(task: Task):
    lines = waits_for(task)
    if not lines:
        return "—"
    return format_html_join("", "<div>{}</div>", ((line,) for line in lines))


def _rows(tasks):
    return format_html_join(
        "",
        '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
        (
            (
                reverse("admin:jobs_task_change", args=[task.pk]),
                task.name.rpartition(".")[2],
                task.workflow_role,
                display.status_badge(task.status),
                display.cut(task.summary or task.last_error, 80),
                format_html_join("", "<div>{}</div>", ((line,) for line in waits_for(task))) or "—",
            )
            for task in tasks
        ),
    )


class WorkflowAdmin(admin.ModelAdmin):
    list_display = ["__str__", "kind", "status", "progress_text", "owner", "created_at"]
    list_filter = ["status", "kind"]
    list_select_related = ["owner"]
    actions = ["cancel_workflows", "retry_workflows"]
    SHOWN = ["id", "kind", "status", "summary", "owner", "progress_text", "created_at",
             "finished_at", "members_table", "callbacks_table"]  # fmt: skip
    fields = tuple(SHOWN)
    readonly_fields = tuple(SHOWN)

    class Media:
        css = {"all": ["jobs/admin/jobs.css"]}

    def has_view_permission(self, request, obj=None):
        return request.user.has_perm("jobs.view_task")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_retry_permission(self, request, obj=None):
        return request.user.has_perm("jobs.retry_task")

    def has_cancel_permission(self, request, obj=None):
        return request.user.has_perm("jobs.cancel_task")

    # The page's buttons: each action on this one workflow, a POST behind its permission.

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("<path:object_id>/cancel/", view(self.cancel_view), name="jobs_workflow_cancel"),
            path("<path:object_id>/retry/", view(self.retry_view), name="jobs_workflow_retry"),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        workflow = self.get_object(request, unquote(object_id))
        extra_context = dict(extra_context or {})
        if workflow is not None:
            counted = count_progress(workflow)
            extra_context["can_cancel"] = (
                workflow.status == Workflow.State.RUNNING and self.has_cancel_permission(request)
            )
            extra_context["can_retry"] = (
                workflow.status in (Workflow.State.FAILED, Workflow.State.CANCELLED)
                and bool(counted.failed or counted.cancelled)
                and self.has_retry_permission(request)
            )
        return super().change_view(request, object_id, form_url, extra_context)

    def cancel_view(self, request, object_id):
        return self._act_on_one(request, object_id, self.has_cancel_permission, "cancel_workflows")

    def retry_view(self, request, object_id):
        return self._act_on_one(request, object_id, self.has_retry_permission, "retry_workflows")

    def _act_on_one(self, request, object_id, allowed, action):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not (self.has_view_permission(request) and allowed(request)):
            raise PermissionDenied  # as the bulk actions: acting needs seeing too
        workflow = self.get_object(request, unquote(object_id))
        if workflow is None:
            # Django's msgid, as the task page's buttons say it (jobs.admin.tasks._missing).
            text = gettext("%(name)s with ID “%(key)s” doesn’t exist. Perhaps it was deleted?")  # noqa: RUF001
            key = unquote(object_id)
            self.message_user(
                request, text % {"name": self.opts.verbose_name, "key": key}, messages.WARNING
            )
            return redirect(reverse("admin:index", current_app=self.admin_site.name))
        getattr(self, action)(request, Workflow.objects.filter(pk=workflow.pk))
        return redirect(reverse("admin:jobs_workflow_change", args=[quote(workflow.pk)]))

    @admin.display(description="progress")
    def progress_text(self, workflow):
        return count_progress(workflow).text

    @admin.display(description="members")
    def members_table(self, workflow):
        members = Task.objects.filter(workflow=workflow, workflow_role=MEMBER)
        members = members.order_by("created_at", "pk")[:MEMBERS_SHOWN]
        return self._table(members)

    @admin.display(description="callbacks")
    def callbacks_table(self, workflow):
        callbacks = Task.objects.filter(workflow=workflow).exclude(workflow_role=MEMBER)
        return self._table(callbacks.order_by("workflow_role")) if callbacks.exists() else "—"

    def _table(self, tasks):
        head = (
            "<tr><th>task</th><th>role</th><th>status</th><th>summary or error</th>"
            "<th>waits for</th></tr>"
        )
        return format_html("<table>{}{}</table>", mark_safe(head), _rows(tasks))

    @admin.action(permissions=["cancel"], description="Cancel selected workflows as a whole")
    def cancel_workflows(self, request, queryset):
        running = queryset.filter(status=Workflow.State.RUNNING)
        done = cancelled = 0
        for workflow in running:
            try:
                counts = api.cancel_workflow(workflow, by=request.user)
            except Workflow.DoesNotExist:  # pruned since the page was drawn: nothing to cancel
                continue
            done, cancelled = done + 1, cancelled + counts.cancelled + counts.requested
        skipped = queryset.count() - done
        text = ngettext(
            "%(done)s workflow cancelled (%(tasks)s)",
            "%(done)s workflows cancelled (%(tasks)s)",
            done,
        ) % {"done": f"{done:,}", "tasks": _count(cancelled, "task", "tasks")}
        self.message_user(request, text + _skipped(skipped, "already finished"))

    @admin.action(
        permissions=["retry"], description="Retry the failed members of selected workflows"
    )
    def retry_workflows(self, request, queryset):
        finished = queryset.exclude(status__in=[Workflow.State.RUNNING, Workflow.State.SUCCEEDED])
        done = retried = 0
        for workflow in finished:
            try:
                n = api.retry_workflow(workflow)
            except Workflow.DoesNotExist:  # pruned since the page was drawn: nothing to retry
                continue
            done, retried = done + (1 if n else 0), retried + n
        skipped = queryset.count() - done
        text = ngettext(
            "%(tasks)s of %(done)s workflow requeued",
            "%(tasks)s of %(done)s workflows requeued",
            done,
        ) % {"done": f"{done:,}", "tasks": _count(retried, "task", "tasks")}
        self.message_user(request, text + _skipped(skipped, "nothing failed"))


def _count(n: int, singular: str, plural: str) -> str:
    """Say ``n`` things: "1 task", "2 tasks" (``ngettext``, so a translation can say it too)."""
    return f"{n:,} {ngettext(singular, plural, n)}"


def _skipped(n: int, reason: str) -> str:
    return f"; {n:,} skipped: {reason}" if n else ""
