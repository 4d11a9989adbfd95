"""A Django Tasks backend storing tasks in the jobs table, run by ``runworker``.

Works with ``django.tasks`` (Django 6) and with the ``django_tasks`` backport (Django 5.2)::

    TASKS = {"default": {"BACKEND": "jobs.backends.DatabaseBackend"}}

``OPTIONS`` may set ``MAX_ATTEMPTS`` (default ``JOBS_DEFAULT_MAX_ATTEMPTS``).
"""

from typing import TYPE_CHECKING

from django.apps import apps
from django.core import checks
from django.core.exceptions import ValidationError
from django.utils.module_loading import import_string

from jobs.conf import jobs_settings
from jobs.exceptions import UnknownTaskError
from jobs.execution.runnable import Runnable
from jobs.states import Status
from jobs.tasks.payload import encode_payload

if TYPE_CHECKING:
    from jobs.models import Task

# jobs.models and what imports it (jobs.tasks.registry) are imported where used, not here (the app
# registry): Django's check of the task backends imports this module even when "jobs" is not
# installed, and the import of a model outside an installed app would raise instead of check()
# reporting it.

try:  # Django >= 6.0
    from django.tasks import TaskContext as TaskContext  # for jobs.execution.django_context
    from django.tasks import TaskResult, TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task as DjangoTask
    from django.tasks.base import TaskError
    from django.tasks.exceptions import TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:  # Django 5.2 with the django-tasks backport
    # The backport's classes stand in for django.tasks' on Django 5.2; the stubs know only the
    # latter, hence the ignores (assignment: another class under the same name).
    from django_tasks import TaskContext as TaskContext  # type: ignore[assignment]
    from django_tasks import TaskResult, TaskResultStatus, task_backends  # type: ignore[assignment]
    from django_tasks.backends.base import BaseTaskBackend  # type: ignore[assignment]
    from django_tasks.base import Task as DjangoTask  # type: ignore[assignment]
    from django_tasks.base import TaskError  # type: ignore[assignment]
    from django_tasks.exceptions import TaskResultDoesNotExist  # type: ignore[assignment]
    from django_tasks.signals import task_enqueued, task_finished, task_started

STATUS_MAP: dict[str, TaskResultStatus] = {
    Status.PENDING: TaskResultStatus.READY,
    Status.RETRYING: TaskResultStatus.READY,
    Status.RUNNING: TaskResultStatus.RUNNING,
    Status.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    Status.FAILED: TaskResultStatus.FAILED,
    Status.CANCELLED: TaskResultStatus.FAILED,
}


class DatabaseBackend(BaseTaskBackend):
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias, params):
        super().__init__(alias, params)
        # Kept as given: check() reports a bad value (int(nan) here would crash every command).
        self.max_attempts = self.options.get("MAX_ATTEMPTS", jobs_settings.DEFAULT_MAX_ATTEMPTS)

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

    def enqueue(self, task, args, kwargs):
        return self.store(task, args, kwargs)[1]

    def store(self, task, args, kwargs, **fields) -> "tuple[Task, TaskResult]":
        """Enqueue ``task``; return its row and result. ``fields``: ``summary``, and an
        ``idempotency_key`` (an existing task of the same key is returned, and no signal sent).
        """
        from jobs.tasks.registry import create_task  # app registry: see the imports above

        self.validate_task(task)
        payload, payload_text = encode_payload(args, kwargs)
        row = create_task(
            name=task.module_path,
            backend=self.alias,
            queue=task.queue_name,
            priority=task.priority,
            payload=payload,
            payload_text=payload_text,
            max_attempts=self.max_attempts,
            **({"run_after": task.run_after} if task.run_after else {}),
            **fields,
        )
        result = to_task_result(row, task)
        if row.created:
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


def load_task(row: "Task") -> DjangoTask:
    try:
        task = import_string(row.name)
    except ImportError:
        task = None
    if not isinstance(task, DjangoTask):
        raise UnknownTaskError(
            f"No Django task is importable as {row.name!r}: was it renamed or removed?"
        )
    return task


def to_task_result(row: "Task", task: DjangoTask, bound: DjangoTask | None = None) -> TaskResult:
    """Build the TaskResult that Django's API shows for ``row``.

    ``bound``: ``task`` with the row's priority, queue and backend, if the caller has it already
    (``task.using`` validates the task against its backend: the worker's costliest step of a
    Django task that does nothing); not used for a deferred task, which needs its ``run_after``.
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
    result: TaskResult = TaskResult(
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
    return result


# (name, backend) -> (the Django task, its Runnable): a worker resolves every task it runs.
_runnables: dict[tuple[str, str], tuple[DjangoTask, Runnable]] = {}


def runnable_for(row: "Task") -> Runnable:
    """Return how the executor runs a task enqueued through Django Tasks."""
    task = load_task(row)
    cached = _runnables.get((row.name, row.backend))
    if cached is None or cached[0] is not task:  # first use, or the task was redefined
        cached = _runnables[(row.name, row.backend)] = (task, _runnable_of(task, row.backend))
    return cached[1]


def _runnable_of(task: DjangoTask, backend: str) -> Runnable:
    from jobs.execution.django_context import DjangoTaskContext  # app registry: see above
    from jobs.tasks.registry import default_backoff  # app registry: see the imports above

    try:
        signal_sender = type(task_backends[backend])
    except Exception:  # the alias was removed from settings.TASKS since the enqueue
        signal_sender = DatabaseBackend
    # task.using(...) per (priority, queue): the same for every row that has them.
    bound: dict[tuple[int, str], DjangoTask] = {}

    def result_of(row) -> TaskResult:
        key = (row.priority, row.queue)
        if key not in bound:
            bound[key] = task.using(priority=row.priority, queue_name=row.queue, backend=backend)
        return to_task_result(row, task, bound[key])

    def call(row):
        if task.takes_context:
            context = DjangoTaskContext(result_of(row), row)
            return task.call(context, *row.args, **row.kwargs)
        return task.call(*row.args, **row.kwargs)

    return Runnable(
        call=call,
        backoff=default_backoff(),
        on_start=lambda row: task_started.send(signal_sender, task_result=result_of(row)),
        on_finish=lambda row: send_finished(signal_sender, result_of(row)),
    )


def send_finished(sender, result: TaskResult):
    """Send Django's ``task_finished`` for ``result`` if it is finished (not for a retry)."""
    if result.is_finished:
        task_finished.send(sender, task_result=result)
