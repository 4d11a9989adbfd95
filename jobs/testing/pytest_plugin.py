"""pytest fixtures for tests of projects using jobs; pytest loads them on its own (``pytest11``).

- ``jobs_worker``: database access (pytest-django's ``db``) and an inline worker whose ``drain``
  runs the due tasks, as ``jobs.testing.drain`` does.
- ``jobs_immediate``: every task enqueued during the test runs at once (``immediately``).

Nothing here imports Django at load time: pytest loads this module before Django is set up.
"""

import pytest


class InlineWorker:
    """A worker that runs tasks in the test's process, when the test says so."""

    def drain(self, queues=None, **options):
        """Run the due tasks; see ``jobs.testing.drain``."""
        from jobs.testing import drain  # the app registry: loaded before Django is set up

        return drain(queues, **options)

    def immediately(self):
        """A context manager running each task when it is enqueued; see ``immediately``."""
        from jobs.testing import immediately  # the app registry, as above

        return immediately()


@pytest.fixture
def jobs_worker(db) -> InlineWorker:
    """An inline worker: ``jobs_worker.drain()`` runs the tasks due (needs pytest-django)."""
    return InlineWorker()


@pytest.fixture
def jobs_immediate(db):
    """Every task enqueued during the test runs at once, before ``enqueue`` returns."""
    from jobs.testing import immediately  # the app registry, as above

    with immediately():
        yield
