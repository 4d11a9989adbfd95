"""One task object (issue 13 item 1): a task declared with Django's ``@task`` for a jobs backend
is the ``JobsTask`` that ``@jobs.task`` makes, with the same options, enqueued, retried, shown
and refused the same way. The worker-level promises (a timeout) are in
tests/process/test_one_task_object.py."""

import math
from datetime import timedelta

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import Client
from django.urls import reverse
from django.utils import timezone

import jobs
from jobs.backends import JobsTaskResult
from jobs.exceptions import PayloadError
from jobs.models import Task
from jobs.states import Status
from jobs.tasks.definition import JobsTask, TaskOptionError
from jobs.tasks.django_api import InvalidTask, TaskResultStatus
from jobs.testing import drain
from tests.factories import TaskFactory, UserFactory
from tests.helpers import staff
from tests.testapp import twin_tasks
from tests.testapp.twin_tasks import add_django, django_task, flaky_django, flaky_jobs

pytestmark = pytest.mark.django_db


def test_both_declarations_make_one_class_carrying_jobs_options():
    assert type(flaky_django) is type(flaky_jobs) is JobsTask
    for twin in (flaky_django, flaky_jobs):
        assert (twin.max_attempts, twin.transient) == (2, (twin_tasks.PartnerDown,))
    assert twin_tasks.hang_django.timeout == 1
    assert (flaky_django.backend, flaky_jobs.backend) == ("default", "")
    assert flaky_django.module_path == "tests.testapp.twin_tasks.flaky_django"


@pytest.mark.parametrize("twin", [flaky_django, flaky_jobs], ids=["django", "jobs"])
def test_a_declared_transient_error_is_retried_then_fails_the_same_for_both_twins(twin):
    result = twin.enqueue("k")
    assert isinstance(result, JobsTaskResult)
    assert result.status == TaskResultStatus.READY
    assert result.record.max_attempts == 2

    drained = drain(with_scheduled=True)

    assert drained.counts == {"succeeded": 0, "failed": 1, "retrying": 1, "cancelled": 0}
    row = Task.objects.get(pk=result.id)
    assert (row.status, row.attempts) == (Status.FAILED, 2)
    assert [entry["exception"] for entry in row.error_details] == [
        "tests.testapp.twin_tasks.PartnerDown"
    ] * 2
    assert [entry["transient"] for entry in row.error_details] == [True, True]
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.record.status == Status.FAILED  # refresh() fetches the row again
    assert [error.exception_class for error in result.errors] == [twin_tasks.PartnerDown] * 2


def test_the_twins_end_with_the_same_record():
    rows = [twin.enqueue("k").record for twin in (flaky_django, flaky_jobs)]
    drain(with_scheduled=True)
    fields = ("status", "attempts", "max_attempts", "last_error", "queue", "priority")
    django_row, jobs_row = (Task.objects.values(*fields).get(pk=row.pk) for row in rows)
    assert django_row == jobs_row


def test_using_owner_and_summary_the_status_view_answers_the_owner_only():
    owner, other = UserFactory(username="owner"), UserFactory(username="other")
    result = add_django.using(owner=owner, summary="Add two numbers").enqueue(2, 3)
    assert (result.record.owner, result.record.summary) == (owner, "Add two numbers")
    url = reverse("jobs:task-status", args=[result.id])

    client = Client()
    client.force_login(owner)
    response = client.get(url)
    assert response.status_code == 200
    assert response.json()["summary"] == "Add two numbers"
    assert response.json()["status"] == Status.PENDING

    client.force_login(other)
    assert client.get(url).status_code == 404
    assert Client().get(url).status_code == 404  # anonymous


def test_anonymous_owner_is_no_owner():
    result = add_django.using(owner=AnonymousUser()).enqueue(1, 1)
    assert Task.objects.get(pk=result.id).owner is None


def test_an_idempotency_key_returns_the_existing_task():
    first = add_django.using(idempotency_key="sum-1").enqueue(1, 2)
    again = add_django.using(idempotency_key="sum-1").enqueue(9, 9)
    assert first.record.created is True
    assert again.record.created is False
    assert again.id == first.id
    assert again.args == [1, 2]  # the existing task, not the second call
    assert Task.objects.filter(name=add_django.module_path).count() == 1


