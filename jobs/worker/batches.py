"""A child's batches: their tasks run one after another, async ones together, and reported.

The child process (``jobs.worker.child``) hands each batch the supervisor sends it to
``_BatchRunner``; a run of consecutive async tasks goes to ``jobs.worker.async_batch``.

The quick successes a reply carries to the supervisor (deferred: no hook or receiver waits for
them here) are logged in one INFO line with the reply, ``tasks succeeded count=… names=…``;
each task's own ``task finished`` line is at DEBUG then. Every other outcome (failures, retries,
snoozes, cancellations, held successes) keeps its INFO/WARNING/ERROR line. With
``JOBS_LOG_EACH_SUCCESS`` on, every task has its own INFO line and no batch line is written:
at a few thousand quick tasks a second, a line each cost a loaded worker half its throughput
(``docs/performance.md``).
"""

import asyncio
import contextlib
import json
import logging
import os
import time
from typing import Any

from jobs.conf import jobs_settings
from jobs.execution import executor, finishing
from jobs.states import Status
from jobs.worker.async_batch import AsyncRun
from jobs.worker.wire import NOTICE, NOTIFY, task_from_values

logger = logging.getLogger(__name__)


def rss_bytes(pid: int) -> int | None:
    """Resident memory of ``pid`` in bytes, from /proc (None where /proc is not available)."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class _BatchRunner:
    """Runs the tasks of each batch one after the other, and reports their outcomes.

    Outcomes go back in as few replies as possible: one when the batch is done, and one every
    ``REPORT_INTERVAL`` seconds while a long batch runs, so the supervisor records successes
    and frees slots without waiting for the whole batch. A task is only started within the
    batch's time budget (the first always is): the rest go back to the supervisor unstarted,
    so that a slow task never holds fast ones behind it for long, nor do they it.
    """

    REPORT_INTERVAL = 0.05

    def __init__(self, conn, slot, max_tasks, max_memory):
        self.conn, self.slot = conn, slot
        self.max_tasks, self.max_memory = max_tasks, max_memory
        self.done = 0
        self.recycle = False
        self.recycle_reason = ""
        self.pid = os.getpid()  # only this process may reply: a task may fork
        # Successes a receiver waits for, recorded together before the next reply.
        self.held: list[tuple[int, Any, executor.Outcome]] = []
        # Successes the supervisor records, whose hook waits for its notice, by task id.
        self.awaiting: dict[str, tuple[Any, executor.Outcome]] = {}
        # The outcomes of the batch running not reported yet, and the time spent on them.
        self.results: list[list[Any]] = []
        self.busy = 0.0
        # The deferred successes of those outcomes, for the reply's line: (name, id, duration).
        self.succeeded: list[tuple[str, Any, float]] = []
        self.batch_line = True  # JOBS_LOG_EACH_SUCCESS off, read at each batch
        self.started = 0.0  # monotonic time the batch running started
        self.reported = 0.0  # monotonic time of the last reply
        self.loop: asyncio.AbstractEventLoop | None = None  # for async tasks, made on first use

    def run(self, message: dict):
        number, tasks, budget = message["batch"], message["tasks"], message["budget"]
        if "finished" in message or "refused" in message:  # the supervisor's notice first
            self.slot.start(number, NOTICE, time.monotonic())
            self.notified(message.get("finished", ()), message.get("refused", ()))
        started = self.started = self.reported = time.monotonic()
        self.results, self.busy, self.succeeded = [], 0.0, []
        self.batch_line = not jobs_settings.LOG_EACH_SUCCESS
        returned: list[int] = []
        index = 0
        while index < len(tasks):
            now = time.monotonic()
            if index and (now - started > budget or self.slot.stop_asked or self.recycle):
                returned = list(range(index, len(tasks)))
                break
            if (self.results or self.held) and now - self.reported > self.REPORT_INTERVAL:
                self.report(number, now)
            task = task_from_values(tasks[index])
            runnable = _resolved(task)
            if runnable is not None and runnable.is_async:
                group = self._async_run(
                    tasks, index, task, runnable
                )  # async tasks, from this one on: together on the loop
                unstarted = self._run_async(number, group, started, budget)
                index += len(group)
                if unstarted:
                    returned = unstarted + list(range(index, len(tasks)))
                    break
                continue
            self.slot.start(number, index, now)
            try:
                result = _run_one(
                    index, task=task, runnable=runnable, retire=self._retire, held=self.held,
                    awaiting=self.awaiting, succeeded=self._succeeded(),
                )  # fmt: skip
            except BaseException:
                # Not the task's doing (the executor keeps those): the child exits, and the
                # supervisor records this task as lost. The tasks finished before it are
                # reported first, so that none of them is handed back and run again.
                if (self.results or self.held) and os.getpid() == self.pid:
                    with contextlib.suppress(Exception):
                        self._reply(number, self.results, self.busy, final=False)
                raise
            if result is not None:
                self.results.append(result)
            if os.getpid() != self.pid:  # a process the task forked, come back (see executor)
                os._exit(0)
            self.busy += time.monotonic() - now
            self.count_done()
            index += 1
        if self.max_memory and (rss_bytes(os.getpid()) or 0) > self.max_memory:
            self._retire(f"max_memory={self.max_memory // 2**20}MiB")
        self._reply(number, self.results, self.busy, final=True, returned=returned)

    def notified(self, finished: list[str], refused=()):
        """The supervisor wrote the successes ``finished`` (and refused ``refused``): call what
        waits for each (Django Tasks' ``task_finished``), once, with the row final."""
        for task_id in finished:
            task, outcome = self.awaiting.pop(task_id, (None, None))
            if task is None or outcome is None:
                continue
            task.status, task.result = Status.SUCCEEDED, outcome.result
            task.finished_at, task.lease_expires_at = outcome.finished_at, None
            if outcome.finish:
                finishing.call_finish(task, outcome.finish)
        for task_id in refused:
            task, outcome = self.awaiting.pop(task_id, (None, None))
            if task is not None and outcome is not None:
                finishing.finish_refused(task, outcome.finish)

    def report(self, number: int, now: float):
        """Send the outcomes gathered so far of batch ``number`` (the batch goes on)."""
        self._reply(number, self.results, self.busy, final=False)
        self.results, self.busy, self.reported = [], 0.0, now

    def count_done(self):
        self.done += 1
        if self.max_tasks and self.done >= self.max_tasks:
            self._retire(f"max_tasks={self.max_tasks}")

    def _async_run(self, tasks: list[dict], index: int, task, runnable) -> list[tuple]:
        """The async tasks of the batch from ``index`` (``task``) on, up to its next other."""
        group = [(index, task, runnable)]
        for at in range(index + 1, len(tasks)):
            task = task_from_values(tasks[at])
            runnable = _resolved(task)
            if runnable is None or not runnable.is_async:
                break
            group.append((at, task, runnable))
        return group

    def _run_async(self, number, group, started: float, budget: float) -> list[int]:
        """Run the async tasks ``group`` together; the indices of those not started."""
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
        run = AsyncRun(self, number, started, budget, self._entry)
        return run.run(self.loop, group)

    def _entry(self, index: int, task, outcome) -> list | None:
        return _entry(
            index, task, outcome, retire=self._retire, held=self.held, awaiting=self.awaiting,
            succeeded=self._succeeded(),
        )  # fmt: skip

    def _succeeded(self) -> list | None:
        """Where deferred successes go for the reply's line; None: each logs its own."""
        return self.succeeded if self.batch_line else None

    def _retire(self, reason: str):
        """Run no further task here: the supervisor replaces this child after the reply."""
        if not self.recycle:
            self.recycle, self.recycle_reason = True, reason

    def _reply(self, number, results, busy, *, final, returned=()):
        held, self.held = self.held, []
        try:
            if held:  # recorded first: a success is reported once it is written
                finishing.record_held([(task, outcome) for _, task, outcome in held])
                results += [[index, outcome.kind, None, None] for index, _, outcome in held]
        finally:
            # Sent even if they could not be recorded (the database unreachable past its retry):
            # the other outcomes are reported, the held tasks are not, and run again (at least
            # once) as any finished task of a lost child that it had not reported.
            reply = {"batch": number, "results": results, "busy": busy, "final": final}
            if final:
                reply["returned"] = list(returned)
                reply["recycle"] = self.recycle
                reply["recycle_reason"] = self.recycle_reason
            self.conn.send_bytes(json.dumps(reply, separators=(",", ":")).encode())
            if self.succeeded:
                succeeded, self.succeeded = self.succeeded, []
                _log_successes(number, succeeded, time.monotonic() - self.started)


def _log_successes(number: int, succeeded: list[tuple[str, Any, float]], elapsed: float):
    """One line for the deferred successes of a reply: how many, of which tasks, first and last
    id (in the order they ran), the seconds they took, and since the batch started."""
    names: dict[str, int] = {}
    for name, _, _ in succeeded:
        names[name] = names.get(name, 0) + 1
    logger.info(
        "tasks succeeded count=%d names=%s first_id=%s last_id=%s duration=%.3fs elapsed=%.3fs "
        "batch=%d",
        len(succeeded), ",".join(f"{name}:{count}" for name, count in names.items()),
        succeeded[0][1], succeeded[-1][1], sum(duration for _, _, duration in succeeded),
        elapsed, number,
    )  # fmt: skip


def _resolved(task) -> executor.Runnable | None:
    """The runnable of ``task``; None if it cannot be found (``executor.run`` records why)."""
    try:
        return executor.resolve(task)
    except BaseException:  # its module failed to import, even with SystemExit
        return None


def _run_one(index: int, values: dict | None = None, retire=None, held=None, *, task=None,
             runnable=None, awaiting=None, succeeded=None) -> list | None:  # fmt: skip
    """Run one task; ``[index, outcome, result, finished_at]``, a result only if deferred.

    ``retire(reason)`` is called when this child should run no other task after it. Given a
    list ``held``, a success that a receiver waits for is added to it, ``(index, task,
    outcome)``, for the caller to record with others (``finishing.record_held``): None then.
    Given a dict ``awaiting`` too, a success that only the task's own hook waits for (Django
    Tasks' ``task_finished``) is reported ``notify``, for the supervisor to record, and kept
    there by task id until its notice (``_BatchRunner.notified``). Given a list ``succeeded``,
    a deferred success logs its line at DEBUG and is added to it, ``(name, id, duration)``, for
    the caller's line (``_log_successes``).
    """
    if task is None:
        assert values is not None, "a task or its row"
        task = task_from_values(values)
    outcome = executor.run(
        task, defer_success=True, hold_success=held is not None,
        notify_success=awaiting is not None, runnable=runnable, batch_line=succeeded is not None,
    )  # fmt: skip
    return _entry(index, task, outcome, retire, held, awaiting, succeeded)


def _entry(index: int, task, outcome, retire=None, held=None, awaiting=None,
           succeeded=None) -> list | None:  # fmt: skip
    """What the supervisor is told of ``outcome`` (see ``_run_one``)."""
    if outcome.unsettled and retire is not None:
        retire(outcome.unsettled)
    if outcome.held and held is not None:
        held.append((index, task, outcome))
        return None
    if outcome.deferred and succeeded is not None:
        succeeded.append((task.name, task.pk, outcome.duration))
    if outcome.notify and awaiting is not None:
        awaiting[str(task.pk)] = (task, outcome)
        return [index, NOTIFY, outcome.result, time.time()]
    if outcome.deferred:
        # The supervisor records it, with the successes of other children, in one statement.
        return [index, "deferred", outcome.result, time.time()]
    return [index, outcome.kind, None, None]
