from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured

from jobs import checks
from jobs.maintenance import periodic
from jobs.maintenance import rounds as maintenance
from jobs.models import Schedule, Task
from tests.factories import UserFactory
from tests.testapp import tasks

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 5, 10, 2, 30, tzinfo=UTC)  # a Monday, in winter
MINUTE = timedelta(minutes=1)


@pytest.fixture(autouse=True)
def no_code_schedules():
    saved = dict(periodic._declared)
    periodic._declared.clear()
    yield
    periodic._declared.clear()
    periodic._declared.update(saved)


@pytest.fixture
def every_five(settings):
    settings.JOBS_SCHEDULES = {
        "sum": {"task": "tests.testapp.tasks.add", "cron": "*/5 * * * *", "args": [1, 2]}
    }


def periodic_tasks():
    return list(Task.objects.filter(idempotency_key__startswith="periodic:").order_by("run_after"))


def test_slots_of_a_cron_expression():
    spec = periodic.PeriodicTask("s", "t", cron="*/5 * * * *")
    assert spec.latest_slot(T0) == datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
    assert spec.latest_slot(datetime(2026, 1, 5, 10, 5, tzinfo=UTC)) == datetime(
        2026, 1, 5, 10, 5, tzinfo=UTC
    )
    assert spec.next_slot(T0) == datetime(2026, 1, 5, 10, 5, tzinfo=UTC)


def test_slots_of_an_interval_are_counted_from_the_epoch():
    spec = periodic.PeriodicTask("s", "t", every=90)
    assert spec.latest_slot(T0) == datetime(2026, 1, 5, 10, 1, 30, tzinfo=UTC)
    assert spec.next_slot(T0) == datetime(2026, 1, 5, 10, 3, tzinfo=UTC)


def test_cron_is_read_in_the_schedules_time_zone():
    spec = periodic.PeriodicTask("s", "t", cron="0 3 * * *", time_zone="Europe/Paris")
    # 03:00 in Paris in January is 02:00 UTC.
    assert spec.next_slot(T0) == datetime(2026, 1, 6, 2, 0, tzinfo=UTC)


def test_a_new_schedule_waits_for_its_first_slot(every_five):
    assert periodic.run_due(now=T0) == []
    row = Schedule.objects.get(pk="sum")
    assert (row.last_run_at, row.next_run_at) == (None, datetime(2026, 1, 5, 10, 5, tzinfo=UTC))
    (result,) = periodic.run_due(now=T0 + 3 * MINUTE)
    assert result.created
    (task,) = periodic_tasks()
    assert (task.name, task.args) == ("tests.testapp.tasks.add", [1, 2])


def test_one_task_per_slot_however_often_workers_look(every_five):
    periodic.run_due(now=T0)
    for seconds in (150, 160, 200, 299):  # every look within the 10:05 slot
        periodic.run_due(now=T0 + timedelta(seconds=seconds))
    assert len(periodic_tasks()) == 1
    periodic.run_due(now=T0 + 8 * MINUTE)  # 10:10
    assert len(periodic_tasks()) == 2
    row = Schedule.objects.get(pk="sum")
    assert row.last_run_at == datetime(2026, 1, 5, 10, 10, tzinfo=UTC)
    assert row.next_run_at == datetime(2026, 1, 5, 10, 15, tzinfo=UTC)
    assert row.last_task_id == periodic_tasks()[-1].pk


def test_a_schedule_missed_while_workers_were_down_runs_once(every_five):
    periodic.run_due(now=T0)
    periodic.run_due(now=T0 + 3 * MINUTE)  # 10:05 enqueued, then every worker stops
    back = T0 + timedelta(days=1, hours=2)  # 288 slots later
    (result,) = periodic.run_due(now=back)
    periodic.run_due(now=back + MINUTE)
    assert len(periodic_tasks()) == 2
    assert result.slot == datetime(2026, 1, 6, 12, 0, tzinfo=UTC)


def test_a_paused_schedule_enqueues_nothing(every_five):
    periodic.run_due(now=T0)
    Schedule.objects.filter(pk="sum").update(enabled=False)
    assert periodic.run_due(now=T0 + 10 * MINUTE) == []
    assert periodic_tasks() == []


def test_schedules_declared_in_code():
    periodic.register("hourly-sum", tasks.add, every=timedelta(hours=1), args=(2, 3))
    periodic.periodic(cron="0 * * * *", kwargs={"key": "k"}, queue="effects")(tasks.record_effect)
    periodic.run_due(now=T0)
    done = periodic.run_due(now=T0 + timedelta(hours=1))
    assert sorted(r.schedule for r in done) == ["hourly-sum", "tests.testapp.tasks.record_effect"]
    effect = Task.objects.get(name="tests.testapp.tasks.record_effect")
    assert (effect.queue, effect.kwargs) == ("effects", {"key": "k"})
    assert Schedule.objects.get(pk="hourly-sum").interval_seconds == 3600


