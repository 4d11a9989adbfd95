"""Rate limits and rate keys of every kind: read, or refused with a RateError/TaskOptionError.

Property-based (hypothesis), the keys through the real database of the run: a key is stored,
claimed and counted under exactly its text, or refused before any write.
"""

import pytest
from django.db import transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jobs.exceptions import PayloadError
from jobs.models import RateWindow, Task
from jobs.tasks.definition import TaskOptionError
from jobs.tasks.rates import MAX_RATE_COUNT, MAX_RATE_PERIOD, RateError, parse_rate
from tests.helpers import claim_for_dispatch
from tests.hostile.values import hostile_floats, hostile_text, scalars
from tests.testapp import tasks

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
rate_like = st.one_of(
    hostile_text,
    scalars,
    st.builds(
        lambda n, sep, k, unit: f"{n}{sep}{k}{unit}",
        st.one_of(st.integers().map(str), hostile_floats.map(str), st.sampled_from(["", "-1"])),
        st.sampled_from(["/", " / ", "//", "per"]),
        st.one_of(st.just(""), st.integers().map(str)),
        st.sampled_from(["s", "m", "h", "d", "minutes", "x", "", "s\x00", "\ud800"]),
    ),
)


@PROPERTY
@given(value=rate_like)
@example(value="1e400/s")
@example(value="nan/s")
@example(value="10/s" + "\x00")
@example(value="9" * 4400 + "/s")
def test_a_rate_is_read_within_its_bounds_or_refused(value):
    if value is None:  # using()'s "unchanged"
        return
    try:
        rate = parse_rate(value)
    except RateError:
        with pytest.raises(TaskOptionError):
            tasks.add.using(rate_limit=value)
        return
    assert 1 <= rate.count <= MAX_RATE_COUNT
    assert 1 <= rate.period <= MAX_RATE_PERIOD
    assert tasks.add.using(rate_limit=value).rate_limit == rate


@pytest.mark.django_db
@PROPERTY
@given(key=hostile_text)
@example(key="a\x00b")
@example(key="\ud800")
@example(key="é" * 201)
def test_a_rate_key_is_counted_under_its_exact_text_or_refused(key):
    Task.objects.all().delete()
    RateWindow.objects.all().delete()
    try:
        with transaction.atomic():
            task = tasks.add.using(rate_key=key, rate_limit="1/h").enqueue(1, 2).record
    except (TaskOptionError, PayloadError):
        assert not Task.objects.exists(), "a refused key wrote a row"
        return
    (claimed,) = claim_for_dispatch("w", 10, lease_seconds=30)
    assert claimed.id == task.pk
    window = RateWindow.objects.get()
    assert (window.key, window.started) == (key, 1)
