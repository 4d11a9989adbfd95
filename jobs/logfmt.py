"""Log lines as ``key=value`` pairs (logfmt) that a log aggregator can index without rules.

``KeyValueFormatter`` turns ``logger.info("task finished name=%s id=%s", name, pk)`` into::

    ts=2026-11-29T18:40:00.123Z level=info logger=jobs.execution.executor msg="task finished" …

The words before the first ``key=`` become ``msg``; the pairs follow, then any ``extra=``
fields, then ``exc`` with the traceback. A value that holds a space, a quote or an ``=`` is
quoted, so an argument such as an error message never splits into stray words. ``parse``
reads a line back into a dict.
"""

import logging
import re
from datetime import UTC, datetime

__all__ = ["KeyValueFormatter", "format_pairs", "parse", "quote"]

_NEEDS_QUOTES = re.compile(r'[\s"=\\]|^$')
# A printf-style placeholder, as logging's %-formatting reads it.
_PLACEHOLDER = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?"
    r"(?P<conv>[diouxXeEfFgGcrsa%])"
)
_KEY = re.compile(r"[A-Za-z_][\w.\-/]*")
_PAIR = re.compile(r'(?P<key>[A-Za-z_][\w.\-/]*)=(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>\S*))')
_RESERVED = ("ts", "level", "logger", "msg", "exc")
# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}


def quote(value) -> str:
    """Return ``value`` as a logfmt value: bare if it can be, else double-quoted and escaped."""
    text = value if isinstance(value, str) else str(value)
    if not _NEEDS_QUOTES.search(text):
        return text
    escaped = (
        text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    )
    return '"' + escaped.replace("\t", "\\t") + '"'


def format_pairs(pairs) -> str:
    """Join ``(key, value)`` pairs as ``key=value key2="value 2"``."""
    return " ".join(f"{key}={quote(value)}" for key, value in pairs)


def parse(line: str) -> dict:
    """Read a logfmt line back into ``{key: value}`` (values as strings, unescaped).

    Raise ValueError on text that is not a clean sequence of pairs.
    """
    result, position = {}, 0
    line = line.strip()
    while position < len(line):
        match = _PAIR.match(line, position)
        if match is None:
            raise ValueError(f"not key=value at {position}: {line[position : position + 40]!r}")
        quoted = match.group("quoted")
        value = match.group("bare") if quoted is None else _unescape(quoted)
        result[match.group("key")] = value
        position = match.end()
        if position < len(line) and not line[position].isspace():
            raise ValueError(f"junk after a value at {position}: {line[position:]!r}")
        while position < len(line) and line[position].isspace():
            position += 1
    return result


def _unescape(text: str) -> str:
    escapes = {"n": "\n", "r": "\r", "t": "\t"}
    return re.sub(r"\\(.)", lambda m: escapes.get(m.group(1), m.group(1)), text)


class _Quoted:
    """An argument whose placeholder follows ``key=``: rendered as one logfmt value."""

    def __init__(self, value):
        self.value = value

    def __str__(self):
        return quote(str(self.value))

    def __repr__(self):
        return quote(repr(self.value))


def render(record: logging.LogRecord) -> str:
    """Return the record's message with every ``key=%s`` value quoted where it needs to be."""
    args = record.args
    if not args or isinstance(args, dict) or not isinstance(record.msg, str):
        return record.getMessage()
    values: list[object] = list(args)
    index = 0
    for match in _PLACEHOLDER.finditer(record.msg):
        if match.group("conv") == "%":
            continue
        if index >= len(values):
            return record.getMessage()
        # Only a placeholder right after "key=" is a whole value; "%s%s" glued on is text.
        if match.group("conv") in "sr" and record.msg[: match.start()].endswith("="):
            values[index] = _Quoted(values[index])
        index += 1
    try:
        return record.msg % tuple(values)
    except (TypeError, ValueError):
        return record.getMessage()


def split_message(message: str) -> tuple[str, list]:
    """Split ``"task finished name=x id=y"`` into ``("task finished", [("name", "x"), ...])``.

    A message whose tail is not clean pairs is kept whole as ``msg``, never half-parsed.
    """
    words = message.split(" ")
    for i, word in enumerate(words):
        key, sep, _ = word.partition("=")
        if sep and _KEY.fullmatch(key):
            text, tail = " ".join(words[:i]), " ".join(words[i:])
            try:
                return text.rstrip(" ,:"), list(parse(tail).items())
            except ValueError:
                break
    return message, []


class KeyValueFormatter(logging.Formatter):
    """Format records as ``ts=… level=… logger=… msg="…"`` and the record's own pairs.

    Use in ``LOGGING``: ``"formatters": {"kv": {"()": "jobs.logfmt.KeyValueFormatter"}}``.
    """

    def format(self, record: logging.LogRecord) -> str:
        text, pairs = split_message(render(record))
        ts = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        fields = [
            ("ts", ts.replace("+00:00", "Z")),
            ("level", record.levelname.lower()),
            ("logger", record.name),
            ("msg", text),
        ]
        seen = {key for key, _ in fields}
        for key, value in [*pairs, *self._extra(record)]:
            # A pair named like a header field would hide it in a parser's dict.
            while key in seen or key in _RESERVED:
                key = f"{key}_"
            seen.add(key)
            fields.append((key, value))
        if record.exc_info:
            fields.append(("exc", self.formatException(record.exc_info)))
        elif record.stack_info:
            fields.append(("stack", self.formatStack(record.stack_info)))
        return format_pairs(fields)

    @staticmethod
    def _extra(record):
        return [
            (key, value)
            for key, value in record.__dict__.items()
            if key not in _STANDARD and not key.startswith("_") and _KEY.fullmatch(key)
        ]
