"""Tasks that raise what a task should not: BaseExceptions, unprintable or unstorable exceptions,
modules that fail to import. Each ends its own task, with the real exception recorded; the
worker and the other tasks it runs carry on as if nothing happened."""

import pytest

from jobs.models import Task
from jobs.states import Status
from jobs.tasks.retry import GENERIC_FAILURE_MESSAGE
from tests.factories import TaskFactory
from tests.hostile.adversarial import assert_succeeded_once, enqueue_bystanders
from tests.testapp import hostile_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

NOT_EXCEPTIONS = [
    pytest.param(hostile_tasks.raises_system_exit, (0,), "builtins.SystemExit", id="exit-0"),
    pytest.param(hostile_tasks.raises_system_exit, (3,), "builtins.SystemExit", id="exit-3"),
    pytest.param(
        hostile_tasks.raises_keyboard_interrupt, (), "builtins.KeyboardInterrupt", id="ctrl-c"
    ),
    pytest.param(hostile_tasks.raises_generator_exit, (), "builtins.GeneratorExit", id="gen"),
    pytest.param(
        hostile_tasks.raises_base_exception,
        (),
        "tests.testapp.hostile_tasks.NotAnException",
        id="base",
    ),
]


def run_burst(runworker, *args):
    done = runworker("--burst", "--concurrency", "1", *args)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.parametrize(("definition", "args", "exception"), NOT_EXCEPTIONS)
def test_a_base_exception_fails_its_task_and_its_child_is_replaced(
    runworker, definition, args, exception
):
    hostile = definition.enqueue(*args).record
    bystanders = enqueue_bystanders("after-base-exception")

    done = run_burst(runworker)

    hostile.refresh_from_db()
    # A failure of that task, at once (not transient), not a crash of the worker retried.
    assert (hostile.status, hostile.attempts) == (Status.FAILED, 1)
    assert hostile.last_error == GENERIC_FAILURE_MESSAGE
    [detail] = hostile.error_details
    assert detail["exception"] == exception
    assert "hostile_tasks.py" in detail["traceback"]
    last_line = detail["traceback"].rstrip().splitlines()[-1]
    assert last_line.startswith(exception.removeprefix("builtins."))
    assert detail["transient"] is False
    # The child that ran it is replaced, and says why.
    assert f'reason="the task raised {exception}"' in done.stderr
    assert "child exited" not in done.stderr
    assert_succeeded_once(bystanders)


def test_a_base_exception_declared_transient_is_retried(runworker):
    hostile = hostile_tasks.raises_declared_transient_base_exception.enqueue().record
    bystanders = enqueue_bystanders("after-transient-base")

    run_burst(runworker)

    hostile.refresh_from_db()
    # Retried (the burst may outlast the first backoff, about 2 s, and run it again).
    assert hostile.status == (Status.RETRYING if hostile.attempts < 3 else Status.FAILED)
    assert len(hostile.error_details) == hostile.attempts
    for detail in hostile.error_details:
        assert detail["exception"] == "tests.testapp.hostile_tasks.NotAnException"
        assert detail["transient"] is True
    assert_succeeded_once(bystanders)


def test_an_exception_whose_str_and_repr_raise_is_recorded_by_its_class(runworker):
    hostile = hostile_tasks.raises_unprintable.enqueue().record
    bystanders = enqueue_bystanders("after-unprintable")

    done = run_burst(runworker)

    hostile.refresh_from_db()
    assert (hostile.status, hostile.attempts) == (Status.FAILED, 1)
    [detail] = hostile.error_details
    assert detail["exception"] == "tests.testapp.hostile_tasks.Unprintable"
    assert detail["message"] == (
        "<exception of type tests.testapp.hostile_tasks.Unprintable: str() failed>"
    )
    assert 'raise Unprintable("hidden")' in detail["traceback"]
    assert "child recycled" not in done.stderr  # an Exception: the child is kept
    assert_succeeded_once(bystanders)


def test_nul_and_lone_surrogates_in_an_exception_are_escaped_not_lost(runworker):
    hostile = hostile_tasks.raises_unstorable_text.enqueue().record
    bystanders = enqueue_bystanders("after-unstorable")

    run_burst(runworker)

    hostile.refresh_from_db()
    assert (hostile.status, hostile.attempts) == (Status.FAILED, 1)
    [detail] = hostile.error_details
    assert detail["exception"] == "builtins.ValueError"
    assert detail["message"] == "nul:\\x00 lone surrogate:\\ud800 end"
    assert "nul:\\x00 lone surrogate:\\ud800 end" in detail["traceback"]
    assert_succeeded_once(bystanders)


@pytest.mark.parametrize(
    ("module", "exception", "words"),
    [
        ("broken_on_import", "builtins.RuntimeError", "JOBS_EXAMPLE_SETTING is missing"),
        ("missing_dependency", "builtins.ModuleNotFoundError", "jobs_hostile_no_such_package"),
        ("exits_on_import", "builtins.SystemExit", "exits when it is imported"),
    ],
)
def test_a_task_whose_module_fails_to_import_fails_with_the_import_error(
    runworker, module, exception, words
):
    hostile = TaskFactory(name=f"tests.testapp.{module}.never_defined", max_attempts=3)
    bystanders = enqueue_bystanders(f"after-{module}")

    run_burst(runworker)

    hostile.refresh_from_db()
    # The code cannot run here, and waiting will not change that: failed at once.
    assert (hostile.status, hostile.attempts) == (Status.FAILED, 1)
    [detail] = hostile.error_details
    assert detail["exception"] == exception
    assert words in detail["message"]
    assert f"{module}.py" in detail["traceback"]
    assert_succeeded_once(bystanders)


@pytest.mark.parametrize("code", [0, 3])
def test_a_task_that_exits_is_a_crash_of_its_attempt(runworker, code):
    hostile = hostile_tasks.exits.enqueue(code).record
    bystanders = enqueue_bystanders(f"after-exit-{code}")

    done = run_burst(runworker)

    hostile.refresh_from_db()
    # The process ended without a word: transient (it may be the host), retried while
    # attempts remain (one here).
    assert (hostile.status, hostile.attempts) == (Status.FAILED, 1)
    [detail] = hostile.error_details
    assert detail["exception"] == "jobs.exceptions.WorkerCrashed"
    assert detail["transient"] is True
    assert f"exited with code {code}" in detail["message"]
    assert "reason=crash" in done.stderr
    assert_succeeded_once(bystanders)
    assert not Task.objects.running().exists()
