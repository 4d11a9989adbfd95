"""JOBS_TRANSPORT: its forms, and jobs.E050 for a bad one."""

import pytest

from jobs import transports
from jobs.checks import check_transport


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (None, ("database", None)),
        ("database", ("database", None)),
        ("redis://h:6379/0", ("redis", "redis://h:6379/0")),
        ({"BACKEND": "redis", "URL": "redis://h/1"}, ("redis", "redis://h/1")),
        ({"BACKEND": "database"}, ("database", None)),
    ],
)
def test_forms(setting, expected):
    assert transports.parse(setting) == expected


@pytest.mark.parametrize(
    "setting", ["kafka://x", {"BACKEND": "redis"}, {"BACKEND": "mq", "URL": "x"}, 5, ["redis"]]
)
def test_bad_setting_is_E050(setting, settings):
    settings.JOBS_TRANSPORT = setting
    [error] = check_transport()
    assert error.id == "jobs.E050"
