"""Schedules of Django @task functions: declared in code or settings, once per slot, refused
when no jobs backend stores them."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.checks import WARNING
from django.core.exceptions import ImproperlyConfigured

from jobs import checks
from jobs.maintenance import periodic
from jobs.models import Schedule, Task
from tests.factories import UserFactory
from tests.helpers import run_next
from tests.testapp import django_tasks

try:  # Django >= 6.0
    from django.tasks.signals import task_enqueued

    DUMMY = "django.tasks.backends.dummy.DummyBackend"
except ImportError:  # Django 5.2 with the django-tasks backport
    from django_tasks.signals import task_enqueued  # type: ignore[no-redef]

    DUMMY = "django_tasks.backends.dummy.DummyBackend"

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 5, 10, 2, 30, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
JOBS_AND_DUMMY = {
    "default": {"BACKEND": "jobs.backends.DatabaseBackend"},
    "dummy": {"BACKEND": DUMMY},
}


@pytest.fixture(autouse=True)
def no_code_schedules():
    saved = dict(periodic._declared)
    periodic._declared.clear()
    yield
    periodic._declared.clear()
    periodic._declared.update(saved)


@pytest.fixture
def enqueued_results():
    """The results Django's task_enqueued is sent with."""
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append(task_result)

    task_enqueued.connect(receiver)
    yield seen
    task_enqueued.disconnect(receiver)


def scheduled(name):
    return list(Task.objects.filter(idempotency_key__startswith=f"periodic:{name}:"))


def test_register_a_django_task_enqueues_it_once_per_slot_through_its_backend(
    enqueued_results,
):
    periodic.register("total", django_tasks.nightly_total, every=60, args=(20, 22))
    assert periodic.run_due(now=T0) == []  # a new schedule waits for its first slot
    (result,) = periodic.run_due(now=T0 + MINUTE)
    for seconds in (70, 80, 89):  # more looks within the same slot (10:03)
        assert periodic.run_due(now=T0 + timedelta(seconds=seconds)) == []
    (task,) = scheduled("total")
    assert (task.pk, task.name, task.backend) == (
        result.task_id,
        "tests.testapp.django_tasks.nightly_total",
        "default",
    )
    assert (task.queue, task.priority, task.args) == ("default", 7, [20, 22])  # the task's own
    assert task.summary.startswith("Periodic total at ")
    assert [str(r.id) for r in enqueued_results] == [str(task.pk)]  # Django's signal, once
    again = periodic.enqueue_slot(periodic.declared()["total"], result.slot)  # a late worker
    assert (again.created, again.task_id) == (False, task.pk)
    assert len(enqueued_results) == 1  # no signal for the slot enqueued already
    assert run_next().result == 42
    row = Schedule.objects.get(pk="total")
    assert (row.task, row.last_task_id) == ("tests.testapp.django_tasks.nightly_total", task.pk)


def test_periodic_stacked_on_a_django_task():
    decorated = periodic.periodic(cron="*/5 * * * *", args=(6, 7))(django_tasks.multiply)
    assert decorated is django_tasks.multiply  # still the Django task, enqueue() and all
    periodic.run_due(now=T0)
    (result,) = periodic.run_due(now=T0 + 3 * MINUTE)
    assert result.schedule == "tests.testapp.django_tasks.multiply"
    assert run_next().result == 42


def test_a_django_task_with_other_options_keeps_them():
    periodic.register("urgent", django_tasks.multiply.using(priority=50), every=60, args=(1, 2))
    periodic.run_due(now=T0)
    periodic.run_due(now=T0 + MINUTE)
    assert [t.priority for t in scheduled("urgent")] == [50]


def test_a_django_task_by_its_dotted_path_in_settings(settings):
    settings.JOBS_SCHEDULES = {
        "total": {"task": "tests.testapp.django_tasks.nightly_total", "every": 60, "args": [1, 2]},
        "low": {
            "task": "tests.testapp.django_tasks.nightly_total",
            "every": 60,
            "priority": -5,  # the schedule's, over the task's
        },
    }
    assert checks.check_schedules(None) == []
    periodic.run_due(now=T0)
    assert len(periodic.run_due(now=T0 + MINUTE)) == 2
    assert [t.priority for t in scheduled("total")] == [7]
    assert [t.priority for t in scheduled("low")] == [-5]
    assert run_next().result == 3


def test_a_django_task_of_another_backend_is_refused_at_registration(settings):
    settings.TASKS = JOBS_AND_DUMMY
    elsewhere = django_tasks.multiply.using(backend="dummy")
    with pytest.raises(ImproperlyConfigured, match=r"'dummy' is .*DummyBackend, not jobs"):
        periodic.register("elsewhere", elsewhere, every=60)
    with pytest.raises(ImproperlyConfigured, match=r"not jobs\.backends\.DatabaseBackend"):
        periodic.periodic(every=60)(elsewhere)
    assert periodic.declared() == {}


