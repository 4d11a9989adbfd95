"""``ErrorRecord.from_exception`` never raises, and gives text every database stores."""

import pytest

from jobs.error_records import ErrorRecord, storable_text


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
