"""A poll interval too short to mean an interval is refused: an idle worker would busy-poll
(``--poll-interval 5e-324`` kept a core at 40 % on SQLite)."""

import pytest
from django.core.management import CommandError

from jobs import checks, limits
from tests.hostile.test_command_arguments import parser_of


@pytest.mark.parametrize("value", ["5e-324", "1e-9", "0.009"])
def test_a_tiny_poll_interval_option_is_refused(value):
    with pytest.raises(CommandError, match=r"argument --poll-interval: must be at least 0\.01"):
        parser_of("runworker").parse_args(["--poll-interval", value])


def test_the_least_poll_interval_is_accepted():
    parsed = parser_of("runworker").parse_args(["--poll-interval", "0.01"])
    assert parsed.poll_interval == limits.MIN_INTERVAL_SECONDS


@pytest.mark.parametrize("value", [5e-324, 0.001])
def test_a_tiny_poll_interval_setting_is_reported(settings, value):
    settings.JOBS_POLL_INTERVAL = value
    [error] = checks.check_poll_interval(None)
    assert error.id == "jobs.E031"
    assert "JOBS_POLL_INTERVAL must be at least 0.01 seconds" in error.msg


def test_a_sensible_poll_interval_setting_passes(settings):
    settings.JOBS_POLL_INTERVAL = 0.01
    assert checks.check_poll_interval(None) == []


def test_runworker_refuses_to_start_with_a_tiny_poll_interval_setting(runworker):
    done = runworker("--burst", env={"JOBS_POLL_INTERVAL": "5e-324"})
    assert done.returncode != 0
    assert "jobs.E031" in done.stderr
    assert "Traceback" not in done.stderr
