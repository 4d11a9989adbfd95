import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from jobs import enqueue
from jobs.exceptions import PayloadError, UnknownTaskError
from jobs.models import Task
from jobs.states import Status
from tests.factories import UserFactory
from tests.testapp import tasks

pytestmark = pytest.mark.django_db


def test_enqueue_records_a_pending_task_with_the_tasks_defaults():
    task = tasks.add.enqueue(1, b=2).record
    task.refresh_from_db()
    assert task.status == Status.PENDING
    assert task.name == "tests.testapp.tasks.add"
    assert task.payload == {"args": [1], "kwargs": {"b": 2}}
    assert task.queue == "default"
    assert task.attempts == 0
    assert task.max_attempts == 3
    assert task.run_after <= timezone.now()
    assert task.created is True


def test_per_call_options():
    user = UserFactory()
    when = timezone.now() + timedelta(hours=1)
    task = (
        tasks.add.using(
            queue="reports",
            priority=7,
            owner=user,
            summary="Add two",
            run_after=when,
            max_attempts=9,
        )
        .enqueue(1, 2)
        .record
    )
    task.refresh_from_db()
    assert (task.queue, task.priority, task.owner, task.summary) == ("reports", 7, user, "Add two")
    assert task.run_after == when
    assert task.max_attempts == 9


def test_delay_sets_run_after():
    before = timezone.now()
    task = tasks.add.using(delay=30).enqueue(1, 2).record
    assert (
        before + timedelta(seconds=30) <= task.run_after <= timezone.now() + timedelta(seconds=30)
    )


def test_run_after_and_delay_together_are_refused():
    with pytest.raises(ValueError, match="either run_after or delay"):
        tasks.add.using(delay=1, run_after=timezone.now()).enqueue(1, 2)


def test_enqueue_by_name_and_unknown_name():
    assert enqueue("tests.testapp.tasks.add", (1, 2)).name == "tests.testapp.tasks.add"
    with pytest.raises(UnknownTaskError, match=r"No task is registered as 'nope\.missing'"):
        enqueue("nope.missing")
    assert not Task.objects.filter(name="nope.missing").exists()


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((object(),), {}, r"args\[0\] is object"),
        ((), {"when": timezone.now()}, r"kwargs\['when'\] is datetime.datetime"),
        (([1, {"deep": {2, 3}}],), {}, r"args\[0\]\[1\]\['deep'\] is set"),
        ((), {"x": {1: "a"}}, r"kwargs\['x'\] has the key 1 \(int\)"),
        ((float("nan"),), {}, r"args\[0\] is nan"),
    ],
)
def test_non_json_payloads_are_refused_naming_the_value(args, kwargs, message):
    with pytest.raises(PayloadError, match=message):
        tasks.add.enqueue(*args, **kwargs)
    assert Task.objects.count() == 0


def test_tuples_are_stored_as_lists():
    task = tasks.add.enqueue((1, 2), 3).record
    task.refresh_from_db()
    assert task.payload["args"] == [[1, 2], 3]


def test_oversize_payload_is_refused(settings):
    settings.JOBS_MAX_PAYLOAD_BYTES = 100
    with pytest.raises(PayloadError, match="over the limit of 100"):
        tasks.add.enqueue("x" * 200, 1)
    assert Task.objects.count() == 0


def test_long_summaries_are_shortened_not_refused():
    task = tasks.add.using(summary="s" * 300).enqueue(1, 2).record
    assert len(task.summary) == 255


def test_same_idempotency_key_returns_the_existing_task():
    first = tasks.add.using(idempotency_key="invoice-42").enqueue(1, 2).record
    second = tasks.add.using(idempotency_key="invoice-42").enqueue(5, 6).record
    assert second.pk == first.pk
    assert (first.created, second.created) == (True, False)
    assert second.payload["args"] == [1, 2]
    # Another task name has its own key space.
    other = tasks.record_effect.using(idempotency_key="invoice-42").enqueue("k").record
    assert other.pk != first.pk
    assert Task.objects.count() == 2


def test_duplicate_key_does_not_break_the_callers_transaction():
    with transaction.atomic():
        tasks.add.using(idempotency_key="k").enqueue(1, 2)
        tasks.add.using(idempotency_key="k").enqueue(1, 2)
        tasks.add.enqueue(3, 4)  # the transaction is still usable
    assert Task.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_rolled_back_transaction_leaves_no_task():
    def failing_request():
        with transaction.atomic():
            tasks.add.enqueue(1, 2)
            raise RuntimeError("the request failed")

    with pytest.raises(RuntimeError):
        failing_request()
    assert Task.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_enqueues_with_one_key_make_one_task(postgres_only):
    """Two connections enqueue one key while the first has not committed: one task results.

    The second insert waits on the first's uncommitted row (the unique index), then returns the
    row the first committed: no read-then-write window.
    """
    first_inserted = threading.Event()
    results, errors = {}, []

    def first():
        try:
            with transaction.atomic():
                results["first"] = tasks.add.using(idempotency_key="same").enqueue(1, 1).record.pk
                first_inserted.set()
                threading.Event().wait(0.5)  # hold the uncommitted row while the second tries
        except Exception as exc:
            errors.append(exc)
        finally:
            first_inserted.set()
            connection.close()

    def second():
        try:
            first_inserted.wait(10)
            with transaction.atomic():
                task = tasks.add.using(idempotency_key="same").enqueue(2, 2).record
                results["second"] = (task.pk, task.created)
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert results["second"] == (results["first"], False)
    assert Task.objects.filter(idempotency_key="same").count() == 1


def test_anonymous_owner_is_stored_as_no_owner():
    from django.contrib.auth.models import AnonymousUser

    task = tasks.add.using(owner=AnonymousUser()).enqueue(1, 2).record
    assert task.owner is None


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:notaport/0",  # refused when the client is made
        "redis://u:secret@127.0.0.1:99999/1",
        "redis://u:secret@127.0.0.1:1/0?bogus=1",  # refused at the first send (TypeError)
    ],
)
def test_a_broker_url_its_client_cannot_read_never_fails_a_committed_enqueue(
    url, settings, caplog, django_capture_on_commit_callbacks
):
    settings.JOBS_TRANSPORT = url
    for number in range(2):  # logged once, the second enqueue as quiet as the poll that finds it
        with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
            record = tasks.add.enqueue(number, b=1).record
        assert Task.objects.filter(pk=record.pk, status=Status.PENDING).exists()
    [line] = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("jobs.transports") and r.levelname == "WARNING"
    ]
    assert "workers will poll" in line
    assert "secret" not in line
