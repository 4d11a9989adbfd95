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
