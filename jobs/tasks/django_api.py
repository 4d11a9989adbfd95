"""Django's task API, whichever line provides it: ``django.tasks`` (Django 6) or the
``django-tasks`` backport (Django 5.2).

Every other module imports these names from here, so the choice is made once. Neither is
importable only on Django 5.2 without the backport, which jobs then asks for by name.
"""

try:  # Django >= 6.0
    from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import (
        DEFAULT_TASK_QUEUE_NAME,
        TASK_MAX_PRIORITY,
        TASK_MIN_PRIORITY,
        TaskError,
    )
    from django.tasks.base import Task as DjangoTask
    from django.tasks.exceptions import InvalidTask, TaskException, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:  # Django 5.2 with the django-tasks backport
    # The backport's classes stand in for django.tasks' on Django 5.2; the stubs know only the
    # latter, hence the ignores (assignment: another class under the same name).
    try:
        from django_tasks import TaskContext  # type: ignore[assignment]
    except ImportError:
        raise ImportError(
            "jobs needs Django's task API: Django 6, or on Django 5.2 the django-tasks backport "
            '(pip install "django-jobs-queue[backport]").'
        ) from None
    import django_tasks as api
    from django_tasks import backends, base, exceptions, signals

    TaskResult = api.TaskResult  # type: ignore[misc,assignment]
    TaskResultStatus = api.TaskResultStatus  # type: ignore[misc,assignment]
    task_backends = api.task_backends  # type: ignore[assignment]
    BaseTaskBackend = backends.base.BaseTaskBackend  # type: ignore[misc,assignment]
    DEFAULT_TASK_QUEUE_NAME = base.DEFAULT_TASK_QUEUE_NAME
    TASK_MAX_PRIORITY = base.TASK_MAX_PRIORITY
    TASK_MIN_PRIORITY = base.TASK_MIN_PRIORITY
    TaskError = base.TaskError  # type: ignore[misc,assignment]
    DjangoTask = base.Task  # type: ignore[misc,assignment]
    InvalidTask = exceptions.InvalidTaskError  # type: ignore[misc,assignment]
    TaskException = exceptions.TaskException  # type: ignore[misc,assignment]
    TaskResultDoesNotExist = exceptions.TaskResultDoesNotExist  # type: ignore[misc,assignment]
    task_enqueued = signals.task_enqueued
    task_finished = signals.task_finished
    task_started = signals.task_started


def cache_task_signal_receivers():
    """Have Django's ``task_started`` and ``task_finished`` cache their receivers by sender.

    Django makes them without the cache its model signals use (``Signal(use_caching=True)``), so
    each send looks its receivers up again: about 8 of the 51 µs a worker spends per task on
    building the ``TaskResult`` and sending both signals. The cache is Django's own, emptied by
    every ``connect`` and ``disconnect`` and passed over once a receiver is collected, so
    receivers come and go as before. Its store stays the plain dict an uncached signal has (not
    the weak one ``use_caching`` makes): a sender that cannot be weakly referenced, ``None`` say,
    still works. Called in a worker's child, which sends them for every task of Django's
    ``@task``.
    """
    for signal in (task_started, task_finished):
        signal.use_caching = True


__all__ = [
    "DEFAULT_TASK_QUEUE_NAME",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "BaseTaskBackend",
    "DjangoTask",
    "InvalidTask",
    "TaskContext",
    "TaskError",
    "TaskException",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "cache_task_signal_receivers",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
