"""Rate limits: at most N starts of a key per window, decided and counted by the claim."""

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, connection, connections, transaction
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from jobs.maintenance import rounds
from jobs.metrics import waiting
from jobs.models import RateWindow, Task
from jobs.states import Status
from jobs.tasks.definition import TaskOptionError
from jobs.testing import drain
from tests.factories import TaskFactory, UserFactory
from tests.helpers import claim, staff
from tests.testapp import django_tasks, tasks

pytestmark = pytest.mark.django_db

# A moment at the start of a whole minute, so windows of 1 s and 60 s both begin there.
T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def rated(key, count, period, number, **fields):
    return [
        TaskFactory(rate_key=key, rate_limit=count, rate_period=period, run_after=T0, **fields)
        for _ in range(number)
    ]


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def claimed_keys(tasks_claimed):
    counts: dict = {}
    for task in tasks_claimed:
        counts[task.rate_key] = counts.get(task.rate_key, 0) + 1
    return counts


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite rebuilds tables it alters")
def test_the_counting_trigger_outlives_the_migrations_that_rebuild_the_table():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'jobs_task'"
        )
        assert ("jobs_task_rate_count",) in cursor.fetchall()


def test_a_claim_starts_no_more_of_a_key_per_window_than_its_limit():
    rated("partner:1", 3, 1, 10)
    rated("partner:2", 5, 60, 10)
    plain = TaskFactory.create_batch(4, run_after=T0)
    first = claim("w", 100, lease_seconds=30, now=at(0.2))
    assert claimed_keys(first) == {"partner:1": 3, "partner:2": 5, None: 4}
    assert {task.pk for task in plain} <= {task.pk for task in first}
    # Later in the same windows: nothing more, though the first ones already ended.
    Task.objects.filter(status=Status.RUNNING).update(status=Status.SUCCEEDED)
    assert claim("w", 100, lease_seconds=30, now=at(0.9)) == []
    # The next second opens partner:1's window, not partner:2's minute.
    assert claimed_keys(claim("w", 100, lease_seconds=30, now=at(1.0))) == {"partner:1": 3}
    assert claimed_keys(claim("w", 100, lease_seconds=30, now=at(60.0))) == {
        "partner:1": 3, "partner:2": 5,
    }  # fmt: skip


def test_held_tasks_stay_pending_with_no_attempt_used_and_no_error():
    rated("k", 1, 60, 3)
    claim("w", 10, lease_seconds=30, now=at(1))
    held = Task.objects.filter(status=Status.PENDING)
    assert held.count() == 2
    assert set(held.values_list("attempts", "last_error", "worker_id")) == {(0, "", "")}


def test_the_window_counts_starts_and_a_claim_in_a_fresh_window_resets_it():
    rated("k", 2, 10, 5)
    claim("w", 1, lease_seconds=30, now=at(3))
    window = RateWindow.objects.get(key="k")
    assert (window.window_start, window.period, window.rate_limit, window.started) == (
        int(T0.timestamp()), 10, 2, 1,
    )  # fmt: skip
    claim("w", 10, lease_seconds=30, now=at(4))
    assert RateWindow.objects.get(key="k").started == 2
    claim("w", 10, lease_seconds=30, now=at(12))
    window = RateWindow.objects.get(key="k")
    assert (window.window_start, window.started) == (int(T0.timestamp()) + 10, 2)
    assert window.opens_at == at(20)


def test_claim_order_within_a_key_and_other_keys_are_not_held_behind_a_full_one():
    low = rated("k", 1, 60, 1, priority=0)
    high = rated("k", 1, 60, 1, priority=5)
    rated("full", 1, 60, 20)
    claim("w", 1, lease_seconds=30, now=at(0))  # fills one of the keys
    free = rated("free", 1, 60, 1)
    claimed = claim("w", 10, lease_seconds=30, now=at(1))
    assert claimed_keys(claimed).get("free") == 1
    assert free[0].pk in {task.pk for task in claimed}
    # Within a key, claim order: the higher priority first, then the other in a later window.
    k_order = [t.pk for t in claim("w", 1, lease_seconds=30, now=at(0)) if t.rate_key == "k"]
    k_order += [t.pk for t in claim("w", 10, lease_seconds=30, now=at(60)) if t.rate_key == "k"]
    k_order += [t.pk for t in claim("w", 10, lease_seconds=30, now=at(120)) if t.rate_key == "k"]
    assert [pk for pk in k_order if pk in (low[0].pk, high[0].pk)][-2:] in (
        [high[0].pk, low[0].pk],
        [low[0].pk],
    )


