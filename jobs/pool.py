"""The supervisor's pool of child processes: spawning, dispatching, replies, losses, limits.

A mixin of ``jobs.worker.Worker``, kept apart so that each module stays readable: this half
knows the children (which task each runs, since when, until when), the worker half knows the
database duties and the lifecycle. Only ``Worker`` uses it.
"""

import json
import logging
import os
import time
from datetime import UTC, datetime
from multiprocessing.connection import wait

from jobs import executor, transitions
from jobs.child import Child, start_child
from jobs.conf import jobs_settings
from jobs.db import retry_on_database_error
from jobs.models import Task
from jobs.states import Status

logger = logging.getLogger("jobs.worker")  # the same logger name as before the split


class ChildPool:
    """Bookkeeping of ``self.children``; expects the attributes ``Worker.__init__`` sets."""

    def _spawn(self) -> Child:
        inherited = [self._wakeup_read, self._wakeup_write]
        inherited += [child.conn.fileno() for child in self.children if not child.conn.closed]
        listen_fd = self.listener.fileno() if self.listener.connected else None
        if listen_fd is not None:
            inherited.append(listen_fd)
        return start_child(
            max_tasks=self.max_tasks_per_child,
            max_memory=self.max_memory_bytes,
            close_fds=inherited,
        )

    def _replace(self, child: Child):
        self.children[self.children.index(child)] = self._spawn()

    def _busy(self) -> int:
        return sum(child.busy for child in self.children)

    def _idle(self) -> list[Child]:
        return [child for child in self.children if not child.busy]

    def _dispatch(self, task: Task):
        idle = self._idle()
        if not idle:  # never expected: the claim asks for no more than the idle children
            logger.error("claimed more than idle children, handing back task_id=%s", task.pk)
            retry_on_database_error(lambda: transitions.release(task), what="release", model=Task)
            return
        child = idle[0]
        try:
            timeout = executor.resolve(task).timeout or jobs_settings.DEFAULT_TIMEOUT
        except Exception:
            timeout = jobs_settings.DEFAULT_TIMEOUT  # the child records why it cannot run
        child.task = task
        child.started = time.monotonic()
        child.deadline = child.started + timeout
        child.send(task)

    def _wait(self, timeout: float):
        sources = [self._wakeup_read]
        listen_fd = self.listener.fileno()
        if listen_fd is not None:
            sources.append(listen_fd)
        for child in self.children:
            sources.extend([child.conn, child.process.sentinel])
        ready = wait(sources, timeout)
        if self._wakeup_read in ready:
            os.read(self._wakeup_read, 64)
        if listen_fd is not None and listen_fd in ready:
            queues = self.listener.drain()
            logger.debug("woken queues=%s", ",".join(sorted(queues)))
        for child in list(self.children):
            if child.conn in ready:
                self._receive(child)
            elif child.process.sentinel in ready:
                self._lost(child)

    def _receive(self, child: Child):
        try:
            reply = child.conn.recv_bytes()
        except (EOFError, OSError):
            self._lost(child)
            return
        message = json.loads(reply)
        if "success" in message:
            task, success = child.task, message["success"]
            finished_at = datetime.fromtimestamp(success["finished_at"], UTC)
            self._successes.append(
                transitions.Success(
                    task.pk, task.attempts, task.worker_id, success["result"], finished_at
                )
            )
        child.task = None
        child.tasks_done += 1
        if message.get("recycle"):
            child.process.join(5)
            logger.info("child recycled pid=%s tasks=%d", child.pid, child.tasks_done)
            self._replace(child)

    def _lost(self, child: Child):
        """A child exited: record the failure of its task (if it had one) and replace it."""
        child.process.join(1)
        task, reason = child.task, child.killed_for or "crash"
        logger.warning(
            "child exited pid=%s exitcode=%s reason=%s task_id=%s",
            child.pid,
            child.process.exitcode,
            reason,
            task.pk if task else "-",
        )
        if task is not None:
            self._record_lost(task, self._lost_error(child, reason), child.started)
            child.task = None
        child.conn.close()
        if self._stop_requested:
            self.children.remove(child)  # no new children while shutting down
        else:
            self._replace(child)

    def _record_lost(self, task: Task, exc, started: float):
        def record():
            current = Task.objects.get(pk=task.pk)
            if (current.status, current.attempts, current.worker_id) != (
                Status.RUNNING,
                task.attempts,
                task.worker_id,
            ):
                return False  # the child recorded its outcome before it went
            if exc is None:
                return transitions.cancel_running(current)
            try:
                runnable = executor.resolve(current)
            except Exception:
                runnable = None
            outcome = executor.outcome_for_exception(current, exc, runnable)
            outcome.duration = time.monotonic() - started
            return executor.record(current, outcome)

        retry_on_database_error(record, what=f"record_lost task_id={task.pk}", model=Task)

    def _enforce_limits(self):
        """Kill children whose task overran its timeout or whose memory grew past the limit."""
        now = time.monotonic()
        for child in list(self.children):
            if not child.busy:
                continue
            if now >= child.deadline:
                logger.warning("task timed out id=%s name=%s", child.task.pk, child.task.name)
                self._kill_and_replace(child, "timeout")
            elif self.max_memory_bytes and (child.rss_bytes() or 0) > self.max_memory_bytes:
                logger.warning("task over memory limit id=%s pid=%s", child.task.pk, child.pid)
                self._kill_and_replace(child, "memory")

    def _kill_and_replace(self, child: Child, reason: str):
        child.kill(reason)
        self._lost(child)
