"""Every value a task takes is stored and read back identically, or refused before any write.

Property-based (hypothesis), through the real database of the run (SQLite or PostgreSQL), so
the limits are proved the same on both. Each example runs in a savepoint: a value that reached
the database and broke it would show as a database error here, not as a refusal.
"""

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.db import transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jobs.exceptions import PayloadError
from jobs.management.argtypes import queue_caps
from jobs.models import Task
from jobs.tasks import enqueueing, registry
from jobs.tasks.django_api import InvalidTask
from jobs.tasks.payload import MAX_DELAY_SECONDS
from jobs.text import clean_text
from jobs.worker.wire import task_from_values
from tests.helpers import claim_for_dispatch
from tests.hostile.values import hostile_floats, hostile_ints, hostile_text, json_values, same

pytestmark = pytest.mark.django_db

ADD = "tests.testapp.tasks.add"
PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def stored_or_refused(enqueue):
    """Run ``enqueue`` in a savepoint; the task made, or None if refused with no row written."""
    Task.objects.all().delete()
    try:
        with transaction.atomic():
            return enqueue()
    except PayloadError:
        assert not Task.objects.exists(), "a refused value wrote a row"
        return None


def worker_view(task_id):
    """The task as a worker's child gets it: claimed, as the JSON row the claim returns."""
    (claimed,) = claim_for_dispatch("w", 10, lease_seconds=30)
    assert claimed.id == task_id
    return task_from_values(json.loads(claimed.row))


@PROPERTY
@given(args=st.lists(json_values, max_size=3), kwargs=st.dictionaries(hostile_text, json_values))
@example(args=["a\x00b"], kwargs={})
@example(args=["\ud800"], kwargs={})
@example(args=[2**63], kwargs={})
@example(args=[1e16], kwargs={})
@example(args=[-0.0], kwargs={})
@example(args=[], kwargs={"k\x00": 1})
def test_a_payload_is_stored_identically_or_refused(args, kwargs):
    task = stored_or_refused(lambda: enqueueing.enqueue(ADD, args, kwargs))
    if task is None:
        return
    read = Task.objects.get(pk=task.pk)
    assert same(read.args, args)
    assert same(read.kwargs, kwargs)
    running = worker_view(task.pk)
    assert same(running.args, args)
    assert same(running.kwargs, kwargs)


@PROPERTY
@given(args=st.lists(json_values, max_size=3))
@example(args=["a\x00b"])
@example(args=[2**63])
def test_a_bulk_payload_is_stored_identically_or_refused(args):
    def enqueue():
        (task_id,) = enqueueing.enqueue_many(ADD, [(args, {})])
        return Task.objects.get(pk=task_id)

    task = stored_or_refused(enqueue)
    if task is not None:
        assert same(task.args, args)
        assert same(worker_view(task.pk).args, args)


identifiers = st.one_of(hostile_text, st.integers(0, 300).map(lambda n: "q" * n))


@PROPERTY
@given(queue=identifiers, key=st.none() | identifiers, priority=hostile_ints)
@example(queue="q" * 101, key=None, priority=0)
@example(queue="default", key="k" * 256, priority=0)
@example(queue="default", key=None, priority=32768)
@example(queue="a\x00", key=None, priority=0)
@example(queue="a,b", key=None, priority=0)
@example(queue=" lead", key=None, priority=0)
@example(queue="tab\there", key=None, priority=0)
@example(queue="a\nb", key=None, priority=0)
def test_enqueue_options_are_stored_identically_or_refused(queue, key, priority):
    options = {"queue": queue, "idempotency_key": key, "priority": priority}
    for enqueue in (
        lambda: enqueueing.enqueue(ADD, (1, 2), **options),
        lambda: registry.get_task(ADD).using(**options).enqueue(1, 2).record,
    ):
        task = stored_or_refused(enqueue)
        if task is not None:
            read = Task.objects.get(pk=task.pk)
            assert (read.queue, read.idempotency_key, read.priority) == (queue, key, priority)
            # A queue a task can be in is one a worker can select.
            assert queue_caps(f"{queue}:1") == [(queue, 1)]


@PROPERTY
@given(summary=hostile_text)
@example(summary="a\x00b\ud800" + "x" * 300)
def test_a_summary_is_stored_as_given_or_mended_as_documented(summary):
    task = stored_or_refused(lambda: enqueueing.enqueue(ADD, (1, 2), summary=summary))
    read = Task.objects.get(pk=task.pk)
    assert read.summary == clean_text(summary, 255)
    if "\x00" not in summary and not any(0xD800 <= ord(c) <= 0xDFFF for c in summary):
        assert read.summary == summary or len(summary) > 255


@PROPERTY
@given(delay=st.one_of(hostile_floats, hostile_ints, st.floats().map(lambda s: _delta(s))))
@example(delay=float("nan"))
@example(delay=float("inf"))
@example(delay=-1e300)
@example(delay=timedelta.max)
def test_a_delay_is_applied_or_refused(delay):
    task = stored_or_refused(lambda: enqueueing.enqueue(ADD, (1, 2), delay=delay))
    if task is not None:
        read = Task.objects.get(pk=task.pk)
        assert read.run_after == task.run_after