def test_a_clock_stepped_back_opens_no_window_early():
    rated("k", 2, 10, 6)
    assert len(claim("w", 10, lease_seconds=30, now=at(25))) == 2  # the window of 20 s
    # A worker whose clock is 10 s behind is in the window of 10 s: it counts in the later one.
    assert claim("w", 10, lease_seconds=30, now=at(15)) == []
    assert RateWindow.objects.get(key="k").window_start == int(T0.timestamp()) + 20
    assert len(claim("w", 10, lease_seconds=30, now=at(30))) == 2


def test_a_limit_changed_while_tasks_wait_applies_from_the_next_window():
    rated("k", 1, 60, 3)
    assert len(claim("w", 10, lease_seconds=30, now=at(0))) == 1
    # The task was redeployed with 5 a minute: the rows waiting and new ones carry it.
    Task.objects.filter(rate_key="k", status=Status.PENDING).update(rate_limit=5)
    rated("k", 5, 60, 3)
    # In the same window, the new limit counts what started already: 4 more, not 5.
    assert len(claim("w", 10, lease_seconds=30, now=at(1))) == 4
    assert claim("w", 10, lease_seconds=30, now=at(2)) == []
    # A new period starts a fresh window.
    Task.objects.filter(rate_key="k", status=Status.PENDING).update(rate_period=1)
    assert len(claim("w", 10, lease_seconds=30, now=at(3))) == 1


def test_options_from_either_declaration_using_and_the_queue_setting():
    one = tasks.add.using(rate_limit="10/s").enqueue(1, 2).record
    assert (one.rate_key, one.rate_limit, one.rate_period) == ("tests.testapp.tasks.add", 10, 1)
    two = tasks.add.using(rate_key="partner:7", rate_limit="100/m").enqueue(1, 2).record
    assert (two.rate_key, two.rate_limit, two.rate_period) == ("partner:7", 100, 60)
    three = django_tasks.multiply.using(rate_key="p", rate_limit="5/10s").enqueue(2, 3).record
    assert (three.rate_key, three.rate_limit, three.rate_period) == ("p", 5, 10)
    four = django_tasks.rate_limited_multiply.enqueue(2, 3).record
    assert (four.rate_key, four.rate_limit, four.rate_period) == (
        "tests.testapp.django_tasks.rate_limited_multiply", 100, 60,
    )  # fmt: skip
    ids = tasks.add.using(rate_limit="2/h").enqueue_many([(1, 2), (3, 4)])
    rows = set(Task.objects.filter(pk__in=ids).values_list("rate_key", "rate_limit", "rate_period"))
    assert rows == {("tests.testapp.tasks.add", 2, 3600)}
    with override_settings(JOBS_QUEUES={"emails": {"rate_limit": "10/s"}}):
        mail = tasks.add.using(queue="emails").enqueue(1, 2).record
        own = tasks.add.using(queue="emails", rate_limit="1/s").enqueue(1, 2).record
        other = tasks.add.enqueue(1, 2).record
    assert (mail.rate_key, mail.rate_limit, mail.rate_period) == ("queue:emails", 10, 1)
    assert own.rate_key == "tests.testapp.tasks.add"  # its own limit, not the queue's
    assert other.rate_key is None


@pytest.mark.parametrize(
    "options",
    [
        {"rate_limit": "0/s"},
        {"rate_limit": "-1/s"},
        {"rate_limit": "nan/s"},
        {"rate_limit": "1e400/s"},
        {"rate_limit": "10/s\x00"},
        {"rate_limit": "10" * 100 + "/s"},
        {"rate_limit": 10},
        {"rate_limit": "10/fortnight"},
        {"rate_key": "k\x00", "rate_limit": "1/s"},
        {"rate_key": "\ud800", "rate_limit": "1/s"},
        {"rate_key": "k" * 201, "rate_limit": "1/s"},
        {"rate_key": "k"},  # a key needs a limit
        {"rate_limit": "1/s", "concurrency_key": "k"},
    ],
)
def test_bad_rates_and_keys_are_refused_before_anything_is_written(options):
    with pytest.raises(TaskOptionError):
        tasks.add.using(**options).enqueue(1, 2)
    assert not Task.objects.exists()


