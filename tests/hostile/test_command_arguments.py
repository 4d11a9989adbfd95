"""Hostile values for every numeric option of every jobs command: a clean usage error, always.

The options are found, not listed: every option of a jobs command that has a ``type`` must be a
bounded number of ``jobs.management.argtypes`` (or one of the few known non-numeric options),
so that a new option is born with these cases.
"""

import math
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command, get_commands, load_command_class
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from jobs import limits
from tests.conftest import ROOT

NON_NUMERIC = {("runworker", "--queues"), ("jobs_health", "--queue"), ("jobs_prune", "--keep")}
HOSTILE = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "1e400",
    "-1e400",
    "-1",
    "-0.5",
    str(10**30),
    "1" * 5000,  # more digits than int() takes
    "9" * 400,  # a float that overflows
    "",
    " ",
    "abc",
    "\x00",
    "1\x00",
    "0x10",
    "1e3" + "0" * 100_000,
    "x" * 100_000,
]


def jobs_commands():
    return sorted(name for name, app in get_commands().items() if app == "jobs")


def parser_of(name):
    return load_command_class("jobs", name).create_parser("manage.py", name)


def typed_options():
    for name in jobs_commands():
        for action in parser_of(name)._actions:
            # Django's --verbosity is an int bounded by its choices.
            if action.type is not None and action.option_strings and not action.choices:
                yield name, action.option_strings[-1], action.type


def numeric_options():
    return [(name, option) for name, option, kind in typed_options() if hasattr(kind, "bounds")]


def test_every_typed_option_is_a_bounded_number_or_known():
    unknown = [
        (name, option)
        for name, option, kind in typed_options()
        if (name, option) not in NON_NUMERIC and not hasattr(kind, "bounds")
    ]
    assert unknown == []
    for name, option in numeric_options():
        bounds = parser_of(name)._option_string_actions[option].type.bounds
        assert bounds["at_most"] is not None, f"{name} {option} has no upper bound"
        assert bounds["at_least"] is not None or bounds["above"] is not None


def test_the_commands_and_options_are_found():
    assert {"runworker", "jobs_health", "jobs_prune", "jobs_stats"} <= set(jobs_commands())
    assert ("runworker", "--concurrency") in numeric_options()
    assert len(numeric_options()) >= 10


@pytest.mark.parametrize("value", HOSTILE, ids=lambda value: repr(value)[:20])
@pytest.mark.parametrize(("command", "option"), numeric_options())
def test_hostile_numbers_are_refused_with_a_usage_error(command, option, value):
    with pytest.raises(CommandError) as refused:
        parser_of(command).parse_args([option, value])
    message = str(refused.value)
    assert message.startswith(f"Error: argument {option}:")
    assert len(message) < 300  # a 100 kB argument is not echoed back whole


@pytest.mark.parametrize("value", HOSTILE, ids=lambda value: repr(value)[:20])
def test_hostile_retention_days_are_refused(value):
    with pytest.raises(CommandError, match="argument --keep: DAYS of failed must be"):
        parser_of("jobs_prune").parse_args(["--keep", f"failed={value}"])


ACCEPT_ZERO = {
    ("runworker", "--grace"),
    ("jobs_health", "--max-wait"),
    ("jobs_health", "--max-failure-rate"),
    ("jobs_health", "--window"),
    ("jobs_health", "--min-tasks"),
    ("jobs_health", "--heartbeat"),
}


@pytest.mark.parametrize(("command", "option"), numeric_options())
def test_zero_is_refused_where_it_means_nothing(command, option):
    parser = parser_of(command)
    if (command, option) in ACCEPT_ZERO:
        parser.parse_args([option, "0"])
    else:
        with pytest.raises(CommandError, match=f"argument {option}: must be"):
            parser.parse_args([option, "0"])


def test_concurrency_is_bounded_by_a_setting(settings):
    parser = parser_of("runworker")
    assert parser.parse_args(["--concurrency", "256"]).concurrency == 256
    with pytest.raises(CommandError, match=r"at most 256, got '100000'.*JOBS_MAX_CONCURRENCY"):
        parser.parse_args(["--concurrency", "100000"])
    settings.JOBS_MAX_CONCURRENCY = 1024
    assert parser.parse_args(["--concurrency", "1000"]).concurrency == 1000


def test_durations_are_bounded_by_a_year():
    parser = parser_of("jobs_stats")
    assert parser.parse_args(["--window", str(limits.MAX_SECONDS)]).window == limits.MAX_SECONDS
    with pytest.raises(CommandError, match="at most 31,536,000"):
        parser.parse_args(["--window", str(limits.MAX_SECONDS + 1)])


@pytest.mark.parametrize("value", ["a\x00b", "x" * 101, "tab\there", "a\nb", "a\u00a0b"])
def test_queue_names_no_task_can_have_are_refused(value):
    with pytest.raises(CommandError, match="argument --queues: the queue name"):
        parser_of("runworker").parse_args(["--queues", value])


@pytest.mark.parametrize("value", ["", " ", "a,b", " lead", "trail ", "a\x00b", "x" * 101, "a\nb"])
def test_jobs_health_refuses_what_is_no_queue_name(value):
    with pytest.raises(CommandError, match="argument --queue: the queue name"):
        parser_of("jobs_health").parse_args(["--queue", value])
    assert parser_of("jobs_health").parse_args(["--queue", "my queue"]).queue == ["my queue"]


def test_call_command_refuses_them_too():
    with pytest.raises(CommandError, match="argument --window: expected a finite number"):
        call_command("jobs_stats", "--window", "inf")


# Through a real process: argparse's exit code 2, one line of usage, no traceback. Each of these
# reached the command's code on the old argument types and ended in a traceback (or, for
# runworker, started a worker whose grace was NaN).
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "args",
    [
        ["runworker", "--burst", "--grace", "nan"],
        ["jobs_stats", "--window", "1e400"],
        ["jobs_health", "--window", "nan"],
        ["jobs_prune", "--keep", "failed=inf"],
        ["jobs_prune", "--dry-run", "--keep", "failed=1e12"],
    ],
    ids=" ".join,
)
def test_a_process_exits_2_without_a_traceback(worker_env, args):
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=worker_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"error: argument {args[-2]}:" in done.stderr


# Any text at all, and text shaped like a number: accepted within the bounds, or a usage error.
NUMBER_LIKE = st.one_of(
    st.text(max_size=60),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.from_regex(r"\A[ +-]?[0-9_.eE]{1,30}(inf|nan)?[ ]?\Z"),
)


@pytest.mark.parametrize(("command", "option"), numeric_options())
@hypothesis_settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=NUMBER_LIKE)
def test_any_text_is_a_bounded_number_or_a_usage_error(command, option, text):
    parser = parser_of(command)
    bounds = parser._option_string_actions[option].type.bounds
    try:
        value = getattr(parser.parse_args([option, text]), parser_dest(parser, option))
    except CommandError as exc:
        refused = str(exc)
    else:
        refused = None
    if refused is not None:
        assert refused.startswith(f"Error: argument {option}:")
        return
    assert isinstance(value, bounds["kind"])
    assert math.isfinite(value)
    at_most = bounds["at_most"]
    assert value <= (at_most() if callable(at_most) else at_most)
    assert bounds["at_least"] is None or value >= bounds["at_least"]
    assert bounds["above"] is None or value > bounds["above"]


def parser_dest(parser, option):
    return parser._option_string_actions[option].dest
