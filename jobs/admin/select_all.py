"""“Select all” beyond the list's exact count: count exactly, confirm, act on what was counted.

Past EXACT_COUNT_LIMIT the list shows a capped (SQLite) or estimated (PostgreSQL) count, so its
"Select all N tasks" names a number nobody counted. Such an action does not run at once: it
counts the tasks matching the list's filters exactly, at that moment, and shows a confirmation
page (as Django's delete action does) with that number, how many the action applies to and why
it would skip the others. Confirming acts on the set that was counted, not on the filter again:

- the moment of the count travels with the form, signed together with the action and the
  list's filters (a tampered or mismatched form is counted and confirmed again), and
- the set is pinned to that moment: tasks created before it and unchanged since
  (``updated_at``; a task running since before it is the task counted, whatever progress it
  reported meanwhile).

Tasks created after the count are never acted on; tasks that changed in between (claimed,
finished, requeued by someone else) are skipped and reported as "changed since the count".
Counting and acting both walk the set once (a grouped COUNT, then chunks of ids), never
loading it into memory.
"""

from datetime import datetime

from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core import signing
from django.db.models import Q
from django.template.response import TemplateResponse
from django.utils import timezone

from jobs.admin import actions, paginator
from jobs.states import Status

SALT = "jobs.admin.select_all"
COUNTED_FIELD = "jobs_counted"  # the signed count, posted back by the confirmation page
CHANGED = "changed since the count"


def beyond_the_count(request, queryset) -> bool:
    """Whether this is "select all" over more tasks than the list counts exactly."""
    if request.POST.get("select_across") != "1":
        return False  # ticked rows: exactly the ids posted
    limit = paginator.EXACT_COUNT_LIMIT
    return queryset.order_by()[: limit + 1].count() > limit


def confirmed_count(request, action: str) -> tuple[datetime, int] | None:
    """Return the (moment, number) of the count this POST confirms, if it is a valid one."""
    token = request.POST.get(COUNTED_FIELD)
    if not token or request.POST.get("post") != "yes":
        return None
    try:
        counted = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return None
    if counted.get("action") != action or counted.get("filters") != request.GET.urlencode():
        return None  # signed for another action or list: count again
    return datetime.fromisoformat(counted["at"]), counted["n"]


def counted_set(queryset, at: datetime):
    """The tasks of ``queryset`` as they were at ``at``: created before it, unchanged since."""
    unchanged = Q(updated_at__lte=at) | Q(status=Status.RUNNING, started_at__lte=at)
    return queryset.filter(unchanged, created_at__lte=at)


def confirmation_page(modeladmin, request, queryset, action: str, verb: str, label: str):
    """Count the filter's tasks exactly, now, and ask to confirm acting on exactly those."""
    # The moment is taken before counting: a task written after it is in neither the count nor
    # the action, so the two agree whatever happens while the count runs.
    at = timezone.now()
    preview = actions.plan(verb, counted_set(queryset, at))
    total = preview.done + preview.requested + preview.skipped_count
    token = signing.dumps(
        {"at": at.isoformat(), "n": total, "action": action, "filters": request.GET.urlencode()},
        salt=SALT,
    )
    opts = modeladmin.model._meta
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": f"{label}: are you sure?",
        "label": label,
        "opts": opts,
        "media": modeladmin.media,
        "action": action,
        "total": total,
        "total_text": f"{total:,}",
        "plan": plan_lines(preview),
        "limit": f"{paginator.EXACT_COUNT_LIMIT:,}",
        "counted_field": COUNTED_FIELD,
        "token": token,
        "action_checkbox_name": ACTION_CHECKBOX_NAME,
        # Django's changelist runs an action only when some row is posted; with "select all"
        # the row itself is ignored.
        "selected": request.POST.getlist(ACTION_CHECKBOX_NAME)[:1],
    }
    request.current_app = modeladmin.admin_site.name
    return TemplateResponse(request, "admin/jobs/task/confirm_select_all.html", context)


def plan_lines(preview: actions.ActionReport) -> list[str]:
    """Say what the action will do, a line per outcome: "19,988 will be cancelled", …"""
    lines = [f"{preview.done:,} will be {preview.verb}"]
    if preview.requested:
        lines.append(f"{preview.requested:,} running will be asked to stop")
    ordered = sorted(preview.skipped.items(), key=lambda item: (-item[1], item[0]))
    lines.extend(f"{n:,} will be skipped: {reason}" for reason, n in ordered)
    return lines


def act_on_counted(act, queryset, at: datetime, counted: int) -> actions.ActionReport:
    """Run ``act`` on the set counted at ``at``; report the tasks changed since as skipped."""
    report = act(counted_set(queryset, at))
    changed = counted - report.done - report.requested - report.skipped_count
    if changed <= 0:
        return report
    skipped = {**report.skipped, CHANGED: report.skipped.get(CHANGED, 0) + changed}
    return actions.ActionReport(
        done=report.done, verb=report.verb, requested=report.requested, skipped=skipped
    )