def test_delay_defers_the_task():
    before = timezone.now()
    result = add_django.using(delay=timedelta(hours=1)).enqueue(1, 2)
    row = result.record
    assert before + timedelta(minutes=59) < row.run_after <= timezone.now() + timedelta(hours=1)
    assert result.task.run_after == row.run_after  # Django's view of it: deferred
    assert drain().total == 0  # not due
    soon = add_django.using(delay=30).enqueue(1, 2).record
    assert soon.run_after > before + timedelta(seconds=29)


def test_enqueue_many_on_a_django_task():
    owner = UserFactory()
    ids = add_django.using(owner=owner, summary="Sums", priority=3).enqueue_many(
        [(1, 2), ((3,), {"b": 4})]
    )
    rows = list(Task.objects.filter(pk__in=ids).order_by("created_at", "id"))
    assert [row.pk for row in rows] == ids
    assert {(row.name, row.backend, row.owner_id, row.summary, row.priority) for row in rows} == {
        (add_django.module_path, "default", owner.pk, "Sums", 3)
    }
    drained = drain()
    assert drained.succeeded == 2
    assert sorted(Task.objects.filter(pk__in=ids).values_list("result", flat=True)) == [3, 7]
    # Django's API finds them: they are its backend's results.
    assert add_django.get_result(str(ids[0])).return_value in (3, 7)


def test_enqueue_many_refuses_an_idempotency_key():
    with pytest.raises(ValueError, match="idempotency_key"):
        add_django.using(idempotency_key="k").enqueue_many([(1, 2)])


def test_the_admin_change_page_of_a_django_task_shows_its_summary_and_owner(client):
    owner = UserFactory(username="ann-owner")
    result = twin_tasks.report_django.using(owner=owner, summary="Yearly report 2026").enqueue(12)
    client.force_login(staff("view_task", username="operator"))
    page = client.get(reverse("admin:jobs_task_change", args=[result.id])).content.decode()
    assert "Yearly report 2026" in page
    assert "ann-owner" in page
    assert "tests.testapp.twin_tasks.report_django" in page


def test_a_django_tasks_context_reports_progress_the_status_view_shows():
    owner = UserFactory()
    result = twin_tasks.report_django.using(owner=owner).enqueue(4)
    assert (result.record.queue, result.record.priority) == ("default", 5)
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"months": 4, "attempt": 1}
    client = Client()
    client.force_login(owner)
    body = client.get(reverse("jobs:task-status", args=[result.id])).json()
    assert body["progress"]["percent"] == 100


# Hostile option values: refused when declared or when using() is called, never at the enqueue.

HOSTILE_DECLARATIONS = [
    {"max_attempts": 0},
    {"max_attempts": -1},
    {"max_attempts": True},
    {"max_attempts": 2**31},
    {"timeout": 0},
    {"timeout": -1},
    {"timeout": math.nan},
    {"timeout": math.inf},
    {"timeout": "10"},
    {"transient": (int,)},
    {"transient": 5},
    {"backoff": "x"},
    {"priority": 101},
    {"priority": -101},
]
HOSTILE_QUEUES = ["a,b", "a\x00b", "q" * 101, ""]


def module_level(a):
    return a


@pytest.mark.parametrize("options", HOSTILE_DECLARATIONS, ids=repr)
@pytest.mark.parametrize("decorator", [django_task, jobs.task], ids=["django", "jobs"])
def test_a_hostile_option_is_refused_at_declaration(decorator, options):
    with pytest.raises(TaskOptionError) as caught:
        decorator(**options)(module_level)
    assert isinstance(caught.value, InvalidTask)
    assert isinstance(caught.value, PayloadError)


@pytest.mark.parametrize("queue", HOSTILE_QUEUES, ids=repr)
def test_a_hostile_queue_is_refused_at_declaration(queue):
    with pytest.raises(TaskOptionError):
        django_task(queue_name=queue)(module_level)
    with pytest.raises(TaskOptionError):
        jobs.task(queue=queue or "\t")(module_level)  # jobs' empty queue is the default one


