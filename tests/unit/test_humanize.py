"""The one duration formatter: the admin, the dashboard and the owner's page all read it."""

import pytest

from jobs.humanize import remaining_text, seconds_text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "—"),
        (0.85, "850 ms"),
        (4.25, "4.2 s"),
        (5, "5 s"),  # a count of seconds
        (3.0, "3.0 s"),  # a measured time
        (42, "42 s"),
        (60, "1 min"),
        (250, "4 min 10 s"),
        (3 * 3600 + 300, "3 h 5 min"),
        (2 * 86400, "2 d"),
        (2 * 86400 + 4 * 3600, "2 d 4 h"),
    ],
)
def test_seconds_read_as_a_person_would_say_them(seconds, text):
    assert seconds_text(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, ""),
        (0, "About 1 s left."),  # never "0 s left" while the task still runs
        (0.4, "About 1 s left."),
        (40.4, "About 40 s left."),
        (59.4, "About 59 s left."),
        (59.6, "About 1 min left."),
        (89, "About 1 min left."),
        (91, "About 2 min left."),
        (1820, "About 30 min left."),
        (7200, "About 2 h left."),
        (3660, "About 1 h 1 min left."),
    ],
)
def test_what_is_left_is_rounded_then_worded_by_the_same_formatter(seconds, text):
    assert remaining_text(seconds) == text
