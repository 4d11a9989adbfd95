"""What a running task can reach: its record, progress reports, steps, cancellation checkpoints."""

import math
import time
from contextlib import contextmanager
from typing import cast

from django.db import DatabaseError, router
from django.utils import timezone

from jobs.db import is_connection_fault, savepoint_in_transaction, usable_in_event_loop
from jobs.error_records import refusal_reason
from jobs.exceptions import PayloadError, ReportRefused, TaskCancelled
from jobs.execution import effects
from jobs.models import Task, TaskStep
from jobs.tasks.payload import check_name, validate_json
from jobs.text import clean_text

# The largest progress count the column holds on every database (PostgreSQL's integer).
MAX_PROGRESS = 2**31 - 1
_MESSAGE_LENGTH = Task._meta.get_field("progress_message").max_length
STEP_NAME_LENGTH = cast(int, TaskStep._meta.get_field("name").max_length)  # a CharField's


def _progress_counts(current, total) -> tuple[int, int | None]:
    """``current`` and ``total`` as whole counts the column holds, their ratio kept."""
    for value in (current,) if total is None else (current, total):  # a None current too
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or (isinstance(value, float) and not math.isfinite(value))
        ):
            raise PayloadError(f"Progress counts must be finite numbers, not {value!r:.60}.")
    current = max(0, int(current))
    total = None if total is None else max(0, int(total))
    largest = max(current, total or 0)
    if largest > MAX_PROGRESS:  # e.g. bytes of a large file: scaled down, the bar unchanged
        current = current * MAX_PROGRESS // largest
        total = None if total is None else total * MAX_PROGRESS // largest
    return current, total


@contextmanager
def _refusal_raised(what: str):
    """Turn the database refusing ``what`` into ``ReportRefused``, in a savepoint if the task
    holds a transaction open (PostgreSQL would abort all of it otherwise); connection faults
    pass through unchanged (transient)."""
    try:
        with savepoint_in_transaction(router.db_for_write(Task)):
            yield
    except DatabaseError as exc:
        if is_connection_fault(exc):
            raise
        raise ReportRefused(
            f"The database refused to store {what} of this task: {refusal_reason(exc)}"
        ) from exc


class TaskContext:
    """Passed as the first argument to tasks declared with ``takes_context=True``."""

    # Progress writes closer together than this are coalesced (the last one always lands), so a
    # task reporting in a tight loop costs at most four writes a second.
    min_write_interval = 0.25

    def __init__(self, task: Task, *, clock=time.monotonic):
        self.task = task
        # Injectable so that tests can drive the throttle without sleeping.
        self._clock = clock
        self._last_write = None

    @property
    def attempt(self) -> int:
        return self.task.attempts

    def _this_attempt(self):
        # Guarded by the attempt, so a worker that lost its task never writes over a newer one.
        return Task.objects.filter(pk=self.task.pk, attempts=self.task.attempts)

    # Progress ---------------------------------------------------------------------------------

    @usable_in_event_loop
    def progress(self, current: int, total: int | None = None, message: str = "", *, force=False):
        """Report progress ("Imported 600 of 1,000 rows"); also a cancellation checkpoint.

        Only the database write is throttled: the values are kept on ``self.task`` at once, and
        the report that completes the work (``current >= total``) or is ``force``d always lands.
        Counts past 2,147,483,647 are scaled down together; the message is display text
        (``jobs.text.clean_text``: a NUL or surrogate becomes U+FFFD, past 255 characters
        it is cut with "…"). A message that is not a str is refused (``PayloadError``): it
        would be stored as whatever ``str()`` made of it.
        """
        if not isinstance(message, str):
            raise PayloadError(f"A progress message must be a str, not {message!r:.60}.")
        task = self.task
        task.progress_current, task.progress_total = _progress_counts(current, total)
        done = task.progress_total is not None and task.progress_current >= task.progress_total
        task.progress_message = clean_text(message, _MESSAGE_LENGTH)
        now = self._clock()
        recent = self._last_write is not None and now - self._last_write < self.min_write_interval
        if recent and not (force or done):
            return
        self._last_write = now
        with _refusal_raised("the progress report"):
            self._this_attempt().update(
                progress_current=task.progress_current,
                progress_total=task.progress_total,
                progress_message=task.progress_message,
                updated_at=timezone.now(),
            )
        self.check_cancelled()

    # Steps ------------------------------------------------------------------------------------

    @property
    def completed_steps(self) -> dict:
        """Return the recorded results of the steps done so far, by name (one query)."""
        return self.task.steps

    @usable_in_event_loop
    def step(self, name: str, func, *args, **kwargs):
        """Run ``func(*args, **kwargs)`` as the step ``name`` once; return its result.

        The result is recorded on the task as soon as the step returns, so a later attempt
        (after a crash, a transient error or a requeue) skips the step and gets the recorded
        result back. The result must be JSON (``jobs.tasks.payload``); the name a str of at most 200
        characters. A step that raises records nothing and runs again next time. A
        cancellation checkpoint precedes every step that has to run.

        Each call costs the same whatever the number of steps before it: one indexed read of
        this step, and one INSERT of its row when it runs.
        """
        check_name(name, "step name", STEP_NAME_LENGTH)
        recorded = (
            TaskStep.objects.filter(task_id=self.task.pk, name=name).values_list("result").first()
        )
        if recorded is not None:
            return recorded[0]
        self.check_cancelled()
        result = func(*args, **kwargs)
        validate_json(result, f"the result of step {name!r}")
        # A racing attempt (this one's worker was presumed lost) may have recorded it already:
        # both ran the step, and the row first written stays.
        with _refusal_raised(f"the result of step {name!r}"):
            TaskStep.objects.bulk_create(
                [TaskStep(task_id=self.task.pk, name=name, result=result)], ignore_conflicts=True
            )
        return result

    @usable_in_event_loop
    def once(self, key: str, func, *args, **kwargs):
        """Run ``func`` at most once per business ``key`` (see ``jobs.execution.effects.once``)."""
        return effects.once(key, func, *args, task=self.task, **kwargs)

    # Results shown to the owner -----------------------------------------------------------------

    @usable_in_event_loop
    def mark_result_public(self):
        """Let the status view show this task's result to its owner (off by default)."""
        self.task.result_public = True
        self._this_attempt().update(result_public=True)

    # Cancellation -------------------------------------------------------------------------------

    @usable_in_event_loop
    def cancel_requested(self) -> bool:
        requested_at = (
            Task.objects.filter(pk=self.task.pk)
            .values_list("cancel_requested_at", flat=True)
            .first()
        )
        self.task.cancel_requested_at = requested_at
        return requested_at is not None

    def check_cancelled(self):
        """Stop here, recording the task ``cancelled``, if someone asked to cancel it."""
        if self.cancel_requested():
            raise TaskCancelled(f"task {self.task.pk} was cancelled")
