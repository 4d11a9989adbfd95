import itertools
import random

import pytest
from django.db import OperationalError

from jobs.exceptions import PermanentError, TransientError
from jobs.tasks.retry import Backoff, is_transient, user_message


def test_delays_grow_with_each_attempt_and_stay_under_the_cap():
    backoff = Backoff(base=2, factor=2, maximum=60, jitter=0.25)
    rng = random.Random(7)
    delays = [backoff.delay(attempt, rng) for attempt in range(1, 8)]
    assert all(later > earlier for earlier, later in itertools.pairwise(delays[:6]))
    assert 1.5 <= delays[0] <= 2
    assert all(d <= 60 for d in delays)
    assert delays[-1] >= 45  # capped at 60, minus at most 25% jitter


def test_jitter_spreads_delays():
    backoff = Backoff(base=10, jitter=0.5)
    rng = random.Random(1)
    samples = {round(backoff.delay(1, rng), 3) for _ in range(50)}
    assert len(samples) > 40
    assert all(5 <= s <= 10 for s in samples)


def test_no_jitter_is_exact():
    assert Backoff(base=3, factor=3, jitter=0).delay(3) == 27


@pytest.mark.parametrize("kwargs", [{"factor": 0.5}, {"jitter": 1.0}, {"base": -1}])
def test_nonsense_backoff_is_refused(kwargs):
    with pytest.raises(ValueError, match="Backoff needs"):
        Backoff(**kwargs)


class Flaky(Exception):
    pass


@pytest.mark.parametrize(
    ("exc", "extra", "expected"),
    [
        (ConnectionRefusedError("refused"), (), True),
        (TimeoutError("slow"), (), True),
        (OperationalError("server closed the connection"), (), True),
        (TransientError("later"), (), True),
        (PermanentError("bad file"), (), False),
        (ValueError("bug"), (), False),
        (KeyError("missing"), (), False),
        (Flaky("declared"), (Flaky,), True),
    ],
)
def test_classification(exc, extra, expected):
    assert is_transient(exc, extra) is expected


def test_user_messages_never_leak_internal_detail():
    assert user_message(PermanentError("Please upload a CSV", detail="mime=image/png"), False) == (
        "Please upload a CSV"
    )
    generic = user_message(KeyError("secret_column"), will_retry=False)
    assert "secret_column" not in generic
    assert "try again" in user_message(ConnectionError("10.0.0.3 refused"), True)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base": float("nan")},
        {"factor": float("nan")},
        {"maximum": float("nan")},
        {"jitter": float("nan")},
        {"base": float("inf")},
        {"factor": float("inf")},
        {"maximum": float("inf")},
        {"maximum": 365 * 86400 + 1},  # past a year, the bound of JOBS_BACKOFF_MAX
        {"base": "5"},
        {"base": True},
    ],
)
def test_non_finite_or_non_number_backoff_is_refused(kwargs):
    with pytest.raises((ValueError, TypeError), match="Backoff needs"):
        Backoff(**kwargs)


@pytest.mark.parametrize("attempt", [1025, 1100, 100_000, 2**31 - 1])
def test_delay_of_a_late_attempt_is_the_cap_not_an_overflow(attempt):
    # max_attempts may be up to 2**31 - 1; 2.0 ** 1100 raised OverflowError, which failed a
    # task with attempts left as if it were a bug in the task.
    assert Backoff(jitter=0).delay(attempt) == 3600
    assert Backoff(base=0, jitter=0).delay(attempt) == 0
    assert Backoff(factor=1, base=5, jitter=0).delay(attempt) == 5