def test_a_queue_setting_that_cannot_be_read_refuses_the_enqueue_with_its_name():
    bad = override_settings(JOBS_QUEUES={"emails": {"rate_limit": "fast"}})
    with bad, pytest.raises(TaskOptionError, match="JOBS_QUEUES\\['emails'\\]"):
        tasks.add.using(queue="emails").enqueue(1, 2)
    limited = override_settings(JOBS_QUEUES={"emails": {"rate_limit": "10/s"}})
    with limited, pytest.raises(TaskOptionError, match="concurrency"):
        tasks.add.using(queue="emails", concurrency_key="a").enqueue(1, 2)
    assert not Task.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_never_exceed_a_limit():
    """Claims from several connections at once: the key's window is decided under its lock
    (PostgreSQL) or the single writer (SQLite), not by luck."""
    rated("k", 7, 60, 60)
    barrier = threading.Barrier(6)
    taken: list = []
    errors: list = []
    lock = threading.Lock()

    def worker(number):
        try:
            barrier.wait(10)
            for _ in range(5):
                got = claim(f"w{number}", 4, lease_seconds=30, now=at(1))
                with lock:
                    taken.extend(got)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert len(taken) == 7
    assert Task.objects.filter(status=Status.RUNNING).count() == 7
    assert RateWindow.objects.get(key="k").started == 7


def test_a_claim_rolled_back_counts_nothing():
    """A worker killed mid-claim: its transaction never commits, and neither does the count."""
    rated("k", 2, 60, 4)

    class Killed(Exception):
        pass

    def claim_then_die():
        with transaction.atomic():
            assert len(claim("w", 10, lease_seconds=30, now=at(1))) == 2
            raise Killed

    with pytest.raises(Killed):
        claim_then_die()
    assert not RateWindow.objects.exists()
    assert Task.objects.filter(status=Status.PENDING, attempts=0).count() == 4
    assert len(claim("w", 10, lease_seconds=30, now=at(2))) == 2


@pytest.mark.django_db(transaction=True)
def test_a_key_another_claim_is_deciding_is_skipped_not_waited_for(postgres_only):
    """While a claim holds a rate key (its transaction's lock of it), other claims skip it."""
    rated("k", 5, 60, 3)
    plain = TaskFactory(run_after=T0)
    holder = connections.create_connection("default")
    try:
        holder.set_autocommit(False)
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(1785689427, hashtext('k'))")
        assert [task.pk for task in claim("w", 10, lease_seconds=30, now=at(1))] == [plain.pk]
        holder.rollback()  # the lock goes with the transaction
        assert len(claim("w", 10, lease_seconds=30, now=at(1))) == 3
    finally:
        holder.close()


def test_keys_with_nul_free_unicode_and_long_names_are_counted_apart():
    rated("ключ:😀", 1, 60, 2)
    rated("k" * 200, 1, 60, 2)
    rated("k" * 199, 1, 60, 2)
    assert len(claim("w", 10, lease_seconds=30, now=at(1))) == 3
    assert RateWindow.objects.count() == 3


# Why it waits: the admin, the dashboard and the owner ----------------------------------------


def test_the_waiting_reason_says_rate_limited_until_the_window_ends():
    rated("partner:7", 2, 1, 5)
    claim("w", 10, lease_seconds=30, now=at(0.5))
    task = Task.objects.filter(status=Status.PENDING).first()
    reason = waiting.why_waiting(task, now=at(0.6))
    assert reason.reasons == [waiting.RATE_LIMITED]
    assert reason.rate_until == at(1)
    line = waiting.operator_lines(reason)[0]
    assert line.startswith("Rate limited until 2026-12-01 12:00:01")
    assert "rate key partner:7, 2 started of 2 a second" in line
    assert waiting.compact_text(reason).startswith("rate limited until 2026-12-01 12:00:01")
    owner = waiting.owner_message(reason)
    assert owner.startswith("Waiting: tasks like this one are limited to 2 a second")
    assert "partner" not in owner
    # Once the window has ended, nothing holds it: it waits for a worker.
    assert waiting.why_waiting(task, now=at(1.1)).reasons == []


