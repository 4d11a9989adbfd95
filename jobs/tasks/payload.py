"""Validation of what goes into a task record: values both databases store and read back as is.

One module decides what a task may take, return and report, so that enqueue, bulk enqueue, the
Django Tasks backend, the context's steps and progress, and the executor's check of a result
refuse the same values with the same message, before anything is written:

- JSON only: str, int, float, bool, None, lists (tuples become lists) and dicts with str keys.
- Strings (keys included) hold no NUL character (PostgreSQL's text and jsonb cannot) and no
  surrogate code point (UTF-8 cannot encode one; a pair of them would come back as one
  character).
- Integers fit in 64 bits: SQLite's JSON functions read larger ones as floats.
- Floats are finite, not -0.0 (PostgreSQL has no negative zero), and below 1e16 in magnitude
  (PostgreSQL's jsonb writes 1e16 as 10000000000000000, which reads back as an int).
- At most ``MAX_DEPTH`` nested lists and dicts (deeper JSON exhausts the recursion of the
  encoders and decoders on its way).

Display text (summary, progress message, a user message) is mended instead: ``jobs.text``.
"""

import json
import math
import re
from datetime import UTC, datetime, timedelta

from jobs.conf import jobs_settings
from jobs.exceptions import PayloadError
from jobs.text import UNSTORABLE

MAX_DEPTH = 100
MIN_INT, MAX_INT = -(2**63), 2**63 - 1
# Floats from this magnitude up are written with an exponent (repr gives "1e+16"), which
# PostgreSQL's jsonb turns into an integer.
MAX_FLOAT = 1e16
# Their escapes in JSON text written with ensure_ascii (the default): a cheap pre-check. It also
# matches the escapes of characters outside the BMP, which then take the full check.
_UNSTORABLE_ESCAPE = re.compile(r"\\u(?:0000|d[89a-f])", re.IGNORECASE)


def _short_repr(value) -> str:
    if isinstance(value, int) and value.bit_length() > 64:
        return f"<{value.bit_length():,} bits>"  # repr refuses past 4,300 digits
    text = repr(value)  # repr escapes NUL and surrogates: the message itself is storable
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(value) -> str:
    kind = f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")
    return f"{kind} {_short_repr(value)}"


def _string_problem(text: str) -> str | None:
    found = UNSTORABLE.search(text)
    if found is None:
        return None
    char = found.group()
    if char == "\x00":
        return (
            f"holds a NUL character (\\x00) at index {found.start()}, which PostgreSQL cannot store"
        )
    return (
        f"holds the surrogate {char!r} at index {found.start()}, which UTF-8 cannot encode "
        "(decode bytes with errors='replace', or pass them as base64)"
    )


def _check_str(text: str, path: str):
    problem = _string_problem(text)
    if problem:
        raise PayloadError(f"{path} {problem}.")


def _check_number(value, path: str):
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        if not MIN_INT <= value <= MAX_INT:
            raise PayloadError(
                f"{path} is an integer outside the 64-bit range ({MIN_INT:,} to {MAX_INT:,}) "
                "that every database reads back exactly. "
                "Pass it as a string."
            )
        return
    if not math.isfinite(value):
        raise PayloadError(f"{path} is {value!r}, which JSON cannot represent.")
    if abs(value) >= MAX_FLOAT:
        raise PayloadError(
            f"{path} is the float {value!r}: from 1e16 up, PostgreSQL reads floats back as "
            "integers. Pass it as a string, or as an int if it is one."
        )
    if value == 0 and math.copysign(1.0, value) < 0:
        raise PayloadError(f"{path} is -0.0, which PostgreSQL stores as 0.0. Pass 0.0.")


def _check(value, path: str, depth: int):
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        _check_str(value, path)
        return
    if isinstance(value, int | float):
        _check_number(value, path)
        return
    if isinstance(value, list | tuple | dict) and depth >= MAX_DEPTH:
        raise PayloadError(
            f"{path} is nested more than {MAX_DEPTH} lists and dicts deep (or contains itself)."
        )
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise PayloadError(
                    f"{path} has the key {_short_repr(key)} ({type(key).__name__}); JSON object "
                    "keys must be strings."
                )
            key_path = f"{path}[{_short_repr(key)}]"
            _check_str(key, f"{key_path} (the key)")
            _check(item, key_path, depth + 1)
        return
    raise PayloadError(
        f"{path} is {_describe(value)}, which is not JSON. Pass only str, int, float, bool, "
        "None, lists and dicts (an id instead of a model instance, an ISO string instead of a "
        "datetime)."
    )


def validate_json(value, path: str = "value"):
    """Raise PayloadError naming the first part of ``value`` that cannot be stored as it is."""
    _check(value, path, 0)


