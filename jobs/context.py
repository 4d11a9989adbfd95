"""What a running task can reach: its record, progress reports, and cancellation checkpoints."""

import time

from django.utils import timezone

from jobs.exceptions import TaskCancelled
from jobs.models import Task


class TaskContext:
    """Passed as the first argument to tasks declared with ``takes_context=True``."""

    # Progress writes closer together than this are coalesced (the last one always lands).
    min_write_interval = 0.25

    def __init__(self, task: Task):
        self.task = task
        self._last_write = 0.0

    @property
    def attempt(self) -> int:
        return self.task.attempts

    def progress(self, current: int, total: int | None = None, message: str = "", *, force=False):
        """Report progress ("Imported 600 of 1,000 rows"); also a cancellation checkpoint."""
        task = self.task
        task.progress_current = max(0, int(current))
        task.progress_total = None if total is None else max(0, int(total))
        task.progress_message = message[:255]
        now = time.monotonic()
        done = total is not None and current >= total
        if not (force or done) and now - self._last_write < self.min_write_interval:
            return
        self._last_write = now
        Task.objects.filter(pk=task.pk, attempts=task.attempts).update(
            progress_current=task.progress_current,
            progress_total=task.progress_total,
            progress_message=task.progress_message,
            updated_at=timezone.now(),
        )
        self.check_cancelled()

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
