"""Notices: the word a child waits for before it sends Django's ``task_finished`` for a success.

A success of a task declared with Django's ``@task`` (Django's own receivers log its end) is
written by the supervisor, with its next claim, like any plain success
(``jobs.worker.completer``); the child that ran it reports it ``notify`` and keeps its task and
``TaskResult`` until told the row is written. The steps, for each such success:

1. ``add``: the child reported it; the supervisor remembers which child, and its task's timeout.
2. ``recorded``: the completer wrote it (``applied``) or the database did not take it (refused:
   the row failed instead, or the attempt is no longer this worker's); the notice goes on the
   child's list (``Child.notice_finished``/``notice_refused``). A claim that failed tells
   nothing: no signal before the row is written.
3. The pool sends the notice with the child's next batch, or alone to an idle child
   (``ChildPool.dispatch``); the child calls the hooks before the batch's first task, counted
   busy and under the longest timeout of those tasks (a hanging receiver is killed as a task
   that overran its timeout, and no task of the batch is blamed for it).
4. A child gone before it took its notice in (recycled, lost, killed, the worker stopping):
   ``finish_here`` sends ``task_finished`` from the supervisor for its recorded successes, as
   ``jobs.worker.losses`` does for lost tasks (the row read, its task resolved by name). A
   child killed while calling the hooks (one hung) had taken its notice in: nothing is sent
   again.

So each ``task_finished`` is sent once the row is final, and once: by the child, or, if the
child is gone before its notice, by the supervisor.
"""

import logging
import uuid

from django.db import DatabaseError

from jobs.db import first_line
from jobs.execution import executor, finishing
from jobs.models import Task
from jobs.states import Status
from jobs.worker.child import Child
from jobs.worker.wire import Claimed

logger = logging.getLogger(__name__)


class Notices:
    """Which child waits for the word on which success; see the module's docstring."""

    def __init__(self, *, retry, children):
        """Read rows through ``retry(operation, what, **options)``; ``children()``: the pool's
        children now (a child not among them is gone)."""
        self._retry = retry
        self._children = children
        self._awaiting: dict[uuid.UUID, tuple[Child, Claimed, float]] = {}

    def add(self, child: Child, claimed: Claimed, timeout: float):
        self._awaiting[claimed.id] = (child, claimed, timeout)

    def pending(self) -> bool:
        """Whether a notice is still to send, or out with a child not replied yet."""
        return any(child.notice_due or child.noticing for child in self._children())

    def recorded(self, successes, applied: set):
        """The completer wrote ``successes``, ``applied`` to those ids: tell their children."""
        if not self._awaiting:  # no success of Django's @task among them
            return
        children = {id(child) for child in self._children()}
        orphans: list[tuple[Claimed, bool]] = []
        for success in successes:
            entry = self._awaiting.pop(success.task_id, None)
            if entry is None:
                continue
            child, claimed, timeout = entry
            written = success.task_id in applied
            if id(child) not in children or child.conn.closed:
                orphans.append((claimed, written))
                continue
            (child.notice_finished if written else child.notice_refused).append(claimed)
            child.notice_timeout = max(child.notice_timeout, timeout)
        self.finish_here(orphans)

    def child_gone(self, child: Child):
        """``child`` exited or is replaced: the notices it did not take in are sent from here."""
        orphans = [(claimed, True) for claimed in child.notice_finished]
        orphans += [(claimed, False) for claimed in child.notice_refused]
        if child.noticing and not child.notice_started():
            orphans += child.noticing
        child.notice_finished, child.notice_refused, child.noticing = [], [], []
        self.finish_here(orphans)

    def close(self):
        """The worker stops: every notice not taken in by a child is sent from here."""
        for child in self._children():
            self.child_gone(child)

    def finish_here(self, orphans: list[tuple[Claimed, bool]]):
        """Send ``task_finished`` for recorded successes whose child is gone (``(task,
        written)``): with the row final, succeeded, or failed if the database refused the
        result (that attempt's failure, this worker's)."""
        if not orphans:
            return
        ids = [claimed.id for claimed, _ in orphans]
        try:
            rows = self._retry(
                lambda: {task.pk: task for task in Task.objects.filter(pk__in=ids)},
                f"read {len(ids)} finished tasks",
            )
        except DatabaseError as exc:
            logger.warning(
                "task_finished not sent, database unreachable count=%d error=%r",
                len(ids), first_line(exc),
            )  # fmt: skip
            return
        for claimed, written in orphans:
            task = rows.get(claimed.id)
            wanted = Status.SUCCEEDED if written else Status.FAILED
            if task is None or task.status != wanted:
                continue  # refused and not failed: the attempt is no longer this worker's
            if (task.attempts, task.worker_id) != (claimed.attempts, claimed.worker_id):
                continue  # another attempt's outcome: its own worker sent the signal
            try:
                runnable = executor.resolve(task)
            except BaseException:  # its module failed to import here
                continue
            finishing.finished(task, runnable)
