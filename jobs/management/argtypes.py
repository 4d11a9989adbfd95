"""Argument types shared by the jobs commands: bad input is refused where it enters, plainly.

Every number is finite and bounded (``jobs.limits``): ``nan``, ``inf``, ``1e400`` and
``10**30`` get argparse's usage error (exit 2), never a traceback.
"""

import argparse
import math

from jobs import limits
from jobs.tasks.payload import queue_name_problem


def shown(text: str, most: int = 40) -> str:
    """``text`` as an error message quotes it: its repr, cut short (a 100 kB argument...)."""
    return repr(text) if len(text) <= most else f"{text[:most]!r}... ({len(text)} characters)"


def number(kind=float, *, at_least=None, above=None, at_most=None, beyond=""):
    """Return an argparse ``type`` parsing a finite ``kind`` (int or float) within bounds.

    ``at_most`` may be a function, called at parse time (a bound read from a setting);
    ``beyond`` says how to go past it, if one can.
    """
    what = "a whole number" if kind is int else "a number"

    def parse(text):
        try:
            value = kind(text)
        except (ValueError, OverflowError):  # int("1" * 5000) is refused too: too many digits
            raise argparse.ArgumentTypeError(f"expected {what}, got {shown(text)}") from None
        # Only a float can be NaN or infinite (and an int may not fit one).
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {shown(text)}")
        if at_least is not None and value < at_least:
            raise argparse.ArgumentTypeError(f"must be at least {at_least}, got {shown(text)}")
        if above is not None and not value > above:
            raise argparse.ArgumentTypeError(f"must be more than {above}, got {shown(text)}")
        most = at_most() if callable(at_most) else at_most
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(
                f"must be at most {most:,}, got {shown(text)}{beyond and f' ({beyond})'}"
            )
        return value

    # What it accepts, for the tests that try every numeric option of every command.
    # attr-defined: mypy does not model attributes set on a function.
    parse.bounds = {"kind": kind, "at_least": at_least, "above": above, "at_most": at_most}  # type: ignore[attr-defined]
    return parse


positive_int = number(int, at_least=1)
positive_seconds = number(float, above=0, at_most=limits.MAX_SECONDS)
# How often to look at the database: at least limits.MIN_INTERVAL_SECONDS, no busy loop.
interval_seconds = number(float, at_least=limits.MIN_INTERVAL_SECONDS, at_most=limits.MAX_SECONDS)
non_negative_seconds = number(float, at_least=0, at_most=limits.MAX_SECONDS)
concurrency = number(
    int, at_least=1, at_most=limits.max_concurrency, beyond="JOBS_MAX_CONCURRENCY raises the limit"
)


def queue_name(text: str) -> str:
    """A queue name (``jobs.tasks.payload.queue_name_problem``: the rule enqueue applies), as is."""
    problem = queue_name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(f"the queue name {shown(text)} {problem}")
    return text


queue_cap = number(int, at_least=1, at_most=limits.max_concurrency,
                   beyond="JOBS_MAX_CONCURRENCY raises the limit")  # fmt: skip


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def queue_with_cap(text: str) -> tuple[str, int | None]:
    """``name`` or ``name:cap``: a queue, and the most of its tasks a worker runs at once.

    What follows the last colon is a cap when it reads as a number (``2``, and so ``0``, ``-1``,
    ``nan``, ``2.5`` are refused as caps rather than taken for names); otherwise the colon is
    part of the name (``tenant:acme``). A queue whose name itself ends in a colon and a number is
    selected with a cap written after it (``--queues batch:7:4``).
    """
    name, colon, tail = text.rpartition(":")
    if not colon or not (tail.strip() == "" or _is_number(tail)):
        return queue_name(text), None
    name = name.strip()
    if not tail.strip():
        raise argparse.ArgumentTypeError(
            f"{shown(text)} ends in a colon: write the queue's cap after it (imports:2), or no "
            "colon for no cap"
        )
    try:
        cap = queue_cap(tail.strip())
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"the cap of the queue {shown(name)}: {exc}") from None
    return queue_name(name), cap


def queue_caps(text: str) -> list[tuple[str, int | None]]:
    """Comma-separated queues, each with its optional cap: ``imports:2,emails:8,default``.

    Each name once (two caps for one queue would leave the reader to guess which holds); a cap is
    a whole number from 1 to ``JOBS_MAX_CONCURRENCY``. Whether it fits the worker's concurrency
    is checked once both are known (``runworker``, ``Worker``).
    """
    entries = [queue_with_cap(entry.strip()) for entry in text.split(",") if entry.strip()]
    if not entries:
        raise argparse.ArgumentTypeError("name at least one queue, e.g. --queues default,emails")
    seen: set[str] = set()
    for name, _ in entries:
        if name in seen:
            raise argparse.ArgumentTypeError(
                f"the queue {shown(name)} is named twice: name each queue once, with at most "
                "one cap (imports:2,emails)"
            )
        seen.add(name)
    return entries
