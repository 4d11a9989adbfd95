"""Admin of workers: who serves which queues, what each runs now, and "stop after current tasks".

The rows are the workers' own (``jobs.models.Worker``, written at each heartbeat): the list
shows the live ones and those that stopped or fell silent within ``RECENT``, read-only. "Stop
after current tasks" (``jobs.stop_worker``) sets ``stop_requested_at`` on the row; the worker
reads it at its next heartbeat (``jobs.worker.leases``), claims nothing more, finishes what it
runs (timeouts still enforced) and exits 0, as after SIGTERM but with no grace deadline. A
worker that is not alive, or was asked already, is skipped and said so.
"""

from datetime import timedelta

from django.apps import apps
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from jobs.admin.display import EMPTY, FullWidthChangeList
from jobs.admin.inputs import HostileInputAdmin
from jobs.conf import jobs_settings
from jobs.humanize import moment_text, seconds_text
from jobs.models import Task, Worker

RECENT = timedelta(days=1)  # stopped or silent workers listed for this long
TASKS_SHOWN = 10  # current tasks linked per worker; more are counted


def stop_after_current(queryset, *, by=None, now=None) -> tuple[int, dict[str, int]]:
    """Ask the live workers of ``queryset`` to stop after their current tasks.

    Return how many were asked and, by reason, how many were skipped. One guarded UPDATE: a
    worker asked twice at once is asked once.
    """
    now = now or timezone.now()
    selected = queryset.order_by()
    alive = Worker.objects.alive(now).filter(pk__in=selected.values("pk"))
    asked = alive.filter(stop_requested_at__isnull=True).update(
        stop_requested_at=now, stop_requested_by=by
    )
    skipped = {
        "already asked to stop": alive.filter(stop_requested_at__lt=now).count(),
        "not running (stopped or silent)": selected.exclude(pk__in=alive.values("pk")).count(),
    }
    return asked, {reason: n for reason, n in skipped.items() if n}


def stop_message(asked: int, skipped: dict[str, int]) -> str:
    """Say it in one line: "2 workers asked to stop after their current tasks; 1 skipped: …"."""
    text = f"{asked:,} worker{'' if asked == 1 else 's'} asked to stop after current tasks"
    if skipped:
        reasons = ", ".join(f"{n:,} {reason}" for reason, n in sorted(skipped.items()))
        if len(skipped) == 1:
            reasons = next(iter(skipped))
        text += f"; {sum(skipped.values()):,} skipped: {reasons}"
    return text


class WorkerChangeList(ChangeList):
    """The changelist, with the running tasks of the page's workers: one query for the page."""

    def get_results(self, request):
        super().get_results(request)
        ids = [worker.pk for worker in self.result_list]
        running: dict[str, list] = {}
        rows = Task.objects.running().filter(worker_id__in=ids).order_by("started_at")
        for task in rows.only("id", "name", "worker_id", "started_at"):
            running.setdefault(task.worker_id, []).append(task)
        for worker in self.result_list:
            worker.jobs_running = running.get(worker.pk, [])


class WorkerAdmin(FullWidthChangeList, HostileInputAdmin, admin.ModelAdmin):
    empty_value_display = EMPTY
    list_display = [
        "hostname",
        "pid",
        "state",
        "queues_display",
        "busy_display",
        "current_tasks",
        "heartbeat",
        "started",
    ]
    list_display_links = None  # nothing to edit: the row is the worker's
    search_fields = ["id", "hostname"]
    actions = ["stop_after_current_tasks"]
    list_per_page = 100
    show_facets = admin.ShowFacets.NEVER

    class Media:
        css = {"all": ["jobs/admin/jobs.css"]}

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # a worker writes its own row

    def has_delete_permission(self, request, obj=None):
        return False

    def has_stop_permission(self, request, obj=None):
        return request.user.has_perm("jobs.stop_worker")

    def get_changelist(self, request, **kwargs):
        return WorkerChangeList

    def get_queryset(self, request):
        recent = timezone.now() - RECENT
        # Live, stopped lately, or silent since lately (killed): the rest is history.
        shown = Q(stopped_at__isnull=True, last_heartbeat_at__gte=recent) | Q(
            stopped_at__gte=recent
        )
        return super().get_queryset(request).filter(shown).select_related("stop_requested_by")

    @admin.display(description="state")
    def state(self, worker):
        # As ``Worker.objects.alive`` decides, without a query per row.
        silent_since = timezone.now() - timedelta(seconds=jobs_settings.LEASE_SECONDS)
        if worker.stopped_at is not None:
            label, css = f"stopped {moment_text(worker.stopped_at)}", "muted"
        elif worker.last_heartbeat_at < silent_since:
            label, css = "silent (killed or unreachable)", "bad"
        elif worker.stop_requested_at is not None:
            by = worker.stop_requested_by
            label = "stopping after current tasks"
            if by is not None:
                label += f" (asked by {by.get_username()})"
            css = "waiting"
        else:
            label, css = "alive", "ok"
        return format_html('<span class="jobs-badge jobs-badge--{}">{}</span>', css, label)

    @admin.display(description="queues")
    def queues_display(self, worker):
        return ", ".join(worker.queues) if worker.queues else "all"

    @admin.display(description="busy / concurrency")
    def busy_display(self, worker):
        return f"{worker.busy_processes} / {worker.concurrency}"

    @admin.display(description="current tasks")
    def current_tasks(self, worker):
        tasks = getattr(worker, "jobs_running", [])
        if not tasks:
            return "—"
        links = format_html_join(
            ", ",
            '<a href="{}" title="{}">{}</a>',
            (
                (reverse("admin:jobs_task_change", args=[task.pk]), task.name,
                 task.name.rpartition(".")[2])
                for task in tasks[:TASKS_SHOWN]
            ),
        )  # fmt: skip
        more = len(tasks) - TASKS_SHOWN
        return format_html("{} and {} more", links, more) if more > 0 else links

    @admin.display(description="last heartbeat", ordering="last_heartbeat_at")
    def heartbeat(self, worker):
        ago = seconds_text((timezone.now() - worker.last_heartbeat_at).total_seconds())
        return format_html(
            '<span title="{}">{} ago</span>', moment_text(worker.last_heartbeat_at), ago
        )

    @admin.display(description="started", ordering="started_at")
    def started(self, worker):
        return moment_text(worker.started_at)

    @admin.action(permissions=["stop"], description="Stop after current tasks")
    def stop_after_current_tasks(self, request, queryset):
        asked, skipped = stop_after_current(queryset, by=request.user)
        level = messages.SUCCESS if asked else messages.WARNING
        self.message_user(request, stop_message(asked, skipped), level)


# Only where the admin is installed: admin.site does not exist without it.
if apps.is_installed("django.contrib.admin"):
    admin.site.register(Worker, WorkerAdmin)
