"""Schedules from the admin: added, changed, paused and run now; every value checked where it
enters; declared schedules read-only but for pausing and running now; each behind its
permission."""

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.maintenance import periodic
from jobs.models import Schedule, Task
from tests.factories import ScheduleFactory, UserFactory
from tests.helpers import staff

pytestmark = pytest.mark.django_db

ADD = reverse("admin:jobs_schedule_add")
CHANGELIST = reverse("admin:jobs_schedule_changelist")
T0 = datetime(2026, 1, 5, 10, 2, 30, tzinfo=UTC)
ADD_TASK = "tests.testapp.tasks.add"


@pytest.fixture(autouse=True)
def no_code_schedules():
    saved = dict(periodic._declared)
    periodic._declared.clear()
    yield
    periodic._declared.clear()
    periodic._declared.update(saved)


def change_url(name):
    return reverse("admin:jobs_schedule_change", args=[name])


def logged_in(*codenames, username="operator"):
    client = Client()
    client.force_login(staff("view_schedule", *codenames, username=username))
    return client


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def form(**values):
    data = {
        "name": "digest",
        "task": ADD_TASK,
        "cron": "*/5 * * * *",
        "interval_seconds": "",
        "time_zone": "UTC",
        "args": "[1, 2]",
        "kwargs": "{}",
        "queue": "",
        "priority": "",
        "enabled": "on",
    }
    data.update(values)
    return {key: value for key, value in data.items() if value is not None}


def errors_of(response) -> str:
    """The form's errors, as the page shows them, in one string."""
    assert response.status_code == 200, response.status_code
    adminform = response.context["adminform"].form
    return json.dumps(adminform.errors, ensure_ascii=False)


def admin_schedule(**values) -> Schedule:
    defaults = {"source": Schedule.Source.ADMIN, "args": [1, 2], "created_at": T0}
    return ScheduleFactory(**{**defaults, **values})


# Adding ----------------------------------------------------------------------------------------


def test_a_schedule_added_in_the_admin_is_enqueued_by_the_periodic_round_once_per_slot():
    client = logged_in("add_schedule")
    response = client.post(ADD, form(), follow=True)
    assert response.status_code == 200
    row = Schedule.objects.get(pk="digest")
    assert (row.source, row.task, row.cron, row.args, row.kwargs, row.version) == (
        "admin", ADD_TASK, "*/5 * * * *", [1, 2], {}, 0,
    )  # fmt: skip
    assert row.next_run_at > timezone.now() - timedelta(seconds=1)
    Schedule.objects.filter(pk="digest").update(created_at=T0)  # as if added at T0
    assert periodic.run_due(now=T0) == []  # its first slot is after it appeared
    for seconds in (150, 200, 299):  # every look within the 10:05 slot
        periodic.run_due(now=T0 + timedelta(seconds=seconds))
    periodic.run_due(now=T0 + timedelta(minutes=8))  # 10:10
    tasks = Task.objects.filter(idempotency_key__startswith="periodic:digest:")
    assert sorted(task.idempotency_key for task in tasks) == [
        "periodic:digest:2026-01-05T10:05:00+00:00",
        "periodic:digest:2026-01-05T10:10:00+00:00",
    ]
    assert {(task.name, tuple(task.args)) for task in tasks} == {(ADD_TASK, (1, 2))}
    row.refresh_from_db()
    assert row.last_run_at == datetime(2026, 1, 5, 10, 10, tzinfo=UTC)


def test_a_disabled_admin_schedule_is_not_enqueued():
    admin_schedule(name="off", enabled=False)
    assert periodic.run_due(now=T0 + timedelta(minutes=3)) == []
    assert not Task.objects.exists()


