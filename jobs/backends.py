"""A Django Tasks backend storing tasks in the jobs table, run by ``runworker``.

Works with ``django.tasks`` (Django 6) and with the ``django_tasks`` backport (Django 5.2)::

    TASKS = {"default": {"BACKEND": "jobs.backends.DatabaseBackend"}}

``OPTIONS`` may set ``MAX_ATTEMPTS`` (default ``JOBS_DEFAULT_MAX_ATTEMPTS``).
"""

import functools
from typing import TYPE_CHECKING

from django.apps import apps
from django.core import checks
from django.core.exceptions import ValidationError

from jobs.conf import jobs_settings
from jobs.exceptions import PayloadError, UnknownTaskError
from jobs.states import Status
from jobs.tasks.definition import JOBS_API, JobsTask, TaskOptionError
from jobs.tasks.django_api import (
    TASK_MAX_PRIORITY as MAX_PRIORITY,
)
from jobs.tasks.django_api import (
    TASK_MIN_PRIORITY as MIN_PRIORITY,
)
from jobs.tasks.django_api import (
    BaseTaskBackend,
    DjangoTask,
    InvalidTask,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)
from jobs.tasks.payload import check_queue_name, encode_payload, is_flat
from jobs.tasks.registry import get_task

if TYPE_CHECKING:
    from jobs.models import Task

# jobs.models and what imports it (jobs.tasks.enqueueing) are imported where used, not here (the
# app registry): Django's check of the task backends imports this module even when "jobs" is not
# installed, and the import of a model outside an installed app would raise instead of check()
# reporting it.

__all__ = [  # Django's names too, whichever line provides them (jobs.tasks.django_api)
    "DatabaseBackend",
    "DjangoTask",
    "JobsTaskResult",
    "TaskContext",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]

STATUS_MAP: dict[str, TaskResultStatus] = {
    Status.PENDING: TaskResultStatus.READY,
    Status.BLOCKED: TaskResultStatus.READY,
    Status.RETRYING: TaskResultStatus.READY,
    Status.RUNNING: TaskResultStatus.RUNNING,
    Status.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    Status.FAILED: TaskResultStatus.FAILED,
    Status.CANCELLED: TaskResultStatus.FAILED,
}


class DatabaseBackend(BaseTaskBackend):
    """Stores Django tasks in jobs' table; its ``task_class`` carries jobs' options."""

    task_class = JobsTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias, params):
        super().__init__(alias, params)

        # The tasks whose function passed Django's checks, with their context flag: validating a
        # task inspects its function's signature, and every using() validates its copy anew.
        self._valid_functions: set[tuple[object, bool]] = set()

    @property
    def max_attempts(self):
        """The attempts of a task that sets none: ``OPTIONS["MAX_ATTEMPTS"]``, else the setting.

        Kept as given: check() reports a bad value (int(nan) here would crash every command).
        """
        return self.options.get("MAX_ATTEMPTS", jobs_settings.DEFAULT_MAX_ATTEMPTS)

    def check(self, **kwargs):
        yield from super().check(**kwargs)
        if not apps.is_installed("jobs"):
            yield checks.Error(
                f"The task backend {self.alias!r} (jobs.backends.DatabaseBackend) stores tasks "
                'in the jobs app\'s table, but "jobs" is not in INSTALLED_APPS.',
                hint='Add "jobs" to INSTALLED_APPS, then run manage.py migrate.',
                id="jobs.E005",
            )
        attempts = self.options.get("MAX_ATTEMPTS")  # the setting's own value: jobs.checks
        if attempts is not None and (
            isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts < 2**31
        ):
            yield checks.Error(
                f"OPTIONS MAX_ATTEMPTS of the task backend {self.alias!r} must be a whole number "
                f"from 1 to {2**31 - 1:,}, got {attempts!r}.",
                id="jobs.E007",
            )

    def validate_task(self, task):
        """Django's checks, and jobs': a queue name a worker can select (``runworker --queues``)."""
        try:
            check_queue_name(task.queue_name)
            known = (task.func, task.takes_context)
            if known in self._valid_functions and task.run_after is None:
                # The function's checks passed before; the rest of Django's are these two.
                priority = task.priority
                if type(priority) is not int or not MIN_PRIORITY <= priority <= MAX_PRIORITY:
                    super().validate_task(task)  # raises, with Django's message
                if self.queues and task.queue_name not in self.queues:
                    super().validate_task(task)
            else:
                super().validate_task(task)
                self._valid_functions.add(known)
        except (InvalidTask, PayloadError) as exc:
            raise TaskOptionError(str(exc)) from None

    def enqueue(self, task, args, kwargs):
        return self.store(task, args, kwargs)[1]

    def store(
        self, task, args, kwargs, *, with_result=True, workflow=None
    ) -> "tuple[Task, TaskResult | None]":
        """Enqueue ``task`` (its ``using()`` options included); return its row and its result.

        An existing task of the same idempotency key, or holding the same unique key, is
        returned instead of a new one (no signal sent then). Django's ``task_enqueued`` is sent
        for the backends of ``settings.TASKS``, not for ``@jobs.task`` tasks (jobs' own
        signals are sent for both).
        ``with_result=False`` skips building the result when only the row is wanted.
        A task with ``depends_on`` is stored ``blocked`` (``jobs.workflows.waiting``), as is one
        that ``workflow`` (a ``jobs.workflows.waiting.Place``: a chain's link, a batch's
        callback) says must wait.
        """
        from jobs.tasks.enqueueing import create_task, row_fields  # app registry: see above

        if not isinstance(task, JobsTask):  # a Django Task made by hand, not by @task
            task = as_jobs_task(task)
        payload, payload_text = encode_payload(args, kwargs)
        unique = task.resolved_unique()
        if task.depends_on or workflow is not None:
            from jobs.workflows.waiting import create_waiting  # app registry: see above

            row = create_waiting(task, payload, payload_text, unique, workflow)
        else:
            row = create_task(
                payload=payload, payload_text=payload_text, unique=unique, **row_fields(task)
            )
        signalled = row.created and self.alias != JOBS_API
        result = to_task_result(row, as_declared(task)) if with_result or signalled else None
        if signalled:
            task_enqueued.send(type(self), task_result=result)
        return row, result

    def get_result(self, result_id):
        from jobs.models import Task  # app registry: see the imports above

        try:
            # This backend's results only: another alias's are another backend's to return.
            row = Task.objects.get(pk=result_id, backend=self.alias)
        except (Task.DoesNotExist, ValidationError, ValueError, TypeError) as exc:
            # A malformed id is as absent as an unknown one.
            raise TaskResultDoesNotExist(result_id) from exc
        try:
            task = load_task(row)
        except UnknownTaskError as exc:  # its function was renamed or removed since
            raise TaskResultDoesNotExist(result_id) from exc
        return to_task_result(row, task)


