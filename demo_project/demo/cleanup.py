"""Deleting the demo's uploads and reports once they are older than DEMO_FILES_KEEP_SECONDS.

Files of tasks not finished yet (an import still waiting, running or retrying; a report whose
task has not ended) are kept whatever their age. Files in the storage folders that no row names
any more (a report written by an attempt whose transaction rolled back) go by age too.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.core.files.storage import default_storage
from django.utils import timezone

from demo_project.demo.models import Report, Upload
from jobs.models import Task
from jobs.states import TERMINAL

logger = logging.getLogger(__name__)

FOLDERS = ("uploads", "reports")


def clean_up_files(*, now=None, keep_seconds=None) -> dict:
    """Delete old uploads and reports, rows and files; return how many of each went."""
    now = now or timezone.now()
    if keep_seconds is None:
        keep_seconds = settings.DEMO_FILES_KEEP_SECONDS
    cutoff = now - timedelta(seconds=keep_seconds)
    from demo_project.demo.tasks import import_contacts  # tasks.py imports this module

    unfinished = Task.objects.exclude(status__in=sorted(TERMINAL))
    busy_uploads = {
        payload["args"][0]
        for payload in unfinished.filter(name=import_contacts.name).values_list(
            "payload", flat=True
        )
        if payload.get("args")
    }
    busy_reports = set(unfinished.values_list("pk", flat=True))
    deleted = {"uploads": 0, "reports": 0, "orphans": 0}
    for upload in Upload.objects.filter(created_at__lt=cutoff).exclude(pk__in=busy_uploads):
        upload.file.delete(save=False)
        upload.delete()
        deleted["uploads"] += 1
    old_reports = Report.objects.filter(created_at__lt=cutoff).exclude(task_id__in=busy_reports)
    for report in old_reports:
        report.file.delete(save=False)
        report.delete()
        deleted["reports"] += 1
    deleted["orphans"] = _delete_orphans(cutoff)
    logger.info("demo files cleaned up %s", " ".join(f"{k}={v}" for k, v in deleted.items()))
    return deleted


def _delete_orphans(cutoff) -> int:
    """Delete files older than ``cutoff`` that no upload or report names."""
    named = set(Upload.objects.values_list("file", flat=True))
    named |= set(Report.objects.values_list("file", flat=True))
    deleted = 0
    for folder in FOLDERS:
        if not default_storage.exists(folder):
            continue
        for filename in default_storage.listdir(folder)[1]:
            name = f"{folder}/{filename}"
            if name not in named and default_storage.get_modified_time(name) < cutoff:
                default_storage.delete(name)
                deleted += 1
    return deleted
