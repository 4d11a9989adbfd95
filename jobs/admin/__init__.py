"""The Django admin of jobs: tasks (list, detail, retry and cancel) and the queue dashboard."""

from django.contrib import admin

from jobs.admin.tasks import TaskAdmin
from jobs.models import Task

admin.site.register(Task, TaskAdmin)

__all__ = ["TaskAdmin"]