def test_an_admin_schedule_with_a_queue_priority_and_an_interval():
    client = logged_in("add_schedule")
    values = form(cron="", interval_seconds="3600", queue="reports", priority="7", kwargs="{}")
    client.post(ADD, values)
    Schedule.objects.filter(pk="digest").update(created_at=T0 - timedelta(days=1))
    (result,) = periodic.run_due(now=T0)
    task = Task.objects.get(pk=result.task_id)
    assert (task.queue, task.priority, task.idempotency_key) == (
        "reports", 7, "periodic:digest:2026-01-05T10:00:00+00:00",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"cron": "61 * * * *"}, "is not valid: Bad minute"),
        ({"cron": "every day"}, "is not valid"),
        ({"cron": "0 0 30 2 *"}, "Bad day-of-month"),  # 30 February: never fires
        ({"cron": "*" * 201}, "at most 200 characters"),
        ({"cron": "*/5 * * *\x00 *"}, "Null characters are not allowed"),
        ({"cron": ""}, "needs either cron or every"),
        ({"interval_seconds": "60"}, "not both or none"),
        ({"cron": "", "interval_seconds": "0"}, "every must be a finite number"),
        ({"task": "tests.testapp.tasks.no_such_task"}, "No task is importable"),
        ({"task": "os.path.join"}, "No task is registered"),
        ({"time_zone": "Mars/Olympus"}, "unknown time zone"),
        ({"queue": "q" * 101}, "at most 100 characters"),
        ({"priority": "100000"}, "The priority must be an integer from -100 to 100"),
        ({"args": "[1, 2"}, "Not valid JSON"),
        ({"args": '{"a": 1}'}, "Give a JSON list, not dict"),
        ({"kwargs": "[1]"}, "Give a JSON object, not list"),
        ({"args": "[NaN]"}, "args[0] is nan"),
        ({"args": '["\\u0000"]'}, "NUL character"),
        ({"args": '["\\ud800"]'}, "surrogate"),
        ({"kwargs": '{"n": 1e400}'}, "is inf"),
        ({"args": "[" * 100_000 + "]" * 100_000}, "Not valid JSON: nested too deep"),
        # Python 3.11's parser stops at this depth, 3.13's reads it and the payload check refuses
        # it: refused either way, in words that say why.
        (
            {"args": "[" * 5_000 + "]" * 5_000},
            ("Not valid JSON: nested too deep", "is nested more than 100 lists and dicts deep"),
        ),
        ({"args": "[" * 200 + "]" * 200}, "nested more than 100"),
        ({"args": json.dumps(["x" * 600_000])}, "over the limit"),
        ({"name": "n\x00ame"}, "Null characters are not allowed"),
        ({"name": "n" * 201}, "at most 200 characters"),
    ],
)
def test_bad_values_are_refused_on_the_form_and_nothing_is_written(values, message):
    client = logged_in("add_schedule")
    errors = errors_of(client.post(ADD, form(**values)))
    expected = message if isinstance(message, tuple) else (message,)
    assert any(text in errors for text in expected), errors
    assert not Schedule.objects.exists()


def test_the_name_of_a_declared_schedule_or_of_a_row_is_refused(settings):
    settings.JOBS_SCHEDULES = {"nightly": {"task": ADD_TASK, "cron": "0 3 * * *"}}
    client = logged_in("add_schedule")
    assert "A schedule of settings or code has this name" in errors_of(
        client.post(ADD, form(name="nightly"))
    )
    admin_schedule(name="taken")
    assert "already exists" in errors_of(client.post(ADD, form(name="taken")))
    assert Schedule.objects.get(pk="taken").task == ADD_TASK


# Changing --------------------------------------------------------------------------------------


def test_an_admin_schedule_is_changed_without_touching_what_workers_recorded():
    row = admin_schedule(name="digest", last_run_at=T0, version=3)
    client = logged_in("change_schedule")
    page = client.get(change_url("digest")).content.decode()
    assert 'name="version" value="3"' in page
    task = Task.objects.create(name=ADD_TASK)
    # A worker records a slot while the operator edits.
    Schedule.objects.filter(pk="digest").update(last_run_at=T0 + timedelta(hours=1),
                                                last_task_id=task.pk)  # fmt: skip
    values = form(cron="0 * * * *", args='["a"]', kwargs='{"b": true}', version="3")
    del values["name"]  # read-only once added: it is in every slot's key
    response = client.post(change_url("digest"), values, follow=True)
    assert response.status_code == 200
    row.refresh_from_db()
    assert (row.cron, row.args, row.kwargs, row.version) == ("0 * * * *", ["a"], {"b": True}, 4)
    assert (row.last_run_at, row.last_task_id) == (T0 + timedelta(hours=1), task.pk)