def test_a_django_task_of_another_backend_in_settings_fails_the_system_check(settings):
    settings.TASKS = {"default": {"BACKEND": DUMMY}}  # multiply's backend is no longer jobs'
    settings.JOBS_SCHEDULES = {
        "m": {"task": "tests.testapp.django_tasks.multiply", "every": 60},
        "add": {"task": "tests.testapp.tasks.add", "every": 60},  # jobs' own: fine
    }
    (error,) = checks.check_schedules(None)
    assert error.id == "jobs.E202"
    assert "JOBS_SCHEDULES['m']" in error.msg
    assert "DummyBackend" in error.msg


@pytest.mark.parametrize("not_a_task", [django_tasks.multiply.func, 42, None])
def test_what_is_not_a_task_is_refused_when_declared(not_a_task):
    with pytest.raises(ImproperlyConfigured, match="is not a task"):
        periodic.register("x", not_a_task, every=60)
    assert periodic.declared() == {}


def test_options_the_backend_refuses_are_refused_when_declared(settings):
    with pytest.raises(ImproperlyConfigured, match="queue='reports'"):
        periodic.register("q", django_tasks.multiply, every=60, queue="reports")
    settings.JOBS_SCHEDULES = {
        "q": {"task": "tests.testapp.django_tasks.multiply", "every": 60, "queue": "reports"}
    }
    (error,) = checks.check_schedules(None)
    assert (error.id, "queue='reports'" in error.msg) == ("jobs.E202", True)
    # A priority beyond Django's range is refused for every task, by the schedule's own check.
    settings.JOBS_SCHEDULES = {
        "p": {"task": "tests.testapp.django_tasks.multiply", "every": 60, "priority": 500}
    }
    (error,) = checks.check_schedules(None)
    assert (error.id, "priority" in error.msg) == ("jobs.E201", True)


def test_a_removed_or_refused_django_task_is_logged_and_other_schedules_still_run(settings, caplog):
    settings.JOBS_SCHEDULES = {
        "removed": {"task": "tests.testapp.django_tasks.no_longer_here", "every": 60},
        "module-gone": {"task": "tests.testapp.gone_tasks.report", "every": 60},
        "moved": {"task": "tests.testapp.django_tasks.multiply", "every": 60, "args": [2, 2]},
        "sum": {"task": "tests.testapp.tasks.add", "every": 60, "args": [1, 1]},
    }
    periodic.run_due(now=T0)
    settings.TASKS = {"default": {"BACKEND": DUMMY}}  # multiply's backend is no longer jobs'
    done = periodic.run_due(now=T0 + MINUTE)
    assert [r.schedule for r in done] == ["sum"]
    assert "schedule task unknown schedule=removed" in caplog.text
    assert "schedule task unknown schedule=module-gone" in caplog.text
    assert "schedule task refused schedule=moved" in caplog.text
    assert "DummyBackend" in caplog.text
    assert list(Task.objects.values_list("name", flat=True)) == ["tests.testapp.tasks.add"]


def test_the_admin_says_what_each_schedule_runs(client, settings):
    settings.JOBS_SCHEDULES = {
        "django": {"task": "tests.testapp.django_tasks.multiply", "every": 60, "args": [6, 7]},
        "jobs": {"task": "tests.testapp.tasks.add", "every": 60, "args": [1, 2]},
        "removed": {"task": "tests.testapp.django_tasks.no_longer_here", "every": 60},
    }
    periodic.run_due(now=T0)
    periodic.run_due(now=T0 + MINUTE)
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    page = client.get("/admin/jobs/schedule/").content.decode()
    assert "Django @task, backend default" in page
    assert "@jobs.task" in page
    assert "not found: removed or renamed?" in page
    detail = client.get("/admin/jobs/schedule/django/change/").content.decode()
    assert str(Schedule.objects.get(pk="django").last_task_id) in detail


def test_a_schedule_naming_no_task_is_a_warning_of_the_system_check(settings):
    """The worker would skip it at every slot: said at deploy, not only in its log. A warning,
    not an error: the module may come with a later deploy, and ``migrate`` must still run."""
    settings.JOBS_SCHEDULES = {
        "ghost": {"task": "nowhere.to_be.found", "every": 60},
        "function": {"task": "os.path.join", "every": 60},
        "number": {"task": "math.pi", "every": 60},
        "add": {"task": "tests.testapp.tasks.add", "every": 60},  # a task: nothing to say
    }
    found = {error.msg.split("]")[0]: error for error in checks.check_schedules(None)}
    assert sorted(found) == [
        "JOBS_SCHEDULES['function'", "JOBS_SCHEDULES['ghost'", "JOBS_SCHEDULES['number'",
    ]  # fmt: skip
    assert {error.id for error in found.values()} == {"jobs.W203"}
    assert all(error.level == WARNING for error in found.values())
    assert "imports as nothing" in found["JOBS_SCHEDULES['ghost'"].msg
    assert "is a function, not a task" in found["JOBS_SCHEDULES['function'"].msg
    assert "is a float, not a task" in found["JOBS_SCHEDULES['number'"].msg
