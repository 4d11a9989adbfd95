"""``jobs_settings`` keeps what it read, and reads again once Django says a setting changed."""

import pytest
from django.test import override_settings

from jobs.conf import DEFAULTS, jobs_settings
from jobs.exceptions import PayloadError
from jobs.tasks.payload import check_result_size


def test_a_value_read_is_kept_and_an_override_is_seen_then_undone(settings):
    assert DEFAULTS["MAX_RESULT_BYTES"] == jobs_settings.MAX_RESULT_BYTES
    assert "MAX_RESULT_BYTES" in vars(jobs_settings)  # kept: the next read is an attribute's
    with override_settings(JOBS_MAX_RESULT_BYTES=10):
        assert jobs_settings.MAX_RESULT_BYTES == 10
    assert DEFAULTS["MAX_RESULT_BYTES"] == jobs_settings.MAX_RESULT_BYTES
    settings.JOBS_LOG_EACH_SUCCESS = True  # pytest-django's fixture sends setting_changed too
    assert jobs_settings.LOG_EACH_SUCCESS is True
    settings.JOBS_LOG_EACH_SUCCESS = False
    assert jobs_settings.LOG_EACH_SUCCESS is False


def test_a_deleted_setting_needs_forget(settings):
    """Django sends no setting_changed when a setting is deleted (pytest-django's ``del
    settings.X``): ``forget`` reads it afresh."""
    settings.JOBS_LOG_EACH_SUCCESS = True
    assert jobs_settings.LOG_EACH_SUCCESS is True
    del settings.JOBS_LOG_EACH_SUCCESS
    jobs_settings.forget()
    assert jobs_settings.LOG_EACH_SUCCESS is False


def test_another_projects_setting_changing_keeps_the_values():
    jobs_settings.DEFAULT_QUEUE  # noqa: B018 (read, so kept)
    with override_settings(TIME_ZONE="Europe/Paris"):
        assert "DEFAULT_QUEUE" in vars(jobs_settings)


def test_an_unknown_name_is_refused():
    with pytest.raises(AttributeError, match="no setting named 'NOPE'"):
        jobs_settings.NOPE  # noqa: B018


@pytest.mark.parametrize(
    ("result", "limit", "refused"),
    [
        (None, 4, False),  # "null"
        (None, 3, True),
        (True, 3, True),  # "true": a limit this low takes the encoded path
        (2**63 - 1, 18, True),  # 19 digits
        (2**63 - 1, 24, False),
        (-1.2345678901234567e-308, 24, False),  # the longest float text
        ("x" * 10, 12, False),
        ("x" * 11, 12, True),
        ("\U0001f600" * 2, 26, False),  # each escaped as a pair: 12 bytes, and the quotes
        ("\U0001f600" * 2, 25, True),
        ({"a": 1}, 7, False),
        ({"a": 1}, 6, True),
    ],
)
def test_the_size_is_that_of_the_text_shortcut_or_not(settings, result, limit, refused):
    settings.JOBS_MAX_RESULT_BYTES = limit
    if refused:
        with pytest.raises(PayloadError, match=f"over the limit of {limit:,}"):
            check_result_size(result, "the task's return value")
    else:
        check_result_size(result, "the task's return value")