def test_the_dashboard_counts_tasks_held_by_rate_windows():
    rated("partner:7", 2, 60, 5)
    rated("free", 5, 60, 2)
    claim("w", 10, lease_seconds=30, now=at(1))
    found = waiting.held_by_rates(now=at(2))
    assert found.held == 3
    assert [(k.key, k.waiting, k.started, k.rate.count) for k in found.keys] == [
        ("partner:7", 3, 2, 2)
    ]
    assert waiting.held_by_rates(now=at(61)).held == 0


def test_the_status_view_tells_the_owner_in_words_and_never_the_key(client):
    owner = UserFactory()
    first, second = (
        TaskFactory(owner=owner, rate_key="customer:secret", rate_limit=1, rate_period=3600)
        for _ in range(2)
    )
    claim("w", 10, lease_seconds=30)
    held = second if Task.objects.get(pk=first.pk).status == Status.RUNNING else first
    client.force_login(owner)
    body = client.get(reverse("jobs:task-status", args=[held.pk])).json()
    assert body["waiting"]["reasons"] == ["rate_limited"]
    assert "limited to 1 an hour" in body["message"]
    assert body["waiting"]["rate_limited_until"]
    assert "secret" not in json.dumps(body)
    # A user with the view permission reads the key and its counts.
    client.force_login(staff("view_task"))
    body = client.get(reverse("jobs:task-status", args=[held.pk])).json()
    assert body["waiting"]["rate"] == {
        "key": "customer:secret", "started": 1, "limit": 1, "period_seconds": 3600,
    }  # fmt: skip


def test_the_admin_task_page_and_the_dashboard_show_it_escaped(admin_client):
    rated("<b>k</b>\x07", 1, 3600, 2)
    claim("w", 10, lease_seconds=30, now=timezone.now())
    held = Task.objects.get(status=Status.PENDING)
    page = admin_client.get(reverse("admin:jobs_task_change", args=[held.pk])).content.decode()
    assert "Rate limited until" in page
    assert "&lt;b&gt;k&lt;/b&gt;\\x07" in page
    dashboard = admin_client.get(reverse("admin:jobs_task_dashboard")).content.decode()
    assert 'id="jobs-rate-held-keys"' in dashboard
    assert "&lt;b&gt;k&lt;/b&gt;\\x07" in dashboard


def test_maintenance_deletes_windows_long_ended_and_counting_starts_afresh():
    rated("old", 1, 60, 2)
    rated("recent", 1, 60, 1)
    claim("w", 10, lease_seconds=86400, now=at(0))  # leases outlive the hour: no rescue
    RateWindow.objects.filter(key="recent").update(window_start=int(T0.timestamp()) + 3600)
    assert rounds.run(now=at(3600 + 61))["windows"] == 1  # ended an hour and a second ago
    assert list(RateWindow.objects.values_list("key", flat=True)) == ["recent"]
    (again,) = claim("w", 10, lease_seconds=30, now=at(3600 + 62))
    assert again.rate_key == "old"
    assert RateWindow.objects.get(key="old").started == 1


def test_drain_in_a_test_keeps_the_limit_and_a_later_now_opens_the_next_window():
    for number in range(3):
        tasks.add.using(rate_limit="2/m").enqueue(number, 1)
    minute = datetime.fromtimestamp((timezone.now().timestamp() // 60 + 1) * 60, tz=UTC)
    assert drain(now=minute).counts[Status.SUCCEEDED] == 2
    assert Task.objects.filter(status=Status.PENDING).count() == 1
    assert drain(now=minute + timedelta(seconds=59)).counts.get(Status.SUCCEEDED, 0) == 0
    assert drain(now=minute + timedelta(seconds=60)).counts[Status.SUCCEEDED] == 1


@pytest.mark.parametrize("fields", [{"rate_limit": None}, {"rate_period": 0}, {"rate_limit": 0}])
def test_the_database_refuses_a_rate_key_without_its_limit_and_period(fields):
    """A row written past enqueue (by hand, another tool) cannot break every claim."""
    (task,) = rated("k", 1, 60, 1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Task.objects.filter(pk=task.pk).update(**fields)