@functools.cache
def jobs_api_backend() -> DatabaseBackend:
    """The backend of ``@jobs.task`` tasks: jobs' table, without an entry in settings.TASKS.

    Every queue name is accepted (``QUEUES`` empty), as jobs' own API always has.
    """
    return DatabaseBackend(JOBS_API, {"QUEUES": []})


def as_jobs_task(task: DjangoTask) -> JobsTask:
    """``task``, a Django ``Task`` built by hand for a jobs backend, as a ``JobsTask``."""
    return JobsTask(
        func=task.func,
        priority=task.priority,
        backend=task.backend,
        queue_name=task.queue_name,
        run_after=task.run_after,
        takes_context=task.takes_context,
    )


def as_declared(task: JobsTask) -> JobsTask:
    """``task`` as declared, without what ``using()`` set for one call (owner, summary...).

    A result's ``task`` is the declared one with the row's priority, queue, backend and
    ``run_after`` (``to_task_result``), whether enqueue or ``get_result`` built it, so the two
    are equal as Django's contract wants; the row (``result.record``) keeps the call's options.
    """
    try:
        declared = get_task(task.module_path)
    except UnknownTaskError:
        return task
    return declared if declared.func is task.func else task


def load_task(row: "Task") -> JobsTask:
    """The task that ``row`` is a call of, found by its name (its dotted path)."""
    task = get_task(row.name)
    if row.backend != task.backend:
        # Declared for another backend since (or a row made by hand): run it as the row says.
        task = task.using(backend=row.backend)
    return task


class JobsTaskResult(TaskResult):
    """Django's ``TaskResult``, with jobs' record of the task at hand (``record``).

    The record is no field of the dataclass: a result compares, prints and converts
    (``dataclasses.asdict``) as Django's does.
    """

    __slots__ = ("_record",)

    def __post_init__(self):
        # Django's normalises the arguments to JSON's types value by value (a third of building
        # a result); flat ones, as most calls' are, are JSON's types already: copied, as Django's
        # would be, not walked. Anything else is Django's to normalise.
        args, kwargs = self.args, self.kwargs
        if type(args) is list and type(kwargs) is dict and is_flat(args, kwargs):
            object.__setattr__(self, "args", list(args))
            object.__setattr__(self, "kwargs", dict(kwargs))
        else:
            TaskResult.__post_init__(self)

    @property
    def record(self) -> "Task":
        """jobs' row of this task: its status in jobs' words (``retrying``, ``cancelled``),
        progress, steps, owner and error history, and ``created`` (False when an idempotency
        key returned an existing task). Fetched on first use if the result was built without
        it; ``refresh()`` fetches it again."""
        record = getattr(self, "_record", None)
        if record is None:
            from jobs.models import Task  # app registry: see the imports above

            record = Task.objects.get(pk=self.id)
            object.__setattr__(self, "_record", record)
        return record

    def refresh(self):
        TaskResult.refresh(self)  # not super(): slots=True dataclasses break its cell
        object.__setattr__(self, "_record", None)

    async def arefresh(self):
        await TaskResult.arefresh(self)
        object.__setattr__(self, "_record", None)


