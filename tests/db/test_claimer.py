"""The claimer built alone: when a claim is worth starting again, and when the next task is due."""

import os
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import RateWindow
from jobs.worker.claimer import Claimer
from tests.factories import TaskFactory
from tests.helpers import retry

# The claim thread has a connection of its own: rows must be committed.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def claimer():
    wake_read, wake_write = os.pipe()
    claimer = Claimer("host:1:claimer", [], 60, wake_write, retry=retry)
    yield claimer
    claimer.close()
    os.close(wake_read)
    os.close(wake_write)


def claim(claimer, wanted, news_meanwhile=False):
    claimer.start(wanted, [])
    if news_meanwhile:
        claimer.news()  # a task enqueued after the claim's snapshot, say
    return claimer.collect(wait=True)


def test_after_a_claim_that_found_less_than_it_asked_it_waits_for_news(claimer):
    TaskFactory()
    assert len(claim(claimer, 5)) == 1
    assert not claimer.may_find_more
    claimer.news()
    assert claimer.may_find_more


def test_news_while_a_claim_runs_keeps_the_next_claim_allowed(claimer):
    assert claim(claimer, 5, news_meanwhile=True) == []
    assert claimer.may_find_more


def test_a_claim_that_found_all_it_asked_for_looks_again_at_once(claimer):
    TaskFactory.create_batch(2)
    assert len(claim(claimer, 2)) == 2
    assert claimer.may_find_more
    assert claimer.can_start()


def test_the_next_due_task_wakes_the_worker_when_it_is_due(claimer):
    assert claimer.next_due_at() is None  # nothing delayed
    claim(claimer, 1)
    TaskFactory(run_after=timezone.now() + timedelta(seconds=30))
    wake_at = claimer.next_due_at()
    assert 25 < wake_at - time.monotonic() <= 30


def test_how_many_is_the_pools_answer_until_a_claim_found_less_than_it_asked(claimer):
    asked = []

    def wanted(claim_seconds):
        asked.append(claim_seconds)
        return 7

    assert claimer.how_many(wanted) == 7
    assert asked == [claimer.seconds]
    claim(claimer, 5)  # nothing due
    assert claimer.how_many(wanted) == 0
    claimer.news()
    assert claimer.how_many(wanted) == 7


def test_an_idle_worker_wakes_for_the_next_delayed_task_a_busy_one_does_not(claimer):
    claim(claimer, 1)
    TaskFactory(run_after=timezone.now() + timedelta(seconds=30))
    claimer.plan_wake(idle=True)
    assert 25 < claimer.wake_at() - time.monotonic() <= 30
    claimer.plan_wake(idle=False)
    assert claimer.wake_at() is None


def test_the_next_due_time_is_read_again_only_after_news_a_notification_or_a_claim(claimer):
    claim(claimer, 1)
    TaskFactory(run_after=timezone.now() + timedelta(seconds=30))
    claimer.plan_wake(idle=True)
    first = claimer.wake_at()
    TaskFactory(run_after=timezone.now() + timedelta(seconds=10))  # unannounced: not seen yet
    claimer.plan_wake(idle=False)
    claimer.plan_wake(idle=True)  # the loop's other rounds (a heartbeat, a look at the peers)
    assert claimer.wake_at() == first
    claimer.notified(1.0)
    claimer.plan_wake(idle=True)
    assert 5 < claimer.wake_at() - time.monotonic() <= 10
    TaskFactory(run_after=timezone.now() + timedelta(seconds=3))
    claimer._deaf_until = time.monotonic() + 60  # letting notifications pass, it still reads
    assert claimer.notified(1.0) is False
    claimer.plan_wake(idle=True)
    assert 0 < claimer.wake_at() - time.monotonic() <= 3
    TaskFactory(run_after=timezone.now() + timedelta(seconds=1))
    claim(claimer, 1)  # a claim (its start) also makes it read again
    claimer.plan_wake(idle=True)
    assert claimer.wake_at() - time.monotonic() <= 1


def test_the_claim_goes_through_the_retry_the_worker_gives():
    calls = []

    def worker_retry(operation, what, **options):
        calls.append((what, sorted(options)))
        return retry(operation, what, **options)

    TaskFactory()
    wake_read, wake_write = os.pipe()
    claimer = Claimer("host:1:claimer", [], 60, wake_write, retry=worker_retry)
    try:
        assert len(claim(claimer, 1)) == 1
    finally:
        claimer.close()
        os.close(wake_read)
        os.close(wake_write)
    assert calls == [("claim", ["abandon", "on_fault"])]


