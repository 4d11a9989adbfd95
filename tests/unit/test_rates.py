"""Reading rate limits ("10/s"), and what a task declaration makes of them."""

import pytest

from jobs.checks import check_queues
from jobs.tasks.definition import TaskOptionError
from jobs.tasks.rates import MAX_RATE_COUNT, Rate, RateError, parse_rate, queue_rate
from tests.testapp import tasks


@pytest.mark.parametrize(
    ("text", "count", "period"),
    [
        ("10/s", 10, 1),
        ("100/m", 100, 60),
        ("1000/h", 1000, 3600),
        ("5/d", 5, 86400),
        ("3/10s", 3, 10),
        (" 7 / 2 min ", 7, 120),
        ("1/SECOND", 1, 1),
        ("2/hours", 2, 3600),
        ("1/366d", 1, 366 * 86400),
        (f"{MAX_RATE_COUNT}/s", MAX_RATE_COUNT, 1),
    ],
)
def test_rates_read_as_a_count_per_period_in_seconds(text, count, period):
    assert parse_rate(text) == Rate(count, period)


@pytest.mark.parametrize(
    "value",
    [
        "0/s", "-1/s", "+1/s", "1.5/s", "nan/s", "inf/s", "1e400/s", "10/0s", "10/-1s",
        "10", "/s", "10/", "10/fortnight", "10/s/s", "10 per second", "", " ",
        "10/s\x00", "\x0010/s", "1" * 41, "10/" + "9" * 30 + "s", "1/367d",
        f"{MAX_RATE_COUNT + 1}/s", "\u0661\u0660/s",  # Arabic-Indic digits: not ASCII
        10, 10.0, None, True, b"10/s", ["10/s"], float("nan"),
    ],
)  # fmt: skip
def test_anything_else_is_refused_with_what_is_expected(value):
    with pytest.raises(RateError, match='such as "10/s"'):
        parse_rate(value)


def test_a_rate_says_itself_in_words():
    assert parse_rate("10/s").words == "10 a second"
    assert parse_rate("100/m").words == "100 a minute"
    assert parse_rate("1/h").words == "1 an hour"
    assert parse_rate("3/10s").words == "3 every 10 seconds"
    assert parse_rate("3/5m").words == "3 every 5 minutes"
    assert parse_rate("2000/2d").words == "2,000 every 2 days"


def test_a_queue_setting_gives_its_queues_a_rate():
    setting = {"emails": {"rate_limit": "10/s"}, "other": {}}
    assert queue_rate(setting, "emails") == Rate(10, 1)
    assert queue_rate(setting, "other") is None
    assert queue_rate(setting, "absent") is None
    assert queue_rate({"emails": "10/s"}, "emails") is None  # jobs.checks refuses it
    with pytest.raises(RateError):
        queue_rate({"emails": {"rate_limit": "0/s"}}, "emails")


def test_declarations_keep_the_rate_read_and_refuse_bad_ones_at_once():
    task = tasks.add.using(rate_limit="10/s")
    assert task.rate_limit == Rate(10, 1)
    assert task.resolved_rate() == ("tests.testapp.tasks.add", Rate(10, 1))
    assert task.using(rate_key="partner:1").resolved_rate() == ("partner:1", Rate(10, 1))
    for options in ({"rate_limit": "1e400/s"}, {"rate_key": "\ud800", "rate_limit": "1/s"}):
        with pytest.raises(TaskOptionError):
            tasks.add.using(**options)
    with pytest.raises(TaskOptionError, match="not both"):
        tasks.add.using(rate_limit="1/s", concurrency_limit=2)
    with pytest.raises(TaskOptionError, match="has no limit"):
        tasks.add.using(rate_key="k").resolved_rate()


@pytest.mark.parametrize(
    ("value", "check_id", "fragment"),
    [
        ([("emails", "10/s")], "jobs.E040", "must be a dict of queue name"),
        ({"emails": "10/s"}, "jobs.E040", "must be a dict of options (rate_limit)"),
        ({"emails": {"rate": "10/s"}}, "jobs.E040", "must be a dict of options"),
        ({"e\x00mails": {"rate_limit": "10/s"}}, "jobs.E040", "is no queue name"),
        ({1: {"rate_limit": "10/s"}}, "jobs.E040", "is no queue name"),
        ({"emails": {"rate_limit": "1e400/s"}}, "jobs.E041", "JOBS_QUEUES['emails']: A rate"),
        ({"emails": {"rate_limit": "0/s"}}, "jobs.E041", 'such as "10/s"'),
    ],
)
def test_a_bad_queues_setting_is_reported_at_startup(settings, value, check_id, fragment):
    settings.JOBS_QUEUES = value
    (error,) = check_queues(None)
    assert (error.id, fragment in error.msg) == (check_id, True), error.msg


def test_a_good_queues_setting_passes(settings):
    settings.JOBS_QUEUES = {"emails": {"rate_limit": "10/s"}, "reports": {"rate_limit": None}}
    assert check_queues(None) == []