def to_task_result(
    row: "Task", task: DjangoTask, bound: DjangoTask | None = None
) -> JobsTaskResult:
    """Build the TaskResult that Django's API shows for ``row``.

    ``bound``: ``task`` with the row's priority, queue and backend, if the caller has it already
    (``task.using`` makes a copy, validated); not used for a deferred task, which needs its
    ``run_after``.
    """
    errors = [
        TaskError(exception_class_path=entry["exception"], traceback=entry.get("traceback", ""))
        for entry in row.error_details
    ]
    if row.status == Status.CANCELLED:
        errors.append(
            TaskError(
                exception_class_path="jobs.exceptions.TaskCancelled",
                traceback="The task was cancelled.",
            )
        )
    worker_ids = [entry.get("worker_id", "") for entry in row.error_details]
    if row.attempts > len(worker_ids):
        worker_ids.append(row.worker_id)
    # run_after as enqueued: None unless the task was deferred (a task due at once is stored
    # due at its creation). A retry, release or requeue moves it: it then says when the task
    # is due next.
    run_after = row.run_after if row.run_after != row.created_at else None
    if bound is None and run_after is None and _matches(task, row):
        # The task as it is: ``using()`` would make an equal copy of it, validated again (a
        # frozen dataclass, so the one object serves both), a fifth of an enqueue's own work.
        bound = task
    result = JobsTaskResult(
        task=bound
        if bound is not None and run_after is None
        else task.using(
            priority=row.priority, queue_name=row.queue, backend=row.backend, run_after=run_after
        ),
        id=str(row.pk),
        status=STATUS_MAP[row.status],
        enqueued_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        last_attempted_at=row.started_at,
        args=row.args,
        kwargs=row.kwargs,
        backend=row.backend,
        errors=errors,
        worker_ids=worker_ids,
    )
    object.__setattr__(result, "_return_value", row.result)
    object.__setattr__(result, "_record", row)
    return result


def _matches(task: DjangoTask, row: "Task") -> bool:
    """Whether ``task`` has ``row``'s priority, queue and backend and no ``run_after`` of its
    own: what ``task.using()`` with the row's values would return a copy of."""
    return (
        task.run_after is None
        and task.priority == row.priority
        and task.queue_name == row.queue
        and task.backend == row.backend
    )


# Where a row keeps the TaskResult of its attempt (``attempt_result``), with the attempt's number:
# its own attribute, so that attempts run side by side in one process each keep theirs.
_ATTEMPT_RESULT = "_jobs_attempt_result"


def attempt_result(
    row: "Task", task: DjangoTask, bound: DjangoTask | None = None
) -> JobsTaskResult:
    """The TaskResult of the attempt ``row`` is, one object for the whole attempt.

    Django's own backends send one object to ``task_started``, the task's context and
    ``task_finished``, setting its fields as the attempt goes (``ImmediateBackend``); so does the
    worker. Built at the attempt's start (``to_task_result``); once the row records the attempt's
    success, the same object is brought up to it (status, finish time, return value: nothing
    else changes with a success). Any other change of status (a failure, a retry, a
    cancellation, whose errors change too) builds it anew. ``forget_attempt_result`` drops it.
    """
    attempt, result = row.__dict__.get(_ATTEMPT_RESULT, (None, None))
    if result is not None and attempt == row.attempts:  # not one kept from an earlier attempt
        status = STATUS_MAP[row.status]
        if status == result.status:
            return result
        if status == TaskResultStatus.SUCCESSFUL and result.status == TaskResultStatus.RUNNING:
            object.__setattr__(result, "status", status)
            object.__setattr__(result, "finished_at", row.finished_at)
            object.__setattr__(result, "_return_value", row.result)
            return result
    result = to_task_result(row, task, bound)
    row.__dict__[_ATTEMPT_RESULT] = (row.attempts, result)
    return result


def forget_attempt_result(row: "Task"):
    """Drop the result ``attempt_result`` keeps on ``row`` (it refers to the row: a cycle)."""
    row.__dict__.pop(_ATTEMPT_RESULT, None)


def send_finished(sender, result: TaskResult):
    """Send Django's ``task_finished`` for ``result`` if it is finished (not for a retry)."""
    if result.is_finished:
        task_finished.send(sender, task_result=result)