def _delta(seconds):
    try:
        return timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        return timedelta.max


@pytest.mark.parametrize("max_attempts", [0, -1, 2**31, True, 1.5])
def test_max_attempts_out_of_range_is_refused_not_replaced(max_attempts):
    task = stored_or_refused(lambda: enqueueing.enqueue(ADD, (1, 2), max_attempts=max_attempts))
    assert task is None


def _declared_twice():  # at module level, as a task's function must be
    pass


def test_a_task_declared_with_max_attempts_zero_is_refused():
    with pytest.raises(PayloadError, match="max attempts"):
        registry.task(max_attempts=0)(_declared_twice)
    with pytest.raises(InvalidTask, match="max attempts"):  # Django's exception too
        registry.task(max_attempts=0)(_declared_twice)


@pytest.mark.parametrize(
    ("options", "args", "message"),
    [
        ({}, ("a\x00b", 2), "NUL"),
        ({}, (2**64, 2), "64-bit"),
    ],
)
def test_the_django_tasks_backend_refuses_the_same_values(options, args, message):
    from tests.testapp import django_tasks

    def enqueue():
        return django_tasks.multiply.using(**options).enqueue(*args)

    with pytest.raises(PayloadError, match=message):
        enqueue()
    assert stored_or_refused(enqueue) is None


# run_after: aware datetimes over the whole range of datetime, in every fixed offset.
offsets = st.timedeltas(min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23))
aware_datetimes = st.datetimes(timezones=st.builds(timezone, offsets))
FAR = timedelta(seconds=MAX_DELAY_SECONDS)


def run_after_entry_points(run_after):
    from tests.testapp import django_tasks

    def many():
        (task_id,) = enqueueing.enqueue_many(ADD, [(1, 2)], run_after=run_after)
        return Task.objects.get(pk=task_id)

    def django_backend():
        result = django_tasks.multiply.using(run_after=run_after).enqueue(1, 2)
        return Task.objects.get(pk=result.id)

    return {
        "enqueue": lambda: enqueueing.enqueue(ADD, (1, 2), run_after=run_after),
        "using": lambda: registry.get_task(ADD).using(run_after=run_after).enqueue(1, 2).record,
        "enqueue_many": many,
        "django_backend": django_backend,
    }


@PROPERTY
@given(run_after=aware_datetimes)
@example(run_after=datetime.min.replace(tzinfo=timezone(timedelta(hours=5))))
@example(run_after=datetime.max.replace(tzinfo=timezone(timedelta(hours=-5))))
@example(run_after=datetime.min.replace(tzinfo=UTC))
@example(run_after=datetime.max.replace(tzinfo=UTC))
@example(run_after=datetime(2000, 1, 1, tzinfo=UTC))
def test_a_run_after_is_stored_identically_or_refused(run_after):
    now = datetime.now(UTC)
    for entry_point, enqueue in run_after_entry_points(run_after).items():
        task = stored_or_refused(enqueue)
        if task is None:
            assert abs(run_after - now) > FAR - timedelta(days=1), entry_point
            continue
        assert abs(run_after - now) <= FAR + timedelta(days=1), entry_point
        read = Task.objects.get(pk=task.pk)
        assert read.run_after == run_after, entry_point
        if run_after <= now:  # due: a worker claims it and reads it back too
            assert worker_view(task.pk).run_after == run_after, entry_point


@pytest.mark.parametrize("run_after", [datetime(2030, 1, 1), datetime.max, datetime.min])
def test_a_naive_run_after_is_refused_everywhere(run_after):
    for entry_point, enqueue in run_after_entry_points(run_after).items():
        if entry_point == "django_backend":
            continue  # Django's Task.using refuses a naive run_after itself
        with pytest.raises(PayloadError, match="aware"):
            enqueue()
        assert stored_or_refused(enqueue) is None


def test_a_run_after_out_of_range_says_why():
    far = datetime.now(UTC) + FAR + timedelta(days=2)
    with pytest.raises(PayloadError, match="more than 100 years"):
        enqueueing.enqueue(ADD, (1, 2), run_after=far)


def test_an_int_out_of_range_is_refused_in_plain_words():
    with pytest.raises(PayloadError) as refused:
        enqueueing.enqueue(ADD, (2**63, 2))
    assert "outside the 64-bit range" in str(refused.value)
    assert "bits" not in str(refused.value).split("range")[0]


@pytest.mark.parametrize(
    ("args", "kwargs"), [("notalist", {}), ((1,), "notadict"), (5, {}), ((), [("a", 1)])]
)
def test_args_and_kwargs_of_the_wrong_kind_are_refused(args, kwargs):
    with pytest.raises(PayloadError, match=r"must be a (list or a tuple|dict)"):
        enqueueing.enqueue(ADD, args, kwargs)
    assert not Task.objects.exists()


@pytest.mark.parametrize("batch_size", [0, -1, 1.5, None, True])
def test_enqueue_many_refuses_a_batch_size_below_one(batch_size):
    with pytest.raises(ValueError, match="batch_size must be a whole number"):
        enqueueing.enqueue_many(ADD, [(1, 2)], batch_size=batch_size)
    assert not Task.objects.exists()