def test_two_operators_editing_one_schedule_the_second_to_save_is_refused():
    admin_schedule(name="digest")
    first, second = logged_in("change_schedule"), logged_in("change_schedule", username="b")
    values = form(version="0")
    del values["name"]
    first.post(change_url("digest"), {**values, "cron": "0 1 * * *"})
    errors = errors_of(second.post(change_url("digest"), {**values, "cron": "0 2 * * *"}))
    assert "changed by someone else since you opened it" in errors
    row = Schedule.objects.get(pk="digest")
    assert (row.cron, row.version) == ("0 1 * * *", 1)


def test_a_declared_schedule_is_read_only_but_for_enabled(settings):
    settings.JOBS_SCHEDULES = {"nightly": {"task": ADD_TASK, "cron": "0 3 * * *"}}
    periodic.run_due(now=T0)
    client = logged_in("change_schedule")
    page = client.get(change_url("nightly")).content.decode()
    assert 'name="enabled"' in page
    assert 'name="cron"' not in page
    assert 'name="task"' not in page
    client.post(change_url("nightly"), {"cron": "* * * * *", "task": "x"})  # enabled unticked
    row = Schedule.objects.get(pk="nightly")
    assert (row.enabled, row.cron, row.task, row.source) == (False, "0 3 * * *", ADD_TASK, "code")
    assert periodic.run_due(now=T0 + timedelta(days=1)) == []  # paused


def test_enabled_from_the_list_writes_enabled_alone():
    admin_schedule(name="digest", last_run_at=T0)
    client = logged_in("change_schedule")
    Schedule.objects.filter(pk="digest").update(last_run_at=T0 + timedelta(hours=2))
    data = {
        "form-TOTAL_FORMS": "1", "form-INITIAL_FORMS": "1", "form-0-name": "digest",
        "_save": "Save",  # enabled unticked
    }  # fmt: skip
    client.post(CHANGELIST, data)
    row = Schedule.objects.get(pk="digest")
    assert (row.enabled, row.last_run_at, row.version) == (False, T0 + timedelta(hours=2), 1)


# A schedule that can no longer run -------------------------------------------------------------


def test_a_schedule_whose_task_was_removed_is_reported_and_holds_back_no_other(caplog):
    admin_schedule(name="gone", task="tests.testapp.tasks.removed_since")
    admin_schedule(name="fine")
    with caplog.at_level(logging.ERROR, logger="jobs.maintenance.periodic"):
        results = periodic.run_due(now=T0 + timedelta(minutes=3))
    assert [r.schedule for r in results] == ["fine"]
    assert "schedule task unknown schedule=gone" in caplog.text
    client = logged_in(username="viewer")
    assert "not found: removed or renamed?" in client.get(CHANGELIST).content.decode()


def test_a_row_written_past_the_form_is_refused_at_its_round(caplog):
    admin_schedule(name="broken", cron="not a cron")
    admin_schedule(name="listless", args={"a": 1})
    with caplog.at_level(logging.ERROR, logger="jobs.maintenance.periodic"):
        assert periodic.run_due(now=T0 + timedelta(minutes=3)) == []
    assert "schedule refused schedule=broken" in caplog.text
    assert "schedule refused schedule=listless" in caplog.text


def test_a_declaration_whose_name_an_admin_schedule_holds_is_not_run(settings, caplog):
    admin_schedule(name="clash", task=ADD_TASK, args=[5, 5])
    settings.JOBS_SCHEDULES = {"clash": {"task": "tests.testapp.tasks.record_effect",
                                         "cron": "*/5 * * * *", "args": ["k"]}}  # fmt: skip
    with caplog.at_level(logging.ERROR, logger="jobs.maintenance.periodic"):
        (result,) = periodic.run_due(now=T0 + timedelta(minutes=3))
    assert Task.objects.get(pk=result.task_id).args == [5, 5]  # the admin's, unchanged
    assert Schedule.objects.get(pk="clash").source == "admin"
    assert "schedule name taken by a schedule added in the admin" in caplog.text


