"""A real worker's log: one INFO line per reply for the quick successes of a batch, a line each
for every other outcome, and a line per task again with ``JOBS_LOG_EACH_SUCCESS``."""

import re

import pytest

from jobs.models import Task
from jobs.states import Status
from tests.testapp import async_tasks, django_tasks, tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

# Long enough that the quick tasks of a batch all start in it; no receiver of task_succeeded or
# task_finished (the demo app's), so that the children defer their successes to the supervisor.
BATCHED = {
    "JOBS_BATCH_SECONDS": "5",
    "DJANGO_SETTINGS_MODULE": "tests.hostile.settings_without_receivers",
}


def pairs(line: str) -> dict:
    """The key=value pairs of a log line (the test settings log the message alone, unquoted:
    a value with spaces, an error's message, is cut at its first space)."""
    return dict(re.findall(r"(?:^| )([a-z_]+)=(\S*)", line))


def lines(stderr: str, message: str) -> list[dict]:
    return [pairs(line) for line in stderr.splitlines() if line.startswith(message + " ")]


def enqueue_mix():
    quick = [tasks.add.enqueue(n, 1).record for n in range(40)]
    broken = tasks.bad_file.enqueue().record  # fails for good, amid the quick ones
    quick += [tasks.add.enqueue(n, 2).record for n in range(20)]
    flaky = tasks.always_transient.enqueue().record  # retrying
    snoozer = tasks.snooze_with.enqueue(600).record  # snoozed, not due again in this burst
    quick.append(Task.objects.get(pk=django_tasks.multiply.enqueue(3, 4).id))  # Django's hook
    quick += [async_tasks.nap.enqueue(f"a{n}", 0).record for n in range(5)]  # the loop's path
    return quick, broken, flaky, snoozer


def test_quick_successes_get_one_line_per_reply_and_the_failures_their_own(runworker):
    quick, broken, flaky, snoozer = enqueue_mix()

    done = runworker("--burst", "--concurrency", "1", env=BATCHED)

    assert done.returncode == 0, done.stderr
    assert set(
        Task.objects.filter(pk__in=[t.pk for t in quick]).values_list("status", flat=True)
    ) == {Status.SUCCEEDED}
    batch_lines = lines(done.stderr, "tasks succeeded")
    assert batch_lines, done.stderr
    # Every quick success is counted once, under its task's name; a reply carried many.
    assert sum(int(line["count"]) for line in batch_lines) == len(quick)
    assert max(int(line["count"]) for line in batch_lines) > 1
    names: dict[str, int] = {}
    for line in batch_lines:
        for entry in line["names"].split(","):
            name, _, count = entry.rpartition(":")
            names[name] = names.get(name, 0) + int(count)
        assert re.fullmatch(r"\d+\.\d{3}s", line["duration"]), line
        assert re.fullmatch(r"\d+\.\d{3}s", line["elapsed"]), line
        assert float(line["elapsed"][:-1]) >= float(line["duration"][:-1]) - 0.001
        assert {line["first_id"], line["last_id"]} <= {str(t.pk) for t in quick}
    assert names == {
        "tests.testapp.tasks.add": 60,
        quick[60].name: 1,  # the Django task, whose hook waits for the supervisor's word
        "tests.testapp.async_tasks.nap": 5,
    }
    # No success has an INFO line of its own (it is at DEBUG); the failure and the retry do.
    finished = lines(done.stderr, "task finished")
    assert [line["outcome"] for line in finished if line["outcome"] == "succeeded"] == []
    by_id = {line["id"]: line for line in finished}
    assert by_id[str(broken.pk)]["outcome"] == "failed"
    assert by_id[str(broken.pk)]["error"] == "jobs.exceptions.PermanentError"
    assert by_id[str(flaky.pk)]["outcome"] == "retrying"
    assert by_id[str(snoozer.pk)]["outcome"] == "snoozed"
    assert set(by_id) == {str(broken.pk), str(flaky.pk), str(snoozer.pk)}


def test_each_success_has_its_own_line_with_the_setting(runworker):
    quick, broken, flaky, snoozer = enqueue_mix()

    done = runworker("--burst", "--concurrency", "1", env={**BATCHED, "JOBS_LOG_EACH_SUCCESS": "1"})

    assert done.returncode == 0, done.stderr
    assert lines(done.stderr, "tasks succeeded") == []
    finished = {line["id"]: line for line in lines(done.stderr, "task finished")}
    assert set(finished) == {str(t.pk) for t in [*quick, broken, flaky, snoozer]}
    assert {finished[str(t.pk)]["outcome"] for t in quick} == {"succeeded"}
    assert finished[str(broken.pk)]["outcome"] == "failed"


def test_at_debug_each_success_keeps_its_line_beside_the_batch_line(runworker):
    quick = [tasks.add.enqueue(n, 1).record for n in range(30)]

    done = runworker("--burst", "--concurrency", "1", env={**BATCHED, "JOBS_LOG_LEVEL": "DEBUG"})

    assert done.returncode == 0, done.stderr
    assert sum(int(line["count"]) for line in lines(done.stderr, "tasks succeeded")) == 30
    finished = {line["id"] for line in lines(done.stderr, "task finished")}
    assert finished == {str(t.pk) for t in quick}


def test_successes_a_receiver_waits_for_keep_a_line_each(runworker):
    """With the demo's task_finished receiver, successes are held and recorded in the child
    (not deferred): each keeps its INFO line, and no batch line counts them."""
    quick = [tasks.add.enqueue(n, 1).record for n in range(20)]

    done = runworker("--burst", "--concurrency", "1", env={"JOBS_BATCH_SECONDS": "5"})

    assert done.returncode == 0, done.stderr
    assert lines(done.stderr, "tasks succeeded") == []
    finished = {line["id"]: line["outcome"] for line in lines(done.stderr, "task finished")}
    assert finished == {str(t.pk): "succeeded" for t in quick}
