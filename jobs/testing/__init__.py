"""Testing without a worker: run due tasks inline, run tasks at enqueue, assert what was enqueued.

The public API, importable from ``jobs.testing`` once Django is set up::

    from jobs.testing import assert_enqueued, drain, immediately

See docs/howto/testing.md. The pytest fixtures (``jobs_worker``, ``jobs_immediate``) are in
``jobs.testing.pytest_plugin``, which pytest loads on its own where jobs is installed (the
``pytest11`` entry point); that is why this module imports nothing until a name is asked for.
"""

import importlib

_LAZY = {
    "drain": "jobs.testing.draining",
    "Drained": "jobs.testing.draining",
    "DrainError": "jobs.testing.draining",
    "immediately": "jobs.testing.draining",
    "enqueued": "jobs.testing.assertions",
    "assert_enqueued": "jobs.testing.assertions",
    "assert_not_enqueued": "jobs.testing.assertions",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'jobs.testing' has no attribute {name!r}")
