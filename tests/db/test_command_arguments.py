"""Every jobs command refuses a bad number where it enters, naming what it expected."""

import pytest
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("command", "args", "message"),
    [
        ("jobs_stats", ["--window", "0"], "must be more than 0"),
        ("jobs_stats", ["--window", "soon"], "expected a number, got 'soon'"),
        ("jobs_prune", ["--batch-size", "0"], "must be at least 1"),
        ("jobs_prune", ["--batch-size", "1.5"], "expected a whole number"),
        ("jobs_health", ["--min-tasks", "-1"], "must be at least 0"),
        ("jobs_health", ["--max-wait", "x"], "expected a number"),
    ],
)
def test_bad_numbers_are_refused(command, args, message):
    with pytest.raises(CommandError, match=message):
        call_command(command, *args)