# Run now ---------------------------------------------------------------------------------------


def test_run_now_enqueues_each_schedule_at_once_and_reports_the_rest(settings):
    settings.JOBS_SCHEDULES = {"nightly": {"task": ADD_TASK, "cron": "0 3 * * *", "args": [2, 2]}}
    periodic.run_due(now=T0)
    admin_schedule(name="digest", enabled=False)  # paused, still run now on request
    admin_schedule(name="gone", task="tests.testapp.tasks.removed_since")
    ScheduleFactory(name="undeclared")  # a declaration's row that outlived it
    client = logged_in("run_schedule")
    selected = ["nightly", "digest", "gone", "undeclared"]
    data = {"action": "run_now_schedules", "_selected_action": selected}
    messages = messages_of(client.post(CHANGELIST, data, follow=True))
    assert messages == [
        "2 schedules run now (a task each); 2 skipped: 1 not a valid schedule (no longer "
        "declared, or refused), 1 task not found"
    ]
    tasks = Task.objects.filter(idempotency_key__contains=":now:")
    assert sorted(tuple(t.args) for t in tasks) == [(1, 2), (2, 2)]
    assert all(t.summary.endswith("run now by operator") for t in tasks)
    assert Schedule.objects.get(pk="digest").last_run_at is None  # its slots are untouched


def test_run_now_from_the_schedules_page():
    admin_schedule(name="digest")
    run = reverse("admin:jobs_schedule_run_now", args=["digest"])
    viewer = logged_in(username="viewer")
    assert run not in viewer.get(change_url("digest")).content.decode()
    assert viewer.post(run).status_code == 403
    assert Client().post(run).status_code == 302  # to the login page
    runner = logged_in("run_schedule")
    assert run in runner.get(change_url("digest")).content.decode()
    assert runner.get(run).status_code == 405
    response = runner.post(run, follow=True)
    assert messages_of(response) == ["1 schedule run now (a task each)"]
    assert response.redirect_chain[-1][0] == change_url("digest")
    (task,) = Task.objects.all()
    assert task.args == [1, 2]
    missing = reverse("admin:jobs_schedule_run_now", args=["no-such"])
    assert messages_of(runner.post(missing, follow=True)) == [
        "No such schedule: deleted meanwhile?"
    ]
    nul = reverse("admin:jobs_schedule_run_now", args=["a\x00b"])
    assert runner.post(nul).status_code == 302
    assert Task.objects.count() == 1


# Permissions -----------------------------------------------------------------------------------


def test_each_change_needs_its_permission():
    row = admin_schedule(name="digest")
    viewer = logged_in(username="viewer")
    listing = viewer.get(CHANGELIST).content.decode()
    assert 'value="run_now_schedules"' not in listing
    assert ADD not in listing
    assert viewer.get(ADD).status_code == 403
    assert viewer.post(ADD, form(name="new")).status_code == 403
    values = form(cron="0 0 * * *", version="0")
    del values["name"]
    viewer.post(change_url("digest"), values)
    data = {"action": "run_now_schedules", "_selected_action": ["digest"]}
    viewer.post(CHANGELIST, data)
    delete = reverse("admin:jobs_schedule_delete", args=["digest"])
    assert viewer.post(delete, {"post": "yes"}).status_code == 403
    row.refresh_from_db()
    assert (row.cron, row.version) == ("*/5 * * * *", 0)
    assert not Schedule.objects.filter(pk="new").exists()
    assert not Task.objects.exists()
    # Staff with no permission of jobs at all, and nobody logged in.
    nobody = Client()
    nobody.force_login(UserFactory(username="staff-only", is_staff=True))
    assert nobody.get(CHANGELIST).status_code == 403
    assert Client().get(ADD).status_code == 302  # to the login page
    assert Client().post(CHANGELIST, data).status_code == 302


def test_the_permissions_are_the_models(db):
    client = logged_in("add_schedule", "change_schedule", "delete_schedule", "run_schedule")
    client.post(ADD, form())
    delete = reverse("admin:jobs_schedule_delete", args=["digest"])
    client.post(delete, {"post": "yes"})
    assert not Schedule.objects.exists()
