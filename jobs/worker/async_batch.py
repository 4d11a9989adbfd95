"""A child's async tasks: several at once on its event loop, each under its own timeout.

``jobs.worker.batches._BatchRunner`` runs a batch's tasks one after another; a run of consecutive
async tasks in it comes here, and runs together on one loop (the child's, kept from batch to
batch), at most ``JOBS_ASYNC_CONCURRENCY`` at a time. Each runs through
``jobs.execution.aio.run_async``: its timeout enforced on the loop (its coroutine cancelled,
recorded as the supervisor records a timeout), its outcome recorded as a task run alone.

The supervisor learns from the child's slot (``jobs.worker.wire.Slot``) which tasks may be
running (the indices ``first`` to ``upto``) and the one whose deadline comes first: if the loop
is blocked (a task doing synchronous work) past that deadline and a grace
(``ASYNC_TIMEOUT_GRACE``), it kills the child, recording that task as timed out and the others
running beside it as lost (retried under their policy). A task whose owner asked to cancel it
is cancelled on the loop when the supervisor says so (``cancel``), recorded ``cancelled``; the
others go on.
"""

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from jobs.conf import jobs_settings
from jobs.db import outside_event_loop
from jobs.execution import aio, executor
from jobs.execution.runnable import Runnable
from jobs.models import Task

# Seconds the supervisor waits past an async task's deadline before it kills the child: the
# loop cancels the task at its deadline, and the coroutine may take a moment to unwind.
ASYNC_TIMEOUT_GRACE = 1.0


class _Running:
    __slots__ = ("cancellation", "deadline", "future", "index", "started")

    def __init__(self, index: int, started: float, timeout: float, future):
        self.index, self.started, self.deadline = index, started, started + timeout
        self.cancellation = aio.Cancellation()
        self.future = future


class AsyncRun:
    """Runs one run of consecutive async tasks of a batch together (see the module)."""

    def __init__(self, runner, number: int, batch_started: float, budget: float,
                 entry: Callable[[int, Task, Any], list | None]):  # fmt: skip
        """``runner``: the child's ``_BatchRunner`` (its slot, results, reports, limits);
        ``entry(index, task, outcome)``: what to report of a task's outcome (None: nothing)."""
        self.runner, self.number = runner, number
        self.batch_started, self.budget = batch_started, budget
        self.entry = entry
        self.limit = jobs_settings.ASYNC_CONCURRENCY
        self.running: dict[asyncio.Future, _Running] = {}
        self.by_index: dict[int, _Running] = {}
        self.upto = 0
        self.cpu_mark = time.process_time()

    def run(self, loop: asyncio.AbstractEventLoop, group: list[tuple[int, Task, Runnable]]):
        """Run ``group`` (index in the batch, task, runnable); return the indices not started."""
        conn = self.runner.conn
        loop.add_reader(conn.fileno(), self._read_message)
        try:
            return loop.run_until_complete(self._run(group))
        finally:
            loop.remove_reader(conn.fileno())

    async def _run(self, group) -> list[int]:
        pending = deque(group)
        returned: list[int] = []
        runner = self.runner
        while pending or self.running:
            now = time.monotonic()
            while pending and len(self.running) < self.limit:
                index = pending[0][0]
                if index and (now - self.batch_started > self.budget or runner.slot.stop_asked
                              or runner.recycle):  # fmt: skip
                    returned = [index for index, _, _ in pending]
                    pending.clear()
                    break
                index, task, runnable = pending.popleft()
                self._start(index, task, runnable, now)
            if not self.running:
                break
            self._mark()
            done, _ = await asyncio.wait(
                list(self.running), timeout=runner.REPORT_INTERVAL,
                return_when=asyncio.FIRST_COMPLETED,
            )  # fmt: skip
            self._collect(done)
            if self.running or pending:
                # Not the last outcomes: the supervisor takes a batch with none left to report
                # as done, and sends the next one.
                self._report_if_due()
        return returned

    def _start(self, index: int, task: Task, runnable: Runnable, now: float):
        timeout = runnable.timeout or jobs_settings.DEFAULT_TIMEOUT
        self.upto = max(self.upto, index + 1)
        running = _Running(index, now, timeout, None)
        running.future = asyncio.ensure_future(self._one(index, task, runnable, running))
        self.running[running.future] = self.by_index[index] = running

    async def _one(self, index, task, runnable, running: _Running):
        try:
            outcome = await aio.run_async(
                task, runnable, timeout=running.deadline - running.started,
                cancellation=running.cancellation, defer_success=True, hold_success=True,
                notify_success=True, batch_line=self.runner.batch_line,
            )  # fmt: skip
        except asyncio.CancelledError:
            if not running.cancellation.requested:
                raise
            # Cancelled before its code started: recorded as if it had stopped at once.
            with outside_event_loop():
                outcome = executor.end(task, runnable, executor.Outcome(executor.CANCELLED),
                                       defer_success=True, hold_success=True)  # fmt: skip
        return self.entry(index, task, outcome)

    def _mark(self):
        """Tell the supervisor what runs: the task due first, and the range of those running."""
        first = min(running.index for running in self.running.values())
        due = min(self.running.values(), key=lambda running: running.deadline)
        self.runner.slot.start(self.number, due.index, due.started, first=first, upto=self.upto)

    def _collect(self, done):
        failure = None
        for future in done:
            running = self.running.pop(future)
            del self.by_index[running.index]
            try:
                entry = future.result()
            except BaseException as exc:  # recording failed: not the task's doing
                failure = failure or exc
                continue
            if entry is not None:
                self.runner.results.append(entry)
            self.runner.count_done()
        if failure is not None:
            # Report what finished, then exit (``jobs.worker.child._child_main``): the
            # supervisor records the tasks still running as lost.
            with contextlib.suppress(Exception):
                self._report_if_due(force=True)
            raise failure

    def _report_if_due(self, *, force=False):
        runner = self.runner
        if not (runner.results or runner.held):
            return
        now = time.monotonic()
        if force or now - runner.reported > runner.REPORT_INTERVAL:
            cpu = time.process_time()
            # The loop's time, not the tasks' waits: the supervisor sizes batches by it.
            runner.busy += cpu - self.cpu_mark
            self.cpu_mark = cpu
            with outside_event_loop():
                runner.report(self.number, now)

    def _read_message(self):
        """A message from the supervisor while the loop runs: tasks to cancel."""
        try:
            message = json.loads(self.runner.conn.recv_bytes())
        except (EOFError, OSError):  # the supervisor is gone: the tasks running finish
            asyncio.get_running_loop().remove_reader(self.runner.conn.fileno())
            return
        for index in message.get("cancel", ()):
            running = self.by_index.get(index)
            if running is not None and not running.cancellation.requested:
                running.cancellation.requested = True
                running.future.cancel()
