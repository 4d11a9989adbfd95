"""Tasks whose outcome the database refuses to record (see test_refused_outcomes.py).

The test's trigger refuses any row whose ``error_details`` or ``progress_message`` say
"poison"; these tasks put it there (in their exception's message, their traceback, their
progress). Imported lazily by the worker, by name.
"""

from jobs import task
from tests.testapp.models import SideEffect


@task(max_attempts=3)
def poisoned_failure(key):
    SideEffect.objects.create(key=key)
    raise ValueError("poison in the error")


@task(max_attempts=3)
def poisoned_retry(key):
    SideEffect.objects.create(key=key)
    raise ConnectionError("poison, try again later")  # transient: a retry is recorded


@task(takes_context=True, max_attempts=3)
def poisoned_progress(context, key):
    SideEffect.objects.create(key=key)
    context.progress(1, 2, "poison progress", force=True)
    SideEffect.objects.create(key=f"{key}-after-progress")


@task(takes_context=True, max_attempts=3)
def poisoned_step(context, key):
    SideEffect.objects.create(key=key)
    context.step("poisoned", lambda: "poison step")
