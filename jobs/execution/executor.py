"""Running one claimed task: resolve it, call it, normalise the outcome, record it.

The worker decides *when* a task runs; this module decides *how one task runs*; the
transitions module decides *what is recorded*.
"""

import importlib
import inspect
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from asgiref.sync import async_to_sync
from django.db import DatabaseError, router
from django.utils import timezone

from jobs import signals, transitions
from jobs.conf import jobs_settings
from jobs.db import (
    forget_queries,
    is_connection_fault,
    retry_on_database_error,
    savepoint_in_transaction,
)
from jobs.error_records import ErrorRecord, unrecordable_error, unstorable_error
from jobs.exceptions import (
    PayloadError,
    PermanentError,
    Snooze,
    TaskCancelled,
    UnknownTaskError,
    snooze_seconds,
)
from jobs.execution import finishing
from jobs.execution.runnable import Runnable, runnable_for
from jobs.models import Task
from jobs.states import Status
from jobs.tasks.payload import check_result_size, validate_json
from jobs.tasks.registry import get_task
from jobs.tasks.retry import GENERIC_FAILURE_MESSAGE, is_transient, user_message
from jobs.text import clean_text

logger = logging.getLogger(__name__)

# An outcome's kind is the status it records.
SUCCEEDED, RETRYING = Status.SUCCEEDED, Status.RETRYING
FAILED, CANCELLED = Status.FAILED, Status.CANCELLED
# Not a status: the task asked to run later (``jobs.Snooze``); it is ``pending`` again.
SNOOZED = "snoozed"


@dataclass
class Outcome:
    kind: str
    result: object = None
    error: ErrorRecord | None = None
    retry_in: float = 0.0  # seconds until a retry, or until the end of a snooze
    duration: float = 0.0
    deferred: bool = False  # a success left for the caller to record
    # A success the caller records with others (``record_held``), then finishes (``finish``).
    held: bool = False
    # A deferred success whose hook (``finish``) waits for the caller's word that it is written
    # (a worker's child: the supervisor records it with its claim, then notifies the child).
    notify: bool = False
    finished_at: datetime | None = None
    finish: Callable[[Task], object] | None = None  # what waits for the recorded outcome
    # Why the process that ran the task should run no other (it raised SystemExit, say).
    unsettled: str = ""
    # What the task raised, in this process only (not recorded as is): ``finished`` hands it
    # to Django's task_finished receivers as the exception being handled.
    exception: BaseException | None = None


def resolve(task: Task) -> Runnable:
    """Find the code of ``task``; raise UnknownTaskError when this worker does not have it."""
    return runnable_for(task)


def timeout_for(name: str, backend: str = "") -> float:
    """The timeout in seconds of the task named ``name``: its own, else the default."""
    return get_task(name).resolved_timeout()


def is_async_task(name: str, backend: str = "") -> bool:
    """Whether the task named ``name`` is an ``async def`` (raises if it is unknown)."""
    return inspect.iscoroutinefunction(get_task(name).func)


def execute(task: Task, runnable: Runnable | None = None) -> Outcome:
    """Run the claimed ``task`` here and return what happened; never raises for the task.

    Whatever the task raises is its outcome, ``BaseException`` included: a ``SystemExit`` or
    ``KeyboardInterrupt`` from a task ends that task (classified like any exception: failed
    unless the task declared it transient), not the process running it, which is then marked
    ``unsettled`` (its caller may prefer a fresh process for the next task).
    """
    started = time.monotonic()
    process = os.getpid()
    try:
        runnable = runnable or resolve(task)
        if runnable.on_start:
            runnable.on_start(task)
        result = runnable.call(task)
        if inspect.isawaitable(result):  # an async task run here alone, not on a child's loop
            # As Django runs one: its sync_to_async calls come back to this thread.
            result = async_to_sync(_awaited)(result)
        outcome = outcome_of_result(task, result)
    except TaskCancelled:
        outcome = Outcome(CANCELLED)
    except Snooze as snooze:
        outcome = _snoozed(task, snooze)
    except BaseException as exc:  # the task's outcome, whatever it raised
        outcome = outcome_for_exception(task, exc, runnable)
        outcome.exception = exc
        if not isinstance(exc, Exception):
            assert outcome.error is not None  # outcome_for_exception always records one
            outcome.unsettled = f"the task raised {outcome.error.exception}"
    if os.getpid() != process:
        _leave_forked_process(task, outcome)
    outcome.duration = time.monotonic() - started
    return outcome


async def _awaited(awaitable):
    return await awaitable


