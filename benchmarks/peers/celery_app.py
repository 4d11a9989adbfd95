"""Celery's peer: Redis as broker and result backend (``PEERS_REDIS``), prefork children.

The first task each child runs writes when it started (``task_prerun``, once per process) to
``PEERS_FIRST_FILE``: Celery keeps no start time, and the drain runs from the first start to the
last ``date_done``, as the others do from their own timestamps.
"""

import os
import time

from celery import Celery
from celery.signals import task_prerun

from benchmarks.peers.stamps import write_stamp

app = Celery("peers", broker=os.environ["PEERS_REDIS"], backend=os.environ["PEERS_REDIS"])
app.conf.update(task_default_queue="bench", broker_connection_retry_on_startup=True)
_started = [False]


@task_prerun.connect
def _first_start(**kwargs):
    if not _started[0] and os.environ.get("PEERS_FIRST_FILE"):
        _started[0] = True
        with open(os.environ["PEERS_FIRST_FILE"], "a") as out:
            out.write(f"{time.time()!r}\n")


@app.task(name="noop")
def noop(n=0):
    return None


@app.task(name="stamp")
def stamp(n=0):
    write_stamp(n, time.time())
