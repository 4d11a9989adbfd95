"""A task declared with Django's own @task, as a project using django.tasks writes it."""

try:
    from django.tasks import task  # Django >= 6.0
except ImportError:
    from django_tasks import task  # Django 5.2 with the django-tasks backport


@task
def add(a, b):
    return {"sum": a + b}