_SCALARS = frozenset({str, int, bool, type(None)})
# One encoder for every payload: json.dumps(..., separators=...) builds a new one per call.
compact_json = json.JSONEncoder(separators=(",", ":")).encode


def is_flat(args, kwargs) -> bool:
    """Whether every argument is a str, int, bool or None (and every key a str): JSON as is."""
    return all(type(arg) in _SCALARS for arg in args) and all(
        type(key) is str and type(value) in _SCALARS for key, value in kwargs.items()
    )


def _flat_ints_fit(args, kwargs) -> bool:
    return all(
        MIN_INT <= value <= MAX_INT for value in (*args, *kwargs.values()) if type(value) is int
    )


# The longest JSON text of a scalar result: a 64-bit int (20 characters) or a float's repr (24).
_SCALAR_TEXT = 24
_SCALAR_RESULTS = frozenset({type(None), bool, float})


def check_result_size(result, what: str) -> None:
    """Refuse a JSON ``result`` whose text is over ``JOBS_MAX_RESULT_BYTES`` (PayloadError)."""
    limit = jobs_settings.MAX_RESULT_BYTES
    # Most tasks return None, a number or a short string: their text cannot be over the limit,
    # and encoding it only to measure it cost about 1 µs a task (the reply encodes it anyway).
    kind = type(result)
    if limit >= _SCALAR_TEXT and (
        kind in _SCALAR_RESULTS
        or (kind is int and MIN_INT <= result <= MAX_INT)
        # A character is at most 12 bytes escaped (a pair of \\uXXXX), with the two quotes.
        or (kind is str and 12 * len(result) + 2 <= limit)
    ):
        return
    size = len(compact_json(result))  # ASCII only: its length is its size in bytes
    if size > limit:
        raise PayloadError(
            f"{what[0].upper()}{what[1:]} is {size:,} bytes, over the limit of {limit:,} "
            "(JOBS_MAX_RESULT_BYTES). Store large data elsewhere and return its id."
        )


def flat_text(args, kwargs, path: str = "", *, limit: int | None = None) -> str:
    """The JSON text of flat arguments (see ``is_flat``), checked; PayloadError if refused."""
    if not _flat_ints_fit(args, kwargs):
        return encode_payload(args, kwargs, path, limit=limit, flat=False)[1]  # raises
    text = compact_json({"args": args, "kwargs": kwargs})
    limit = jobs_settings.MAX_PAYLOAD_BYTES if limit is None else limit
    if len(text) > limit or _UNSTORABLE_ESCAPE.search(text):
        return encode_payload(args, kwargs, path, limit=limit, flat=False)[1]  # raises, or fine
    return text


def encode_payload(
    args, kwargs, path: str = "", *, limit: int | None = None, flat: bool | None = None
) -> tuple[dict, str]:
    """Return the stored payload for ``args``/``kwargs`` and its JSON text; refuse bad input.

    Values that cannot be stored as they are (see the module's docstring) are refused naming
    their path (prefixed by ``path``, e.g. ``calls[3] ``), and so is a payload over ``limit``
    bytes (``JOBS_MAX_PAYLOAD_BYTES`` by default).
    """
    if not isinstance(args, list | tuple):
        raise PayloadError(f"The {path}args must be a list or a tuple, not {_describe(args)}.")
    if not isinstance(kwargs, dict):
        raise PayloadError(f"The {path}kwargs must be a dict, not {_describe(kwargs)}.")
    args = list(args)
    kwargs = dict(kwargs)
    # Flat arguments of plain types, the common case, are valid JSON as they are and immutable:
    # no walk through the values, and copying the list and the dict is a deep enough copy.
    if flat is None:
        flat = is_flat(args, kwargs) and _flat_ints_fit(args, kwargs)
    if not flat:
        validate_json(args, f"{path}args")
        validate_json(kwargs, f"{path}kwargs")
    payload = {"args": args, "kwargs": kwargs}
    # ASCII only (the default), so the length of the text is its size in bytes.
    text = compact_json(payload)
    if flat and _UNSTORABLE_ESCAPE.search(text):
        validate_json(args, f"{path}args")  # a NUL or a surrogate somewhere: say where
        validate_json(kwargs, f"{path}kwargs")
    limit = jobs_settings.MAX_PAYLOAD_BYTES if limit is None else limit
    if len(text) > limit:
        raise PayloadError(
            f"The payload{' of ' + path.strip() if path else ''} is {len(text):,} bytes, over "
            f"the limit of {limit:,} "
            "(JOBS_MAX_PAYLOAD_BYTES). Store large data elsewhere and pass its id."
        )
    if not flat:
        # Decode the text just written, so the caller's later mutations never reach the
        # record, and tuples become lists, as they will be once stored.
        payload = json.loads(text)
    return payload, text


# Text fields -------------------------------------------------------------------------------------