def _checked_success(result) -> Outcome:
    """A success, or, for a return value that is not JSON or is over ``JOBS_MAX_RESULT_BYTES``,
    a failure recording a ``TypeError`` (what Django Tasks record): no retry returns another
    value."""
    try:
        validate_json(result, "the task's return value")
        check_result_size(result, "the task's return value")
    except PayloadError as exc:
        error = TypeError(str(exc))
        error.__cause__ = exc
        record = ErrorRecord.from_exception(error, str(exc), False)
        # Permanent, as the PermanentError recorded before: retrying it from the page cannot help.
        # The exception too, so that Django's task_finished is sent while it is being handled.
        return Outcome(FAILED, error=replace(record, permanent=True), exception=error)
    return Outcome(SUCCEEDED, result=result)


def outcome_of_result(task: Task, result) -> Outcome:
    """What a task's return value makes of its attempt: a snooze (``jobs.Snooze`` returned), or
    a success (a failure for a value that is not JSON)."""
    return _snoozed(task, result) if isinstance(result, Snooze) else _checked_success(result)


def _snoozed(task: Task, snooze: Snooze) -> Outcome:
    """The task asked to run again in ``snooze.seconds``: snoozed, unless its seconds are not
    a valid snooze (a subclass that skipped ``__init__``, an attribute changed) or it has
    snoozed ``JOBS_MAX_SNOOZES`` times already: then the attempt fails, saying why."""
    try:
        seconds = snooze_seconds(getattr(snooze, "seconds", None))
    except Exception as exc:  # PayloadError, or whatever a subclass's ``seconds`` raised
        message = str(exc) if isinstance(exc, PayloadError) else f"Snooze seconds: {exc!r:.200}"
        error = PermanentError(message, detail=message)
        return Outcome(FAILED, error=ErrorRecord.from_exception(error, message, False))
    limit = jobs_settings.MAX_SNOOZES
    if task.snoozes >= limit:
        message = (
            f"The task asked to run later {task.snoozes} times, the limit (JOBS_MAX_SNOOZES "
            f"is {limit}): it was stopped so that it does not wait for ever."
        )
        error = PermanentError(message, detail=message)
        return Outcome(FAILED, error=ErrorRecord.from_exception(error, message, False))
    return Outcome(SNOOZED, retry_in=seconds)


def _leave_forked_process(task: Task, outcome: Outcome):
    """End a process the task forked that came back here (``os.fork()`` returns twice).

    Only the process that claimed the task may record its outcome or talk to the supervisor;
    a copy that returns from the task or raises exits now, its outcome ignored.
    """
    logger.warning(
        "forked process returned from task, exiting name=%s id=%s pid=%s outcome=%s",
        task.name, task.pk, os.getpid(), outcome.kind,
    )  # fmt: skip
    os._exit(0 if outcome.kind == SUCCEEDED else 1)


def outcome_for_exception(task: Task, exc: BaseException, runnable: Runnable | None) -> Outcome:
    """Classify ``exc``: retry later if it is transient and attempts remain, else fail.

    Never raises: if the task's own policy (a ``transient`` check, a backoff) fails on ``exc``,
    the attempt fails, with ``exc`` recorded.
    """
    if isinstance(exc, PayloadError):
        # A value jobs refused (an enqueue, a progress report in the task's body): the same
        # value would be refused again, so permanent, and the person reads what is wrong. It
        # is recorded as itself, so the operator reads its real class and its traceback.
        record = ErrorRecord.from_exception(exc, clean_text(str(exc)), False)
        return Outcome(FAILED, error=replace(record, permanent=True))
    if isinstance(exc, UnknownTaskError):
        # Not the task's fault and not curable by waiting: say what is wrong, plainly.
        exc = PermanentError(str(exc), detail=str(exc))
    try:
        transient = runnable is not None and is_transient(exc, runnable.transient)
        will_retry = transient and task.attempts < task.max_attempts
        message = user_message(exc, will_retry)
        retry_in = runnable.backoff.delay(task.attempts) if will_retry and runnable else 0.0
    except Exception:
        logger.exception("classifying the task's exception failed id=%s", task.pk)
        transient = will_retry = False
        message, retry_in = GENERIC_FAILURE_MESSAGE, 0.0
    error = ErrorRecord.from_exception(exc, message, transient)
    if not will_retry:
        return Outcome(FAILED, error=error)
    return Outcome(RETRYING, error=error, retry_in=retry_in)


def record(task: Task, outcome: Outcome) -> bool:
    """Write ``outcome`` through the transitions, retrying the write through database faults.

    Never raises for a row the database refuses (a trigger, a value it cannot hold): that
    attempt is recorded ``failed`` with a plain error saying so instead (``_refused``).
    """

    def write():
        now = timezone.now()
        if outcome.kind == SUCCEEDED:
            return _succeed(task, outcome, now)
        try:
            with savepoint_in_transaction(router.db_for_write(Task)):
                return _write(task, outcome, now)
        except DatabaseError as exc:
            if is_connection_fault(exc):
                raise  # retry_on_database_error tries again
            return _refused(task, outcome, exc, now)

    return retry_on_database_error(
        write, what=f"record_{outcome.kind} task_id={task.pk}", model=Task
    )