def test_a_changed_declaration_updates_its_row(settings, every_five):
    periodic.run_due(now=T0)
    settings.JOBS_SCHEDULES = {"sum": {"task": "tests.testapp.tasks.add", "cron": "0 * * * *"}}
    periodic.run_due(now=T0 + MINUTE)
    row = Schedule.objects.get(pk="sum")
    assert (row.cron, row.next_run_at) == ("0 * * * *", datetime(2026, 1, 5, 11, tzinfo=UTC))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"task": "x", "cron": "61 * * * *"}, "is not valid"),
        ({"task": "x"}, "either cron or every"),
        ({"task": "x", "cron": "* * * * *", "every": 60}, "either cron or every"),
        ({"task": "x", "every": 60, "time_zone": "Mars/Olympus"}, "unknown time zone"),
        ({"cron": "* * * * *"}, "is not valid"),
        ({"task": "x", "cron": "* * * * *", "colour": "red"}, "is not valid"),
    ],
)
def test_bad_declarations_are_refused_at_startup(settings, spec, message):
    settings.JOBS_SCHEDULES = {"bad": spec}
    with pytest.raises(ImproperlyConfigured, match=message):
        periodic.declared()
    assert [e.id for e in checks.check_schedules(None)] == ["jobs.E201"]


def test_an_unknown_task_is_logged_and_other_schedules_still_run(settings, caplog):
    settings.JOBS_SCHEDULES = {
        "ghost": {"task": "tests.testapp.tasks.no_such_task", "every": 60},
        "sum": {"task": "tests.testapp.tasks.add", "every": 60, "args": [1, 1]},
    }
    periodic.run_due(now=T0)
    done = periodic.run_due(now=T0 + MINUTE)
    assert [r.schedule for r in done] == ["sum"]
    assert "schedule task unknown schedule=ghost" in caplog.text


def test_arguments_that_are_not_json_are_logged_and_skipped(settings, caplog):
    settings.JOBS_SCHEDULES = {
        "bad-args": {"task": "tests.testapp.tasks.add", "every": 60, "args": [object(), 1]},
        "sum": {"task": "tests.testapp.tasks.add", "every": 60, "args": [1, 1]},
    }
    periodic.run_due(now=T0)
    done = periodic.run_due(now=T0 + MINUTE)
    assert [r.schedule for r in done] == ["sum"]
    assert "schedule arguments refused schedule=bad-args" in caplog.text


@pytest.mark.parametrize(
    ("name", "spec", "message"),
    [
        ("n" * 201, {}, "201 characters long, over the limit of 200"),
        ("nul\x00name", {}, "NUL character"),
        ("bad-args", {"args": ["\x00"]}, "args[0] holds a NUL character"),
        ("bad-kwargs", {"kwargs": {"n": float("nan")}}, "kwargs['n'] is nan"),
        ("not-json", {"args": [object()]}, "which is not JSON"),
    ],
)
def test_check_reports_a_name_or_arguments_no_row_could_store(settings, name, spec, message):
    # The check runs before any worker: without it, a worker finds out at every round.
    settings.JOBS_SCHEDULES = {name: {"task": "tests.testapp.tasks.add", "every": 60, **spec}}
    (error,) = checks.check_schedules(None)
    assert error.id == "jobs.E201"
    assert message in error.msg, error.msg


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("n" * 201, {}, "over the limit of 200"),
        ("bad-args", {"args": ["\ud800"]}, "surrogate"),
    ],
)
def test_code_refuses_a_name_or_arguments_no_row_could_store(name, options, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        periodic.register(name, tasks.add, every=60, **options)
    with pytest.raises(ImproperlyConfigured, match=message):
        periodic.periodic(every=60, name=name, **options)(tasks.add)
    assert periodic._declared == {}


@pytest.mark.parametrize("name", ["n" * 201, "nul\x00name"])
def test_a_name_no_row_could_hold_is_logged_and_other_schedules_still_run(settings, caplog, name):
    # On PostgreSQL its row's INSERT failed the round (value too long), every schedule with it.
    settings.JOBS_SCHEDULES = {
        name: {"task": "tests.testapp.tasks.add", "every": 60, "args": [2, 2]},
        "sum": {"task": "tests.testapp.tasks.add", "every": 60, "args": [1, 1]},
    }
    periodic.run_due(now=T0)
    done = periodic.run_due(now=T0 + MINUTE)
    assert [r.schedule for r in done] == ["sum"]
    assert list(Schedule.objects.values_list("name", flat=True)) == ["sum"]
    assert f"schedule refused schedule={name!r}" in caplog.text


def test_maintenance_round_enqueues_due_schedules(every_five):
    maintenance.run(now=T0)
    assert maintenance.run(now=T0 + 3 * MINUTE)["scheduled"] == 1


def test_a_broken_schedule_does_not_stop_the_other_duties(settings, caplog):
    settings.JOBS_SCHEDULES = {"bad": {"task": "x", "cron": "not cron"}}
    done = maintenance.run(now=T0)
    assert done["scheduled"] == 0
    assert "maintenance duty failed duty=periodic" in caplog.text


def test_the_admin_lists_schedules_with_last_and_next_run(client, every_five):
    periodic.run_due(now=T0)
    periodic.run_due(now=T0 + 3 * MINUTE)
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    page = client.get("/admin/jobs/schedule/").content.decode()
    assert "sum" in page
    assert "*/5 * * * *" in page
    assert "Next run at" in page
    assert "Last run at" in page
    detail = client.get("/admin/jobs/schedule/sum/change/").content.decode()
    assert str(Schedule.objects.get().last_task_id) in detail
