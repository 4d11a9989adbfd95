"""The only writer of ``Task.status`` (the claim itself is in ``jobs.worker.claiming``; the SQL
text of both is in ``jobs.sql``).

Each transition is one conditional UPDATE from the source statuses that ``jobs.states`` allows,
and reports whether it applied: a change asked from the wrong status is refused, logged, and
leaves the row as it was. Transitions of a task a worker is running are also guarded by the
attempt number and worker id it was claimed with, so a worker whose task was rescued and handed
to another can never record an outcome over the newer attempt.

``base`` holds the guarded UPDATE and the settling of what waits for a finished task; the
transitions are grouped by who asks for them: ``attempts`` (a worker's outcomes), ``actions``
(operators and owners), ``maintenance`` (expiry, rescue) and ``workflows``. Callers use this
package's names.
"""

from jobs.transitions.actions import (
    CancelCounts,
    CancelOutcome,
    cancel,
    cancel_many,
    requeue,
    requeue_many,
    run_now_many,
)
from jobs.transitions.attempts import (
    Success,
    cancel_running,
    fail,
    release,
    release_many,
    retry_later,
    snooze,
    succeed,
    succeed_many,
)
from jobs.transitions.maintenance import (
    EXPIRED_MESSAGE,
    expire_waiting,
    is_expired,
    rescue_dead,
    rescue_expired,
)
from jobs.transitions.workflows import (
    cancel_blocked,
    cancel_workflow_record,
    finish_workflow,
    lock_workflow,
    rearm_many,
    reopen_workflows,
    unblock_many,
)

__all__ = [
    "EXPIRED_MESSAGE",
    "CancelCounts",
    "CancelOutcome",
    "Success",
    "cancel",
    "cancel_blocked",
    "cancel_many",
    "cancel_running",
    "cancel_workflow_record",
    "expire_waiting",
    "fail",
    "finish_workflow",
    "is_expired",
    "lock_workflow",
    "rearm_many",
    "release",
    "release_many",
    "reopen_workflows",
    "requeue",
    "requeue_many",
    "rescue_dead",
    "rescue_expired",
    "retry_later",
    "run_now_many",
    "snooze",
    "succeed",
    "succeed_many",
    "unblock_many",
]
