"""``runworker --queues``: queue names, each with an optional cap, refused plainly when wrong."""

import pytest
from django.core.management import CommandError, load_command_class

from jobs.management.argtypes import queue_caps


def parse(value):
    parser = load_command_class("jobs", "runworker").create_parser("manage.py", "runworker")
    return parser.parse_args(["--queues", value]).queues


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("imports:2,emails:8", [("imports", 2), ("emails", 8)]),
        ("a,b", [("a", None), ("b", None)]),  # as before caps: no cap, the concurrency's
        ("imports:2,emails", [("imports", 2), ("emails", None)]),
        (" imports : 3 , emails ", [("imports", 3), ("emails", None)]),
        ("tenant:acme", [("tenant:acme", None)]),  # no number after the colon: part of the name
        ("batch:7:4", [("batch:7", 4)]),  # a name ending in a number, with its cap after it
        ("imports:2,,emails", [("imports", 2), ("emails", None)]),
        ("q:256", [("q", 256)]),  # JOBS_MAX_CONCURRENCY's default
    ],
)
def test_queues_with_and_without_caps(text, expected):
    assert queue_caps(text) == expected
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("imports:0", "the cap of the queue 'imports': must be at least 1, got '0'"),
        ("imports:-1", "must be at least 1, got '-1'"),
        ("imports:nan", "expected a whole number, got 'nan'"),
        ("imports:inf", "expected a whole number, got 'inf'"),
        ("imports:2.5", "expected a whole number, got '2.5'"),
        ("imports:1e400", "expected a whole number"),
        ("imports:" + "9" * 5000, "expected a whole number"),
        ("imports:257", "must be at most 256, got '257' (JOBS_MAX_CONCURRENCY raises the limit)"),
        ("imports:", "ends in a colon: write the queue's cap after it"),
        ("imports:2,imports:3", "the queue 'imports' is named twice"),
        ("imports,imports:2", "the queue 'imports' is named twice"),
        ("a\x00:2", "holds a character that is not printable"),
        ("x" * 101 + ":2", "is 101 characters long, over the limit of 100"),
        (":2", "must not be empty"),
        ("a,-q:2", "starts with a hyphen"),
        (",", "name at least one queue"),
    ],
)
def test_bad_queues_and_caps_are_refused_saying_what_to_do(text, message):
    with pytest.raises(CommandError, match="argument --queues: ") as refused:
        parse(text)
    assert message in str(refused.value)


def test_a_long_hostile_cap_is_quoted_short():
    with pytest.raises(CommandError) as refused:
        parse("imports:" + "1" * 100_000)
    assert len(str(refused.value)) < 300
