import ast
import logging
import sys
from pathlib import Path

import pytest

from jobs import logfmt
from jobs.logfmt import KeyValueFormatter, parse

JOBS = Path(__file__).resolve().parents[2] / "jobs"
LEVELS = {"debug", "info", "warning", "error", "exception", "critical"}
# Log calls in modules owned elsewhere whose text runs on after the pairs; reported to their
# owners. Formatted, each still becomes one parseable line (the whole text as ``msg``).
NOT_YET_KEY_VALUE = set()


def record(msg, *args, level=logging.INFO, name="jobs.test", exc_info=None, **extra):
    rec = logging.LogRecord(name, level, __file__, 1, msg, args, exc_info)
    rec.__dict__.update(extra)
    return rec


def fmt(rec):
    return KeyValueFormatter().format(rec)


def test_header_fields_then_the_messages_pairs():
    line = fmt(record("task finished name=%s id=%s attempt=%d/%d", "app.add", "4f1c", 1, 3))
    fields = parse(line)
    assert list(fields) == ["ts", "level", "logger", "msg", "name", "id", "attempt"]
    assert fields["level"] == "info"
    assert fields["logger"] == "jobs.test"
    assert fields["msg"] == "task finished"
    assert (fields["name"], fields["attempt"]) == ("app.add", "1/3")
    assert fields["ts"].endswith("Z")
    assert line.startswith("ts=")


@pytest.mark.parametrize(
    "value",
    [
        "connection refused by the server",
        'he said "no"',
        "a=b",
        "back\\slash",
        "two\nlines\ttab",
        "",
        "ünïcode ok",
    ],
)
def test_values_that_need_quotes_come_back_intact(value):
    fields = parse(fmt(record("database fault what=%s error=%r pause=%.2f", value, value, 0.5)))
    assert fields["what"] == value
    assert fields["error"] == repr(value)
    assert fields["pause"] == "0.50"


def test_extra_fields_and_clashing_names_are_kept_apart():
    fields = parse(fmt(record("odd msg=%s level=%s", "mine", "x", queue="emails", task_id=7)))
    assert fields["msg"] == "odd"
    assert (fields["msg_"], fields["level_"]) == ("mine", "x")
    assert (fields["queue"], fields["task_id"]) == ("emails", "7")


def test_a_message_that_is_not_pairs_stays_whole():
    fields = parse(fmt(record("worker got signal=%s, finishing running tasks", "SIGTERM")))
    assert fields["msg"] == "worker got signal=SIGTERM, finishing running tasks"
    assert set(fields) == {"ts", "level", "logger", "msg"}


def test_a_traceback_is_one_escaped_value():
    try:
        raise ValueError("bad input")
    except ValueError:
        rec = record("task outcome not recorded task_id=%s", "x", level=40, exc_info=sys.exc_info())
    line = fmt(rec)
    assert "\n" not in line
    fields = parse(line)
    assert fields["level"] == "error"
    assert fields["exc"].startswith("Traceback (most recent call last):\n")
    assert fields["exc"].endswith("ValueError: bad input")


def test_parse_refuses_what_is_not_logfmt():
    with pytest.raises(ValueError, match="not key=value"):
        parse("a=1 stray words")
    with pytest.raises(ValueError, match="junk"):
        parse('a="x"y')


def _log_calls():
    """Yield (file, template, placeholder count) of every logger call with a literal message."""
    for path in sorted(JOBS.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in LEVELS
                and getattr(node.func.value, "id", "") == "logger"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                yield path.name, node.args[0].value, len(node.args) - 1


def test_every_jobs_log_call_is_text_then_key_value_pairs():
    calls = list(_log_calls())
    assert len(calls) > 15  # the scan found the log calls
    offenders = []
    for filename, template, count in calls:
        # Arguments with spaces where a value goes, empty where text is glued on (" error=…").
        args = []
        for match in logfmt._PLACEHOLDER.finditer(template):
            conv = match.group("conv")
            if conv in "sr":
                args.append("a b" if template[: match.start()].endswith("=") else "")
            elif conv != "%":
                args.append(1)
        assert len(args) == count, (filename, template)
        rendered = logfmt.render(record(template, *args))
        text, pairs = logfmt.split_message(rendered)
        if (not pairs or "=" in text) and (filename, template) not in NOT_YET_KEY_VALUE:
            offenders.append((filename, template))
    assert offenders == []
