"""An installed app whose tasks.py fails to import does not stop the worker.

The worker logs the import's error once, with its traceback, and serves the other tasks; the
broken module's own tasks fail with the import's error (not "unknown task") when claimed.
"""

import pytest

from jobs.models import Task
from jobs.states import Status
from tests.factories import TaskFactory
from tests.hostile.adversarial import assert_succeeded_once, enqueue_bystanders

SETTINGS = "tests.hostile.settings_with_broken_app"


@pytest.mark.django_db(transaction=True)
@pytest.mark.process
@pytest.mark.parametrize(
    ("raises", "exception", "message"),
    [
        ("ImportError", "builtins.ModuleNotFoundError", "nonexistent_dependency_of_brokenapp"),
        ("SystemExit", "builtins.SystemExit", "0"),
    ],
)
def test_a_broken_tasks_module_is_logged_and_the_worker_serves_on(
    runworker, raises, exception, message
):
    bystanders = enqueue_bystanders("bystander", 3)
    # Enqueued by name, as another process (where the module imports) would have.
    broken = TaskFactory(
        name="tests.brokenapp.tasks.echo", payload={"args": [1], "kwargs": {}}, max_attempts=3
    )

    result = runworker(
        "--burst",
        "--concurrency",
        "1",
        env={"DJANGO_SETTINGS_MODULE": SETTINGS, "BROKENAPP_RAISES": raises},
    )

    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert output.count("task module failed to import") == 1, output
    assert "module=tests.brokenapp.tasks" in output
    assert "Traceback (most recent call last)" in output
    assert_succeeded_once(bystanders)
    broken.refresh_from_db()
    assert (broken.status, broken.attempts) == (Status.FAILED, 1), broken.error_details
    [entry] = broken.error_details
    assert entry["exception"] == exception
    assert entry["message"] == message or message in entry["message"]
    assert "tests/brokenapp/tasks.py" in entry["traceback"]
    assert not Task.objects.exclude(status__in=[Status.SUCCEEDED, Status.FAILED]).exists()
