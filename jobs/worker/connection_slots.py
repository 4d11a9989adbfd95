"""``JOBS_CHILD_CONNECTIONS``: at most N children of a worker hold database connections at once.

Each child opens its own connection the first time it touches the database and, by default,
keeps it: a worker of ``--concurrency 16`` holds 16 child connections, and a fleet of 16 such
workers 256, whether its tasks use the database or not. With the cap, the children share N
*slots*: byte ranges of one file the supervisor opens before the first fork (inherited by every
child), each held by a child with ``fcntl.lockf`` while it is connected. A child takes a slot
before Django opens its first connection (``BaseDatabaseWrapper.connect`` is wrapped in the
child), waiting while all N are taken, and closes its connections and gives its slot back when
its batch is done (``release``), so the next child can have it. (The connections of other
threads of the child, such as those Django's ``sync_to_async`` opens for async tasks, are
Django's to close: the slot counts the child, not each of its threads.)

POSIX record locks belong to a process, not to a descriptor: children sharing the file's
descriptor still exclude each other, and the kernel drops a dead child's lock with it, so a
child killed mid-task (a timeout, SIGKILL) never leaves its slot taken.
"""

import fcntl
import logging
import os
import tempfile
import threading
import time

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from jobs.conf import jobs_settings

logger = logging.getLogger(__name__)

WAIT_STEP_SECONDS = 0.005  # between two looks for a free slot, while all are taken

_file: int | None = None  # the supervisor's slot file (a descriptor), inherited by its children
_slots = 0  # how many slots it has; 0: no cap
_held: int | None = None  # in a child: the slot it holds now, if any
_original_connect = BaseDatabaseWrapper.connect
_taking = threading.Lock()  # two threads of a child connecting at once take one slot, not two


def cap(concurrency: int) -> int:
    """The slots a worker of ``concurrency`` children uses; 0 when no cap applies."""
    configured = jobs_settings.CHILD_CONNECTIONS
    if configured is None or configured >= concurrency:
        return 0
    return int(configured)


def prepare(concurrency: int):
    """In the supervisor, before the first fork: open the slot file if a cap applies."""
    global _file, _slots
    _slots = cap(concurrency)
    if _slots and _file is None:
        handle, path = tempfile.mkstemp(prefix="jobs-connection-slots-")
        os.unlink(path)  # the descriptor is all the children need
        os.ftruncate(handle, _slots)
        _file = handle


def install_in_child():
    """In a child: take a slot before Django connects, where the worker caps connections."""
    if _slots:
        BaseDatabaseWrapper.connect = _connect_in_slot  # type: ignore[method-assign]


def release():
    """In a child whose batch is done: close its connections and give its slot back."""
    global _held
    if _held is None:
        return
    connections.close_all()
    assert _file is not None
    fcntl.lockf(_file, fcntl.LOCK_UN, 1, _held)
    _held = None


def forget_in_fork():
    """In a process a task forks: its parent's slot lock did not come with it (record locks
    are not inherited); it takes a slot of its own if it connects. The lock is made anew: a
    thread of the parent's may have held it at the fork."""
    global _held, _taking
    _held, _taking = None, threading.Lock()


def _connect_in_slot(self):
    _take_slot()
    return _original_connect(self)


def _take_slot():
    with _taking:
        _take_slot_once()


def _take_slot_once():
    global _held
    if _held is not None:
        return  # one slot per child, however many connections (aliases, threads) it opens
    assert _file is not None
    waited_since = None
    while True:
        for slot in range(_slots):
            try:
                fcntl.lockf(_file, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, slot)
            except OSError:
                continue
            _held = slot
            if waited_since is not None:
                logger.debug(
                    "connection slot after wait slot=%d waited=%.3fs",
                    slot,
                    time.monotonic() - waited_since,
                )
            return
        waited_since = waited_since or time.monotonic()
        time.sleep(WAIT_STEP_SECONDS)