def test_jobs_task_takes_queue_or_queue_name_and_djangos_takes_queue_name():
    assert jobs.task(queue="emails")(module_level).queue_name == "emails"
    assert jobs.task(queue_name="emails")(module_level).queue == "emails"
    assert django_task(queue_name="default")(module_level).queue == "default"
    # A Django backend takes the queues of its QUEUES (Django's default: "default" only).
    with pytest.raises(TaskOptionError, match="not valid for backend"):
        django_task(queue_name="emails")(module_level)
    with pytest.raises(TypeError):
        django_task(queue="emails")(module_level)
    with pytest.raises(TypeError):  # the name= option is gone: a task's name is its path
        jobs.task(name="custom")(module_level)


@pytest.mark.parametrize("option", ["run_after", "delay"])
def test_a_due_time_at_declaration_is_refused_saying_to_pass_it_per_call(option):
    when = timezone.now() + timedelta(hours=1) if option == "run_after" else 30
    with pytest.raises(TaskOptionError, match=rf"using\({option}=\.\.\.\)\.enqueue"):
        jobs.task(**{option: when})(module_level)
    with pytest.raises(TaskOptionError, match="option of one call"):
        jobs.task(module_level, **{option: when})
    # Django's own @task refuses it before jobs runs: the django-tasks backport because it
    # passes run_after=None itself (a second one is a TypeError), Django 6 saying to use
    # .using(run_after=...), as jobs does.
    with pytest.raises(
        TypeError,
        match=r"multiple values for keyword argument 'run_after'|using\(run_after=\.\.\.\)",
    ):
        django_task(run_after=timezone.now())(module_level)


HOSTILE_USING = [
    {"max_attempts": 0},
    {"max_attempts": True},
    {"max_attempts": 2**31},
    {"priority": 101},
    {"priority": 1.5},
    {"queue": "a,b"},
    {"queue_name": "a\x00"},
    {"queue": "q" * 101},
    {"delay": math.nan},
    {"delay": "10"},
    {"delay": 10**12},
    {"idempotency_key": "k\x00"},
    {"idempotency_key": "k" * 256},
    {"idempotency_key": 5},
    {"owner": "bob"},
    {"owner": 1},
]


@pytest.mark.parametrize("options", HOSTILE_USING, ids=repr)
@pytest.mark.parametrize("twin", [add_django, twin_tasks.flaky_jobs], ids=["django", "jobs"])
def test_a_hostile_using_option_is_refused_at_using(twin, options):
    with pytest.raises(TaskOptionError) as caught:
        twin.using(**options)
    assert isinstance(caught.value, InvalidTask)
    assert isinstance(caught.value, PayloadError)
    assert not Task.objects.exists()


def test_an_unsaved_owner_is_refused():
    with pytest.raises(TaskOptionError, match="saved user"):
        add_django.using(owner=UserFactory.build())


def test_a_summary_with_a_nul_is_cleaned_not_refused():
    result = add_django.using(summary="Import of a\x00b.csv").enqueue(1, 2)
    row = Task.objects.get(pk=result.id)
    assert "\x00" not in row.summary
    assert row.summary.startswith("Import of a")
    assert row.summary.endswith("b.csv")


def test_a_function_not_at_module_level_is_refused():
    def nested():
        return None

    for decorator in (django_task, jobs.task):
        with pytest.raises(TaskOptionError, match="module level"):
            decorator(nested)


def test_a_row_of_a_django_task_runs_by_its_dotted_path():
    row = TaskFactory(name=add_django.module_path, backend="default", payload={"args": [4, 5]})
    assert drain().succeeded == 1
    row.refresh_from_db()
    assert (row.status, row.result) == (Status.SUCCEEDED, 9)


@pytest.mark.parametrize("twin", [add_django, twin_tasks.flaky_jobs], ids=["django", "jobs"])
def test_get_result_equals_the_result_of_an_enqueue_with_using_options(twin):
    """Django's contract: ``get_result(id) == enqueue()``, whatever ``using()`` set; the options
    of the call are the row's (``result.record``), the result's task is the declared one."""
    owner = UserFactory()
    for options in (
        {"owner": owner, "summary": "Sum", "idempotency_key": "k", "max_attempts": 7},
        {"delay": 60},
        {"priority": 3, "max_attempts": 1},
    ):
        result = twin.using(**options).enqueue(1, 2)
        assert twin.get_result(result.id) == result
        assert result.task.owner is None
        assert result.task.max_attempts == twin.max_attempts
        assert result.record.summary == options.get("summary", "")
        assert result.record.max_attempts == options.get(
            "max_attempts", 3 if twin is add_django else 2
        )