def check_name(value, what: str, max_length: int, *, allow_empty: bool = False) -> str:
    """Return ``value``, an identifier (queue, idempotency key, step name), or refuse it.

    Identifiers are matched, not shown: refused rather than mended, with the limit of the column
    that stores them, the same on every database.
    """
    if not isinstance(value, str):
        raise PayloadError(f"The {what} must be a str, not {_describe(value)}.")
    if not value and not allow_empty:
        raise PayloadError(f"The {what} must not be empty.")
    if len(value) > max_length:
        raise PayloadError(
            f"The {what} {_describe(value)} is {len(value):,} characters long, over the limit "
            f"of {max_length}."
        )
    _check_str(value, f"The {what} {_describe(value)}")
    return value


MAX_QUEUE_LENGTH = 100  # Task.queue's max_length (and QueuePause's)


def queue_name_problem(value) -> str | None:
    """What makes ``value`` no queue name, or None: the one rule for every place a name enters.

    A name is 1 to 100 printable characters (no tab, newline, NUL or surrogate: the tables of
    ``jobs_stats`` and the logs stay one line per queue), with no comma and no whitespace at
    either end, so that ``runworker --queues`` (a comma-separated, stripped list) can select
    every queue a task can be enqueued in; nor does it start with a hyphen, which the command
    line would read as an option (``jobs_health --queue -q``).
    """
    if not isinstance(value, str):
        return f"must be a str, not {_describe(value)}"
    if not value:
        return "must not be empty"
    if len(value) > MAX_QUEUE_LENGTH:
        return f"is {len(value):,} characters long, over the limit of {MAX_QUEUE_LENGTH}"
    if not value.isprintable():
        return "holds a character that is not printable (a tab, a newline, a NUL...)"
    if "," in value:
        return "holds a comma, which separates the names of runworker --queues"
    if value != value.strip():
        return "starts or ends with whitespace"
    if value.startswith("-"):
        return "starts with a hyphen, which a command line reads as an option"
    return None


def check_queue_name(value) -> str:
    """Return ``value`` if it is a queue name (``queue_name_problem``); refuse it otherwise."""
    problem = queue_name_problem(value)
    if problem:
        named = f" {_short_repr(value)}" if isinstance(value, str) else ""
        raise PayloadError(f"The queue{named} {problem}.")
    return value


def check_int(value, what: str, low: int, high: int) -> int:
    """Return ``value`` if it is an int from ``low`` to ``high``; refuse it otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise PayloadError(
            f"The {what} must be an integer from {low:,} to {high:,}, not {_describe(value)}."
        )
    return value


def check_delay(delay) -> timedelta:
    """Return ``delay`` (seconds or a timedelta) as a timedelta a datetime can be moved by."""
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, int | float) and not isinstance(delay, bool):
        seconds = delay
    else:
        raise PayloadError(f"The delay must be seconds or a timedelta, not {_describe(delay)}.")
    if (isinstance(seconds, float) and not math.isfinite(seconds)) or abs(
        seconds
    ) > MAX_DELAY_SECONDS:
        raise PayloadError(
            f"The delay {_short_repr(delay)} is not a finite number of seconds within 100 years."
        )
    return delay if isinstance(delay, timedelta) else timedelta(seconds=seconds)


MAX_DELAY_SECONDS = 100 * 365.25 * 24 * 3600


def check_run_after(run_after, now: datetime) -> datetime:
    """Return ``run_after`` in UTC if it is an aware datetime a ``delay`` could reach from ``now``.

    The same bound as ``check_delay``: far dates are typos, and the extremes of ``datetime``
    overflow on the way (SQLite cannot convert them to UTC; PostgreSQL stores year 0 BC and
    year 10000, which Python cannot read back).
    """
    if not isinstance(run_after, datetime):
        raise PayloadError(f"run_after must be a datetime, not {_describe(run_after)}.")
    try:
        offset = run_after.utcoffset()
    except Exception as exc:  # a tzinfo of the caller's own that raises
        raise PayloadError(
            f"run_after {_short_repr(run_after)} has a time zone that fails: {exc!r}."
        ) from None
    if offset is None:
        raise PayloadError(
            f"run_after {_short_repr(run_after)} must be an aware datetime (with a time zone)."
        )
    # Aware datetimes subtract without converting to UTC: no overflow at datetime.min or max.
    if abs((run_after - now).total_seconds()) > MAX_DELAY_SECONDS:
        raise PayloadError(
            f"run_after {_short_repr(run_after)} is more than 100 years from now, the limit "
            "a delay has too."
        )
    # In UTC, as stored: an offset of seconds (or a tzinfo of the caller's) is not one every
    # database parses, and the text of a bulk insert carries it.
    return run_after.astimezone(UTC)
