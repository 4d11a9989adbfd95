"""Tasks the test suite enqueues and runs in real worker processes."""

from jobs import PermanentError, TransientError, task
from tests.testapp.models import SideEffect


class FlakyServiceError(Exception):
    """Declared transient by ``declared_transient``."""


@task
def add(a, b):
    return a + b


@task
def record_effect(key):
    SideEffect.objects.create(key=key)
    return key


@task(max_attempts=3)
def fail_until_attempt(key, succeed_on):
    """Raise a connection error until attempt ``succeed_on``, counting attempts as effects."""
    SideEffect.objects.create(key=key)
    if SideEffect.objects.filter(key=key).count() < succeed_on:
        raise ConnectionRefusedError("connection refused by the mail server")
    return "ok"


@task(max_attempts=5)
def always_transient():
    raise TransientError("The mail server is unavailable; we will retry.")


@task(max_attempts=5)
def bad_file():
    raise PermanentError("Unsupported file format: please upload a CSV", detail="got image/png")


@task(max_attempts=5)
def buggy():
    return {}["missing"]


@task(max_attempts=3, transient=(FlakyServiceError,))
def declared_transient():
    raise FlakyServiceError("flaky")


@task
def returns_not_json():
    return object()


@task(priority=5, queue="priority")
def on_priority_queue(key):
    SideEffect.objects.create(key=key)


@task
def backend_pid(n):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]
