"""What a failed attempt records: the user's message apart from the developer's, storable anywhere.

An ``ErrorRecord`` describes one failed attempt; ``jobs.transitions`` writes it into the task's
``last_error`` and ``error_details``. Its texts come from the helpers below, none of which
raises, whatever a task's exception does when it is printed or formatted, and each gives text
that PostgreSQL and SQLite both store.
"""

import sys
import traceback as _traceback
from dataclasses import dataclass, field
from datetime import UTC

from jobs.exceptions import PermanentError
from jobs.text import storable_text

# What one attempt records at most, in characters: a task raising ValueError(five_megabytes)
# must not write ten megabytes per attempt. The user's message is display text, cut at its end;
# the developer's texts keep their head and their tail (where the traceback's error is).
MAX_USER_MESSAGE = 2_000
MAX_MESSAGE = 16 * 1024
MAX_TRACEBACK = 64 * 1024
MAX_ORIGIN = 300


def bounded(text: str, limit: int) -> str:
    """``text``, or its head and tail with a note of what was left out if it is over ``limit``."""
    if len(text) <= limit:
        return text
    # Room for the note: the count it shows has at most the digits of len(text).
    keep = limit - len(f"\n… {len(text):,} characters left out …\n")
    tail = keep // 2
    head = keep - tail
    return (
        f"{text[:head]}\n… {len(text) - keep:,} characters left out …\n{text[len(text) - tail :]}"
    )


def cut(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters ending with "…" if longer: for display text."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def printed(value, what: str) -> str:
    """``str(value)``, or a note naming its class when printing it raises or gives no text."""
    try:
        text = str(value)
        if isinstance(text, str):
            return str.__str__(text)  # a plain str, whatever subclass __str__ returned
    except BaseException:  # a task's object may raise anything when printed
        pass
    return f"<{what} of type {qualified_name(type(value))}: str() failed>"


def qualified_name(cls: type) -> str:
    try:
        return f"{cls.__module__}.{cls.__qualname__}"
    except BaseException:  # a metaclass may make these attributes raise
        return object.__repr__(cls)


def formatted_traceback(exc: BaseException) -> str:
    """The traceback as Python prints it; the frames alone if formatting the exception fails
    (``traceback`` itself raises on, for instance, an ``__notes__`` that is not a list)."""
    try:
        return "".join(_traceback.format_exception(exc))
    except BaseException:
        pass
    try:
        frames = "".join(_traceback.format_tb(exc.__traceback__))
    except BaseException:
        frames = ""
    name = qualified_name(type(exc))
    return f"Traceback (most recent call last):\n{frames}{name}: <formatting failed>\n"


def raising_frame(exc: BaseException) -> str:
    """Where ``exc`` was raised: "app/tasks.py:42 in Importer.run", its innermost frame ("" if
    it has no traceback); the errors page groups attempts by it (``jobs.metrics.errors``)."""
    try:
        frame = exc.__traceback__
        if frame is None:
            return ""
        while frame.tb_next is not None:
            frame = frame.tb_next
        code = frame.tb_frame.f_code
        where = f"{short_path(code.co_filename)}:{frame.tb_lineno} in {code.co_qualname}"
        return cut(storable_text(where), MAX_ORIGIN)
    except Exception:  # never let describing a frame raise; an interrupt still goes through
        return ""


def short_path(filename: str) -> str:
    """``filename`` relative to the longest entry of ``sys.path`` it is under: the same origin
    on every host and release directory (/srv/app/releases/42/app/tasks.py is app/tasks.py)."""
    roots = [root.rstrip("/") + "/" for root in sys.path if isinstance(root, str) and root]
    under = [root for root in roots if filename.startswith(root)]
    return filename[len(max(under, key=len)) :] if under else filename


def moment_entry(now) -> str:
    """``now`` as an entry's "at": ISO 8601 in UTC to the microsecond, so that entries compare
    as text in the order of their moments (``jobs.sql.errors`` reads them so)."""
    if now.tzinfo is not None:
        now = now.astimezone(UTC)
    return now.isoformat(timespec="microseconds")


@dataclass(frozen=True)
class ErrorRecord:
    """What one failed attempt leaves behind: the user's message apart from the developer's."""

    user_message: str
    exception: str
    message: str
    traceback: str = ""
    transient: bool = False
    # The task said the input is wrong (PermanentError): retrying it unchanged cannot help.
    permanent: bool = False
    # The innermost frame of the traceback (``raising_frame``); "" when there is none.
    origin: str = ""
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_exception(cls, exc: BaseException, user_message: str, transient: bool):
        """Describe ``exc``; never raises, whatever the exception does when it is printed.

        Every text is made storable on every database (``jobs.text.storable_text``) and bounded
        (``MAX_USER_MESSAGE``, ``MAX_MESSAGE``, ``MAX_TRACEBACK`` characters); an exception
        whose ``str()`` or ``repr()`` raises is described by its class, with a note saying so.
        """
        exc_type = type(exc)
        return cls(
            user_message=cut(
                storable_text(printed(user_message, "user message")), MAX_USER_MESSAGE
            ),
            exception=storable_text(qualified_name(exc_type)),
            message=bounded(storable_text(printed(exc, "exception")), MAX_MESSAGE),
            traceback=bounded(storable_text(formatted_traceback(exc)), MAX_TRACEBACK),
            transient=bool(transient),
            permanent=isinstance(exc, PermanentError),
            origin=raising_frame(exc),
        )

    def as_entry(self, task, now) -> dict:
        """The ``error_details`` entry of this attempt of ``task``, as of ``now``."""
        return {
            "attempt": task.attempts,
            "at": moment_entry(now),
            "worker_id": task.worker_id,
            "exception": self.exception,
            "message": self.message,
            "traceback": self.traceback,
            "user_message": self.user_message,
            "transient": self.transient,
            "permanent": self.permanent,
            "origin": self.origin,
            **self.extra,
        }


def refusal_reason(error: Exception) -> str:
    """Why the database refused a row: the whole text of ``error`` (its DETAIL included, such
    as "\u0000 cannot be converted to text"), on one line, storable, at most 500 characters."""
    return storable_text(" ".join(printed(error, "database error").split())[:500]) or (
        qualified_name(type(error))
    )


def unstorable_error(error: Exception) -> ErrorRecord:
    """The error recorded for a task whose result the database refused, saying ``error``."""
    kind = type(error)
    reason = refusal_reason(error)
    return ErrorRecord(
        user_message="The task finished, but its result could not be stored.",
        exception=f"{kind.__module__}.{kind.__qualname__}",
        message=f"the database refused to store the result of this task: {reason}",
        permanent=True,
    )


def unrecordable_error(what: str, raised: str, refusal: Exception | None) -> ErrorRecord:
    """The plain failure recorded when the database refused to record an attempt's outcome.

    ``what`` names the refused outcome ("failure", "retry", "cancellation"), ``raised`` the
    class of the exception the task raised (its message and traceback are what may have been
    refused, so they are left out), ``refusal`` the database's error; None leaves its text out
    too (it may quote the refused value, and be refused in turn).
    """
    reason = f": {refusal_reason(refusal)}" if refusal is not None else ""
    raised_note = f" (the task raised {raised})" if raised else ""
    return ErrorRecord(
        user_message="Something went wrong on our side and the task could not be completed.",
        exception=storable_text(raised),
        message=f"the database refused to record the {what} of this task{raised_note}{reason}",
        permanent=True,
    )