def _write(task: Task, outcome: Outcome, now) -> bool:
    if outcome.kind == CANCELLED:
        return transitions.cancel_running(task, now=now)
    if outcome.kind == SNOOZED:
        return transitions.snooze(task, now + timedelta(seconds=outcome.retry_in), now=now)
    assert outcome.error is not None  # a retry or a failure always carries its error
    if outcome.kind == RETRYING:
        run_after = now + timedelta(seconds=outcome.retry_in)
        return transitions.retry_later(task, outcome.error, run_after, now=now)
    return transitions.fail(task, outcome.error, now=now)


_REFUSED_WHAT: dict[str, str] = {
    FAILED: "failure", RETRYING: "retry", CANCELLED: "cancellation", SNOOZED: "snooze"
}  # fmt: skip


def _refused(task: Task, outcome: Outcome, refusal: DatabaseError, now) -> bool:
    """The database refused to record ``outcome``: fail the task with a plain error instead.

    The plain error names the exception's class and the database's reason; if that is refused
    too, it is tried without the reason (which may quote the refused value); if that is refused
    as well, the task is left ``running`` for its lease to expire, and the worker carries on.
    """
    what = _REFUSED_WHAT.get(outcome.kind, outcome.kind)
    if outcome.error:
        raised = outcome.error.exception
    else:  # a cancellation (the task stopped at a checkpoint), or a snooze
        stopped = Snooze if outcome.kind == SNOOZED else TaskCancelled
        raised = f"{stopped.__module__}.{stopped.__qualname__}"
    logger.error(
        "database refused to record an outcome id=%s outcome=%s error=%r",
        task.pk, outcome.kind, unrecordable_error(what, raised, refusal).message,
    )  # fmt: skip
    outcome.kind, outcome.result = FAILED, None
    for reason in (refusal, None):
        outcome.error = unrecordable_error(what, raised, reason)
        try:
            with savepoint_in_transaction(router.db_for_write(Task)):
                return transitions.fail(task, outcome.error, now=now)
        except DatabaseError as exc:
            if is_connection_fault(exc):
                raise
            refusal = exc
    logger.error(
        "database refused the plain failure too, the lease will expire id=%s error=%r",
        task.pk, unrecordable_error(what, raised, refusal).message,
    )  # fmt: skip
    return False


def _succeed(task: Task, outcome: Outcome, now) -> bool:
    """Record a success; if the database refuses its result, fail the task and say why."""
    using = router.db_for_write(Task)
    try:
        with savepoint_in_transaction(using):
            return transitions.succeed(task, outcome.result, now=now)
    except DatabaseError as exc:
        if is_connection_fault(exc):
            raise  # retry_on_database_error tries again
        outcome.kind, outcome.result = FAILED, None
        outcome.error = unstorable_error(exc)
        try:
            with savepoint_in_transaction(using):
                return transitions.fail(task, outcome.error, now=now)
        except DatabaseError as again:
            if is_connection_fault(again):
                raise
            return _refused(task, outcome, again, now)


def _nothing_after_success(runnable: Runnable | None) -> bool:
    """Whether a success may be recorded elsewhere: no hook or signal receiver waits for it here.

    Receivers of ``task_succeeded``/``task_finished`` and Django Tasks' hook run where the
    outcome is recorded; they stay in the child, under the task's timeout, rather than in the
    supervisor, where a slow or hanging receiver would hold up every task of the worker.
    """
    if runnable is not None and runnable.on_finish:
        return False
    return not signals.has_listeners(SUCCEEDED)


def _only_hook(runnable: Runnable | None) -> bool:
    """Whether the task's own hook (Django Tasks' ``task_finished``) alone waits for its success:
    no receiver of jobs' ``task_succeeded``/``task_finished``, which run where it is recorded."""
    return (
        runnable is not None
        and runnable.on_finish is not None
        and not (signals.has_listeners(SUCCEEDED))
    )


def run(task: Task, *, defer_success: bool = False, hold_success: bool = False,
        notify_success: bool = False, runnable: Runnable | None = None,
        batch_line: bool = False) -> Outcome:  # fmt: skip
    """Execute and record one claimed task, with a log line at its start and its finish.

    With ``defer_success``, a success is not written here: ``outcome.deferred`` is set and the
    caller records it (the worker's supervisor does, many in one statement). Failures, retries,
    cancellations, and successes that a hook or signal receiver waits for, are recorded here;
    with ``hold_success``, such a success is not: ``outcome.held`` is set, and the caller, the
    same process, records it with others (``record_held``), which then sends its signals. With
    ``notify_success`` and ``defer_success``, a success that only the task's own hook waits for
    (Django Tasks' ``task_finished``) is deferred with ``outcome.notify`` set: the caller has it
    recorded elsewhere and calls ``outcome.finish`` once told it is (``jobs.worker.batches``).
    With ``batch_line``, a deferred success's line is at DEBUG: the caller logs one INFO line
    for the deferred successes of its reply (``JOBS_LOG_EACH_SUCCESS`` off).
    ``runnable``: the task's, if the caller resolved it already. An async task is awaited here
    on a loop of its own (``jobs.execution.aio.run_async`` awaits it on the caller's, beside
    others).
    """
    runnable, outcome = begin(task, runnable)
    if outcome is None:
        outcome = execute(task, runnable)
    return end(task, runnable, outcome, defer_success=defer_success, hold_success=hold_success,
               notify_success=notify_success, batch_line=batch_line)  # fmt: skip


