"""A worker's claims, run in a thread of their own so that the worker's loop never waits on them
(on PostgreSQL; on SQLite they run inline, see ``Claimer.inline``).

A claim is a round trip to the database and a commit: milliseconds, during which children that
finish would otherwise wait for their next task. With the claim in this thread, the loop keeps
handing out tasks claimed earlier, and the claim's reply wakes the loop through its wake-up
pipe. One claim at a time; the thread has a database connection of its own.

Children are forked by the supervisor's main thread. Before a fork the thread's connection is
closed (``before_fork``): a forked child drops the other threads' state, and a connection object
freed in the child would tell the server to end the session the supervisor still uses.
"""

import os
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor

from django.db import connections, router

from jobs import sql
from jobs.db import forget_queries, retry_on_database_error
from jobs.models import Task
from jobs.worker import claiming


class Claimer:
    def __init__(self, worker_id: str, queues, lease_seconds: float, wakeup_fd: int):
        self.worker_id, self.queues, self.lease_seconds = worker_id, queues, lease_seconds
        self._wakeup_fd = wakeup_fd
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jobs-claim")
        self._future = None
        self._used = False  # the thread exists once a claim ran
        # SQLite has one writer at a time and no network to wait for: a claim in a thread of
        # its own would only contend for the lock with the loop's other writes (measured: the
        # drain 1,600 -> 1,300 tasks/s, and a second connection's cache). It runs inline there.
        self.inline = sql.dialect(router.db_for_write(Task)).ONE_WRITER
        self.recording = []  # successes the claim in flight records (jobs.transitions.Success)
        self.wanted = 0  # how many tasks the claim in flight asked for
        self.seconds = 0.0  # how long recent claims took (a moving average)

    @property
    def busy(self) -> bool:
        return self._future is not None

    def start(self, wanted: int, successes: list, on_fault=None, abandon=None):
        """Claim ``wanted`` tasks and record ``successes`` with them, in the thread."""
        assert self._future is None, "one claim at a time"
        self._used = True
        self.recording, self.wanted = successes, wanted

        def round_trip():
            forget_queries()  # the claim thread's own connection logs too (see jobs.db)
            started = time.monotonic()
            try:
                return retry_on_database_error(
                    lambda: claiming.claim_and_record(
                        self.worker_id, wanted, successes, queues=self.queues,
                        lease_seconds=self.lease_seconds,
                    )[0],
                    what="claim", model=Task, on_fault=on_fault, abandon=abandon,
                )  # fmt: skip
            finally:
                self.seconds = 0.8 * self.seconds + 0.2 * (time.monotonic() - started)

        if self.inline:
            self._future = Future()
            try:
                self._future.set_result(round_trip())
            except Exception as exc:
                self._future.set_exception(exc)
        else:
            self._future = self._executor.submit(round_trip)
        # Wake the loop once the outcome is set, not before: a loop woken by the function's own
        # last line would find the claim not done yet, and sleep a whole poll interval.
        self._future.add_done_callback(lambda _: os.write(self._wakeup_fd, b"\0"))

    def collect(self, *, wait: bool = False) -> list | None:
        """The tasks the claim took once it is done (None while it runs, or if none ran).

        Raises what the claim raised (a database fault that outlasted the retries); the
        successes it was recording (``recording``) are then not recorded.
        """
        if self._future is None or not (wait or self._future.done()):
            return None
        future, self._future = self._future, None
        claimed = future.result()
        self.recording = []
        return claimed

    def before_fork(self):
        """Let the claim in flight finish, and close the thread's connection (see above)."""
        if not self._used or self.inline:
            return
        if self._future is not None:
            self._future.exception()  # wait; the loop collects the outcome
        self._executor.submit(connections.close_all).result()

    def close(self):
        if self._used and not self.inline:
            self._executor.submit(connections.close_all).result()
        self._executor.shutdown(wait=True)


def fork_quietly(fork):
    """Call ``fork()``; Python 3.12+ warns about forking with a thread alive, here needlessly.

    The claim thread is then idle (``before_fork``), holds no lock the child could need, and
    its connection is closed; the child never touches it.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
        return fork()
