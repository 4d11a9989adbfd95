"""The Django admin of jobs: tasks (list, detail, retry and cancel) and the queue dashboard."""

from django.apps import apps
from django.contrib import admin

from jobs.admin.tasks import TaskAdmin
from jobs.admin.workflows import WorkflowAdmin
from jobs.models import Task, Workflow

# Only where the admin is installed (admin.site does not exist without it); the admin's
# autodiscovery imports this module, and nothing else of jobs needs it.
if apps.is_installed("django.contrib.admin"):
    admin.site.register(Task, TaskAdmin)
    admin.site.register(Workflow, WorkflowAdmin)

__all__ = ["TaskAdmin", "WorkflowAdmin"]
