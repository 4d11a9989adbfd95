"""Telling owners their long task is done: one hook on ``jobs.signals.task_finished``.

No task contains notification code: the worker sends ``task_finished`` once the outcome is
committed, and this receiver leaves a message for the owner's next page (and, for imports, an
e-mail).
"""

from django.contrib import messages
from django.core.mail import send_mail
from django.utils import timezone

from demo_project.demo.models import Notification
from jobs.views import status_text

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
    what = task.summary or f"Your {kind}"
    text = f"{what} {VERBS.get(status, status)}: {status_text(task)}"
    Notification.objects.create(user_id=task.owner_id, text=text, succeeded=status == "succeeded")
    owner = task.owner
    if kind == "import" and owner is not None and owner.email:
        send_mail(
            subject=f"{what} {VERBS.get(status, status)}",
            message=f"Hello {owner.get_username()},\n\n{text}\n",
            from_email=None,
            recipient_list=[owner.email],
        )


class NotificationMiddleware:
    """Turn the user's unread notifications into messages on the next page they open."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        # Only pages: the status JSON polled every 2 seconds must not swallow the messages.
        wants_page = request.method == "GET" and not request.path.startswith(("/jobs/", "/static/"))
        if wants_page and user is not None and user.is_authenticated:
            unread = list(Notification.objects.filter(user=user, shown_at__isnull=True))
            for note in unread:
                level = messages.SUCCESS if note.succeeded else messages.WARNING
                messages.add_message(request, level, note.text, fail_silently=True)
            if unread:
                Notification.objects.filter(pk__in=[n.pk for n in unread]).update(
                    shown_at=timezone.now()
                )
        return self.get_response(request)
