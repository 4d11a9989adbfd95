"""The time window the windowed metrics read, shared by the metrics modules."""

from datetime import timedelta

from django.utils import timezone

from jobs.conf import jobs_settings
from jobs.models import Task


def now_or_current(now):
    return now or timezone.now()


def as_window(window) -> timedelta:
    if window is None:
        return timedelta(seconds=jobs_settings.METRICS_WINDOW_SECONDS)
    return window if isinstance(window, timedelta) else timedelta(seconds=window)


def finished_in(now, window):
    return Task.objects.finished().filter(finished_at__gte=now - window, finished_at__lte=now)
