"""``ErrorRecord.from_exception`` never raises, and gives text every database stores."""

import json

import pytest
from django.utils import timezone

from jobs.error_records import (
    MAX_MESSAGE,
    MAX_TRACEBACK,
    MAX_USER_MESSAGE,
    ErrorRecord,
    bounded,
)
from jobs.exceptions import PermanentError
from jobs.models import Task
from jobs.states import Status
from jobs.tasks import enqueueing
from jobs.tasks.registry import task
from jobs.text import storable_text
from tests.helpers import run_next


class StrRaises(Exception):
    def __str__(self):
        raise SystemExit("printing this exits")


class StrNotText(Exception):
    def __str__(self):
        return 42


class NotesNotAList(Exception):
    __notes__ = 7  # traceback.format_exception raises on it


def raised(exc):
    try:
        raise exc
    except BaseException as caught:
        return caught


@pytest.mark.parametrize(
    "exc", [StrRaises(), StrNotText(), NotesNotAList("notes"), raised(StrRaises())]
)
def test_an_exception_that_cannot_be_printed_is_described_by_its_class(exc):
    record = ErrorRecord.from_exception(exc, "Try again later.", transient=False)
    name = f"{__name__}.{type(exc).__qualname__}"
    assert record.exception == name
    assert record.traceback  # something a developer can read, never an error
    if not isinstance(exc, NotesNotAList):
        assert record.message == f"<exception of type {name}: str() failed>"


def test_a_user_message_that_is_not_text_is_described_not_raised():
    record = ErrorRecord.from_exception(ValueError("x"), StrRaises(), transient=False)
    assert record.user_message == f"<user message of type {__name__}.StrRaises: str() failed>"


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("plain", "plain"),
        ("nul\x00here", "nul\\x00here"),
        ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
        ("pair \U0001f600 kept", "pair \U0001f600 kept"),
    ],
)
def test_text_is_escaped_only_where_a_database_would_refuse_it(text, stored):
    assert storable_text(text) == stored
    stored.encode("utf-8")  # storable everywhere


HUGE = 5_000_000


@task(
    max_attempts=2,
    transient=(ValueError,),  # retried: two attempts, two entries
)
def raises_a_huge_message(size):
    raise ValueError("head" + "x" * size + "tail")


@task(max_attempts=1)
def refuses_with_a_huge_user_message(size):
    raise PermanentError("y" * size)


def test_bounded_keeps_the_head_and_the_tail_and_says_what_it_left_out():
    text = "a" * 100 + "b" * 100
    short = bounded(text, 80)
    assert len(short) <= 80
    head, note, tail = short.split("\n")
    assert head == "a" * len(head)
    assert tail == "b" * len(tail)
    assert note == f"… {200 - len(head) - len(tail)} characters left out …"
    assert bounded("abc", 3) == "abc"


@pytest.mark.django_db
def test_a_huge_exception_message_stores_a_bounded_record_each_attempt():
    enqueueing.enqueue(raises_a_huge_message, (HUGE,))
    run_next()
    Task.objects.update(run_after=timezone.now())  # the retry is due at once
    task = run_next()
    assert task.status == Status.FAILED
    assert [entry["attempt"] for entry in task.error_details] == [1, 2]  # earlier ones stay
    for entry in task.error_details:
        assert len(entry["message"]) <= MAX_MESSAGE
        assert entry["message"].startswith("headxxx")
        assert entry["message"].endswith("xxxtail")
        assert "characters left out" in entry["message"]
        assert len(entry["traceback"]) <= MAX_TRACEBACK
        assert entry["traceback"].startswith("Traceback")
        assert entry["traceback"].rstrip().endswith("xxxtail")  # where the error is named
    assert len(json.dumps(task.error_details)) < 2 * (MAX_MESSAGE + MAX_TRACEBACK + 4096)


@pytest.mark.django_db
def test_a_huge_user_message_is_cut_short():
    enqueueing.enqueue(refuses_with_a_huge_user_message, (HUGE,))
    task = run_next()
    assert task.status == Status.FAILED
    assert len(task.last_error) == MAX_USER_MESSAGE
    assert task.last_error == "y" * (MAX_USER_MESSAGE - 1) + "…"
    (entry,) = task.error_details
    assert entry["user_message"] == task.last_error
    assert len(entry["message"]) <= MAX_MESSAGE
