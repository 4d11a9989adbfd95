"""Telling owners their long task is done: one hook on ``jobs.signals.task_finished``.

No task contains notification code: the worker sends ``task_finished`` once the outcome is
committed, and this receiver leaves a message for the owner's next page (and, for imports, an
e-mail). The middleware shows them grouped: many of a kind make one banner with their count.
"""

from django.contrib import messages
from django.core.mail import send_mail
from django.db.models import Count, Q
from django.utils import timezone

from demo_project.demo.models import Notification
from jobs.web.views import status_text
from jobs.workflows.progress import MEMBER

# The demo's long tasks, and what a person calls them.
LONG_TASKS = {
    "demo_project.demo.tasks.import_contacts": "import",
    "demo_project.demo.tasks.build_report": "report",
    "demo_project.demo.tasks.send_invites": "invitations",
    "demo_project.demo.tasks.count_primes": "prime count",
}
VERBS = {"succeeded": "is done", "failed": "failed", "cancelled": "was cancelled"}


def notify_owner(sender, task, status, **kwargs):
    """Leave the owner a message about their finished long task; e-mail them about imports."""
    kind = LONG_TASKS.get(task.name)
    if kind is None or task.owner_id is None:
        return
    if task.workflow_id is not None and task.workflow_role == MEMBER:
        return  # one file of several: the batch's callback tells the owner once (demo.batches)
    what = task.summary or f"Your {kind}"
    text = notification_text(what, status, status_text(task))
    Notification.objects.create(
        user_id=task.owner_id,
        text=text,
        succeeded=status == "succeeded",
        cancelled=status == "cancelled",
    )
    if kind != "import":
        return  # no need to read the owner: a bulk cancel of reports is one INSERT per task
    owner = task.owner
    if owner is not None and owner.email:
        send_mail(
            subject=f"{what} {VERBS.get(status, status)}",
            message=f"Hello {owner.get_username()},\n\n{text}\n",
            from_email=None,
            recipient_list=[owner.email],
        )


def notification_text(what: str, status: str, detail: str) -> str:
    """ "Report A is done.", "Report B failed: <why>.", "Report C was cancelled by ops.": the
    status line only where it says more than the verb ("Done." and "Cancelled." do not)."""
    verb = VERBS.get(status, status)
    if detail in ("Done.", "Cancelled."):
        return f"{what} {verb}."
    if status == "cancelled" and detail.startswith("Cancelled by "):
        return f"{what} {verb}{detail.removeprefix('Cancelled')}"
    return f"{what} {verb}: {detail}"


# More unread notifications of one kind than this become one summary banner ("20,000 tasks
# cancelled"): a bulk action in the admin must not bury the owner's next page.
SHOWN_ONE_BY_ONE = 3
KINDS = [
    # (kind, which unread notifications, level, summary)
    ("done", Q(succeeded=True), messages.SUCCESS, "{n} tasks done"),
    (
        "cancelled",
        Q(cancelled=True),
        messages.WARNING,
        "{n} tasks cancelled",
    ),
    (
        "failed",
        Q(succeeded=False, cancelled=False),
        messages.WARNING,
        "{n} tasks failed: see My tasks for what went wrong",
    ),
]


def show_unread(request, user, *, now=None):
    """Add the user's unread notifications to ``request``'s messages, grouped by kind.

    A few of a kind are shown as they are; more become one summary with the count. Each kind
    costs one count and at most SHOWN_ONE_BY_ONE rows, however many are unread.
    """
    unread = Notification.objects.filter(user=user, shown_at__isnull=True)
    newest = unread.order_by("-pk").values_list("pk", flat=True).first()
    if newest is None:
        return
    # Only what exists now: a notification written meanwhile waits for the next page.
    unread = unread.filter(pk__lte=newest)
    # Named apart from the fields: an aggregate called "cancelled" would shadow the column.
    counts = unread.aggregate(
        **{f"{kind}_count": Count("pk", filter=which) for kind, which, *_ in KINDS}
    )
    for kind, which, level, summary in KINDS:
        n = counts[f"{kind}_count"]
        if n > SHOWN_ONE_BY_ONE:
            messages.add_message(request, level, summary.format(n=f"{n:,}"), fail_silently=True)
        elif n:
            for text in unread.filter(which).order_by("pk").values_list("text", flat=True):
                messages.add_message(request, level, text, fail_silently=True)
    unread.update(shown_at=now or timezone.now())


class NotificationMiddleware:
    """Turn the user's unread notifications into messages on the next page they open."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        # Only pages: the status JSON polled every 2 seconds, and the admin's live figures
        # (jobs.admin.live, asked for as JSON), must not swallow the messages.
        wants_page = (
            request.method == "GET"
            and not request.path.startswith(("/jobs/", "/static/"))
            and "application/json" not in request.headers.get("Accept", "")
        )
        if wants_page and user is not None and user.is_authenticated:
            show_unread(request, user)
        return self.get_response(request)
