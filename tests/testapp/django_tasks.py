"""Functions decorated with Django's own task decorator, stored and run by jobs."""

import time

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


# The context (jobs.execution.django_context) --------------------------------------------------

# The contexts keep_context received, for the test to inspect (tasks run in its process there),
# and the status each one's task_result had while the task ran (the same object is brought up to
# the attempt's outcome afterwards, as Django's own backends do).
kept_contexts: list = []
kept_statuses: list = []


@task(takes_context=True)
def keep_context(context, *args, **kwargs):
    kept_contexts.append(context)
    kept_statuses.append(context.task_result.status)


@task(takes_context=True)
def import_rows(context, total):
    """Report progress row by row; return what the context says of the attempt."""
    for row in range(1, total + 1):
        context.progress(row, total, f"Imported {row} of {total} rows")
    return {"attempt": context.attempt, "attempts": context.task_result.attempts}


@task(takes_context=True)
async def import_rows_async(context, total):
    """import_rows as an ``async def`` task: the context's methods through sync_to_async."""
    from asgiref.sync import sync_to_async

    for row in range(1, total + 1):
        await sync_to_async(context.progress)(row, total, f"Imported {row} of {total} rows")
    return context.attempt


@task(takes_context=True)
def in_two_steps(context, key, fail_times=0, cancel_after_first=False):
    """Two recorded steps; the second fails transiently its first ``fail_times`` times."""
    from jobs import transitions
    from jobs.models import Task
    from tests.testapp.models import SideEffect

    def first():
        SideEffect.objects.create(key=f"{key}:first")
        return {"value": 21}

    def second(value):
        SideEffect.objects.create(key=f"{key}:second")
        if SideEffect.objects.filter(key=f"{key}:second").count() <= fail_times:
            raise ConnectionResetError("the service hung up")
        return value * 2

    value = context.step("first", first)["value"]
    if cancel_after_first:  # what the status view's and the admin's Cancel call
        transitions.cancel(Task.objects.get(pk=context.task.pk))
    return {"result": context.step("second", second, value), "attempt": context.attempt}


@task(takes_context=True)
def import_until_cancelled(context, total):
    """Report a third of the work, then wait at cancellation checkpoints (a minute at most)."""
    done = total // 3
    context.progress(done, total, f"Imported {done} of {total} rows")
    for _ in range(1200):
        context.check_cancelled()
        time.sleep(0.05)


@task()
def explode():
    raise ValueError("boom")


# Adapted from Django's tests/tasks/tasks.py, for tests/db/test_django_contract.py.


@task()
def noop_task(*args, **kwargs):
    return None


@task()
async def noop_task_async(*args, **kwargs):
    return None


@task()
def calculate_meaning_of_life():
    return 42


@task()
def failing_task_value_error():
    raise ValueError("This task failed due to ValueError")


@task()
def failing_task_system_exit():
    raise SystemExit("This task failed due to SystemExit")


@task()
def complex_exception():
    raise ValueError(ValueError("This task failed"))


@task()
def complex_return_value():
    return sum  # a function: not JSON


@task(takes_context=True)
def get_task_id(context):
    return context.task_result.id


@task(takes_context=True)
def check_context(context, attempt):
    assert context.attempt == attempt


@task()
def die():
    """Kill the process running the task (a worker's child)."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


@task(timeout=2)
def finish_slowly(n):
    """Return ``n``; a receiver hangs on its end where a test asks
    (``JOBS_TEST_DJANGO_FINISHED_HANG``, tests/testapp/apps.py)."""
    return n


@task()
def hang():
    import time

    time.sleep(300)


@task()
def unavailable():
    """Fail with an error jobs retries (a Django task has no retry policy of its own)."""
    raise ConnectionError("the service is unavailable")


# For tests/db/test_periodic_django_tasks.py: a schedule enqueues it with its own priority.
@task(priority=7)
def nightly_total(*numbers):
    return sum(numbers)


@task(expires_in=600)
def django_expiring():
    return "ran"


@task(rate_limit="100/m")  # jobs' option on Django's decorator: at most 100 starts a minute
def rate_limited_multiply(a, b):
    return a * b


@task()
def django_double(x):
    """A chain's link declared with Django's decorator (tests/db/test_workflows.py)."""
    return x * 2
