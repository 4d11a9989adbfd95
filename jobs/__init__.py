"""jobs: a reliable background worker on the database a Django project already has.

The public API, importable from ``jobs`` once Django is set up::

    from jobs import PermanentError, TransientError, enqueue, task
"""

import importlib

__version__ = "0.1.0"

_LAZY = {
    "task": "jobs.tasks.registry",
    "enqueue": "jobs.tasks.enqueueing",
    "enqueue_many": "jobs.tasks.enqueueing",
    "JobsTask": "jobs.tasks.definition",
    "get_task": "jobs.tasks.registry",
    "Backoff": "jobs.tasks.retry",
    "TaskContext": "jobs.execution.context",
    "Status": "jobs.states",
    "JobsError": "jobs.exceptions",
    "PermanentError": "jobs.exceptions",
    "TransientError": "jobs.exceptions",
    "PayloadError": "jobs.exceptions",
    "UnknownTaskError": "jobs.exceptions",
    "TaskCancelled": "jobs.exceptions",
    "Snooze": "jobs.exceptions",
    "chain": "jobs.workflows",
    "batch": "jobs.workflows",
    "cancel_workflow": "jobs.workflows",
    "retry_workflow": "jobs.workflows",
    "workflow_progress": "jobs.workflows",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    # Lazy, so that "import jobs" in settings or apps.py never imports models too early.
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'jobs' has no attribute {name!r}")