def test_a_full_rate_window_wakes_the_worker_when_it_ends(claimer):
    long_due = timezone.now() - timedelta(hours=2)
    TaskFactory.create_batch(3, rate_key="k", rate_limit=2, rate_period=3600, run_after=long_due)
    assert len(claim(claimer, 5)) == 2  # the window is full; one task waits
    assert claimer.rate_held()
    wake_at = claimer.next_due_at()
    window_end = (int(timezone.now().timestamp()) // 3600 + 1) * 3600
    assert abs((wake_at - time.monotonic()) - (window_end - time.time())) < 5
    # A window that ended after the last claim looked, but before now, wakes it at once: the
    # claim saw it full, the next one will not.
    RateWindow.objects.update(window_start=int(time.time()) - 1 - 3600)
    claimer.started_at = timezone.now() - timedelta(seconds=2)
    assert claimer.rate_held()
    assert claimer.next_due_at() <= time.monotonic()
    # Once a claim has looked after the window ended, nothing is held.
    claimer.started_at = timezone.now()
    assert not claimer.rate_held()


def test_a_claim_on_a_notification_that_found_nothing_lets_the_next_ones_pass(claimer):
    """One NOTIFY reaches the whole idle fleet: the workers that claimed nothing sit out."""
    claimer.DEAF_FIRST = 0.4  # long enough that a loaded machine is still within the pause
    assert claim(claimer, 5) == []  # idle: nothing more until news
    assert claimer.notified(poll_interval=4.0)
    assert claim(claimer, 5) == []  # the notification's task went to another worker
    assert not claimer.notified(poll_interval=4.0)  # within the pause (0.2..0.4 s)
    assert not claimer.may_find_more
    claimer.news()  # a child finished, a poll: still claims
    assert claimer.may_find_more
    assert claim(claimer, 5) == []  # not the notification's claim: the pause stays as it was
    assert claimer._deaf_seconds == claimer.DEAF_FIRST
    time.sleep(claimer.DEAF_FIRST)
    assert claimer.notified(poll_interval=4.0)
    assert claim(claimer, 5) == []
    assert claimer._deaf_seconds == 2 * claimer.DEAF_FIRST  # doubled
    time.sleep(2 * claimer.DEAF_FIRST)
    assert claimer.notified(poll_interval=4.0)
    TaskFactory()
    assert len(claim(claimer, 5)) == 1
    assert claimer._deaf_seconds == claimer.DEAF_FIRST  # halved by a claim that took a task
    assert claimer.notified(poll_interval=4.0)  # and no pause


@pytest.mark.parametrize(("poll_interval", "cap"), [(0.2, 0.05), (1.0, 0.25), (30.0, 1.0)])
def test_the_pause_is_capped_at_a_quarter_of_the_poll_interval_and_a_second(
    claimer, poll_interval, cap
):
    """A burst must not wait a whole poll interval (30 s here) on a fleet that sat out."""
    claim(claimer, 5)
    for _ in range(12):  # 50 ms doubled 12 times would be 200 s
        claimer._deaf_until = 0.0
        assert claimer.notified(poll_interval=poll_interval)
        assert claim(claimer, 5) == []
    assert claimer._deaf_seconds == cap
    assert 0 < claimer._deaf_until - time.monotonic() <= cap
    time.sleep(cap)
    assert claimer.notified(poll_interval=poll_interval)  # the burst's next NOTIFY is heard


def test_a_broker_message_wakes_one_worker_and_is_always_answered(claimer):
    """A broker's message reaches one worker (herd=False): an empty claim on one (a duplicate, a
    task another claim took) starts no pause, and a pause started by a NOTIFY lets it pass."""
    claimer.DEAF_FIRST = 0.4
    claim(claimer, 5)
    for _ in range(3):
        assert claimer.notified(poll_interval=1.0, herd=False)
        assert claim(claimer, 5) == []
    assert claimer._deaf_until <= time.monotonic()
    assert claimer.notified(poll_interval=1.0)
    assert claim(claimer, 5) == []  # a NOTIFY's empty claim: a pause
    assert not claimer.notified(poll_interval=1.0)
    assert claimer.notified(poll_interval=1.0, herd=False)
    assert claimer.may_find_more


def test_news_without_a_notification_never_starts_a_pause(claimer):
    claim(claimer, 5)
    claimer.news()  # a child finished
    assert claim(claimer, 5) == []
    assert claimer.notified(poll_interval=1.0)  # no pause: the empty claim was not on one


def test_a_listener_whose_probe_came_back_says_its_sessions_are_kept(postgres_only):
    """What lets the claim thread prepare its claim without a prepare_threshold: the probe's
    NOTIFY came back on a connection made as the task table's (through a pooler in transaction
    mode it never does: tests/process/test_pgbouncer.py)."""
    from jobs.worker.notify import Listener

    listener = Listener()
    assert not listener.keeps_sessions  # nothing proven yet
    try:
        assert listener.fileno() is not None
        assert listener.keeps_sessions
    finally:
        listener.close()