def begin(task: Task, runnable: Runnable | None = None) -> tuple[Runnable | None, Outcome | None]:
    """What ``run`` does before the task's code runs: the task's runnable, or the outcome of
    failing to find it (None when the task is to run)."""
    # DEBUG: the finish line says all this again, with the outcome; one line per task is what
    # a busy worker can afford to write.
    logger.debug(
        "task started name=%s id=%s attempt=%d/%d queue=%s",
        task.name,
        task.pk,
        task.attempts,
        task.max_attempts,
        task.queue,
    )
    forget_queries()  # a task is a worker's request
    signals.send_on_commit(signals.task_started, task)
    if runnable is not None:
        return runnable, None
    try:
        return resolve(task), None
    except BaseException as exc:  # its module failed to import, say
        outcome = outcome_for_exception(task, _import_failure(task, exc), None)
        if not isinstance(exc, Exception):
            assert outcome.error is not None  # outcome_for_exception always records one
            outcome.unsettled = f"importing the task raised {outcome.error.exception}"
        return None, outcome


def end(task: Task, runnable: Runnable | None, outcome: Outcome, *, defer_success: bool,
        hold_success: bool, notify_success: bool = False,
        batch_line: bool = False) -> Outcome:  # fmt: skip
    """What ``run`` does once the task's code ran: record ``outcome`` (or defer or hold it), log."""
    attempt = task.attempts  # the attempt that ran (a snooze gives it back when recorded)
    if defer_success and outcome.kind == SUCCEEDED and _nothing_after_success(runnable):
        outcome.deferred = recorded = True
    elif notify_success and defer_success and outcome.kind == SUCCEEDED and _only_hook(runnable):
        # Django's task_finished alone waits: recorded elsewhere, the hook called here once told.
        outcome.deferred = outcome.notify = recorded = True
        outcome.finished_at = timezone.now()
        outcome.finish = runnable.on_finish if runnable else None
    elif hold_success and outcome.kind == SUCCEEDED:
        outcome.held = recorded = True
        outcome.finished_at = timezone.now()
        outcome.finish = runnable.on_finish if runnable else None
    else:
        recorded = record(task, outcome)
    if outcome.error and outcome.kind == FAILED:
        level = logging.ERROR
    elif outcome.error:
        level = logging.WARNING
    elif batch_line and outcome.deferred:
        level = logging.DEBUG  # its batch's line says it succeeded (jobs.worker.batches)
    else:
        level = logging.INFO
    # An error's class and message, as arguments (a log formatter quotes them); its
    # traceback is in the task's error_details.
    error = (outcome.error.exception, outcome.error.message) if outcome.error else ()
    snoozed = (outcome.retry_in,) if outcome.kind == SNOOZED else ()
    logger.log(
        level,
        "task finished name=%s id=%s attempt=%d/%d duration=%.3fs outcome=%s"
        + (" error=%s message=%s" if error else "")
        + (" snooze=%.3fs" if snoozed else "")
        + ("" if recorded else " recorded=false"),
        task.name,
        task.pk,
        attempt,
        task.max_attempts,
        outcome.duration,
        outcome.kind,
        *error,
        *snoozed,
    )
    # A snoozed task has not finished: Django's task_finished waits for its real outcome.
    if recorded and not (outcome.held or outcome.notify) and outcome.kind != SNOOZED:
        finishing.finished(task, runnable, outcome.exception)
    return outcome


def _import_failure(task: Task, exc: BaseException) -> BaseException:
    """What to record when the code of ``task`` could not be found: the error raised while
    importing its module, if that is why (the registry reports any ImportError there as an
    unknown name, and the real cause, a missing dependency say, would be lost)."""
    module = task.name.rpartition(".")[0]
    if not isinstance(exc, UnknownTaskError) or not module:
        return exc
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as missing:
        # The module itself (or a package above it) does not exist: the name is unknown here.
        if missing.name and (module == missing.name or module.startswith(missing.name + ".")):
            return exc
        return missing
    except BaseException as failure:  # whatever the module raised
        return failure
    return exc
