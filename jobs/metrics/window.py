"""The time window the windowed metrics read, shared by the metrics modules."""

from datetime import timedelta

from django.db.models import F, Q
from django.utils import timezone

from jobs.conf import jobs_settings
from jobs.models import Task
from jobs.states import Status


def now_or_current(now):
    return now or timezone.now()


def as_window(window) -> timedelta:
    if window is None:
        return timedelta(seconds=jobs_settings.METRICS_WINDOW_SECONDS)
    return window if isinstance(window, timedelta) else timedelta(seconds=window)


def finished_in(now, window):
    return Task.objects.finished().filter(finished_at__gte=now - window, finished_at__lte=now)


# An attempt that ran to its end: the rows whose run and wait times count (``ran_in``).
RAN = Q(
    status__in=[Status.SUCCEEDED, Status.FAILED],
    started_at__isnull=False,
    started_at__gte=F("run_after"),
)


def ran_in(now, window):
    """Tasks whose last attempt ran to its end in the window: succeeded or failed, started at or
    after they were due. A cancelled task is left out (a task requeued, then cancelled while it
    waited, keeps the start of its earlier attempt: it would count as a long run with a negative
    wait), and so is any row whose start precedes its due time."""
    return finished_in(now, window).filter(RAN)
