"""The Django admin of jobs: tasks (list, detail, retry and cancel) and the queue dashboard."""

from django.apps import apps
from django.contrib import admin

from jobs.admin.tasks import TaskAdmin
from jobs.models import Task

# Only where the admin is installed (admin.site does not exist without it); the admin's
# autodiscovery imports this module, and nothing else of jobs needs it.
if apps.is_installed("django.contrib.admin"):
    admin.site.register(Task, TaskAdmin)

__all__ = ["TaskAdmin"]
