"""The demo's notice for a finished long task: the status line only where it says more."""

import pytest

from demo_project.demo.notifications import notification_text
from jobs.transitions import EXPIRED_MESSAGE


@pytest.mark.parametrize(
    ("status", "detail", "expected"),
    [
        ("succeeded", "Done.", "Report A is done."),
        ("succeeded", "Imported 20 of 20 rows", "Report A is done: Imported 20 of 20 rows"),
        ("failed", "The file is not CSV.", "Report A failed: The file is not CSV."),
        ("cancelled", "Cancelled.", "Report A was cancelled."),
        ("cancelled", "Cancelled by ops.", "Report A was cancelled by ops."),
        ("cancelled", EXPIRED_MESSAGE, f"Report A was cancelled: {EXPIRED_MESSAGE}"),
    ],
)
def test_the_notice_says_the_status_once(status, detail, expected):
    assert notification_text("Report A", status, detail) == expected
