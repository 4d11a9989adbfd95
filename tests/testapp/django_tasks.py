"""Functions decorated with Django's own task decorator, stored and run by jobs."""

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task()
def multiply(a, b):
    return a * b


@task(takes_context=True)
def which_attempt(context):
    return context.attempt


@task()
def explode():
    raise ValueError("boom")
