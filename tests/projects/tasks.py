"""Tasks of the minimal projects: one of jobs' own, one of Django's Tasks framework."""

from jobs import task

try:
    from django.tasks import task as django_task
except ImportError:
    from django_tasks import task as django_task


@task
def add(a, b):
    return a + b


@django_task()
def multiply(a, b):
    return a * b
