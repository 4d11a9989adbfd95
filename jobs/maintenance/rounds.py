"""Maintenance rounds: the housekeeping every worker runs now and then, callable directly too.

A round runs each duty once: the rescue of tasks whose lease lapsed (its owner is
``jobs.transitions.rescue_expired``), the cancellation of waiting tasks past their deadline
(``jobs.transitions.expire_waiting``), periodic enqueues (``jobs.maintenance.periodic``), the
rollups of finished tasks (``jobs.maintenance.rollups``), automatic pruning
(``jobs.maintenance.pruning``) and the deletion of rate windows long ended
(``pruning.prune_rate_windows``; one DELETE, which two workers may both run). Each duty is safe
to run from many workers at once: rescue updates row by row, each UPDATE guarded by the lease
the task expired with; expiry is one guarded UPDATE that two workers may both run (the second
finds nothing left); periodic enqueues carry an idempotency key the database keeps unique;
rollups move their mark by a conditional UPDATE in the transaction that writes the buckets;
rollups and automatic pruning run under leases that one worker at a time can hold.
"""

import logging

from django.utils import timezone

from jobs import transitions
from jobs.db import is_connection_fault
from jobs.maintenance import periodic, pruning, rollups

logger = logging.getLogger(__name__)


def run(*, now=None, worker_id=None) -> dict:
    """Run every maintenance duty once; return what each did, by name.

    ``worker_id`` names the holder of the pruning lease in the database (a random one if None).
    """
    now = now or timezone.now()
    done = {"rescued": transitions.rescue_expired(now=now)}
    done["expired"] = _isolated("expire", lambda: transitions.expire_waiting(now=now))
    done["scheduled"] = _isolated("periodic", lambda: len(periodic.run_due(now=now)))
    # Before pruning: a task is deleted only once the rollups have counted it.
    done["rolled"] = _isolated("rollup", lambda: rollups.run(worker_id, now=now))
    done["pruned"] = _isolated("prune", lambda: pruning.auto_prune(worker_id, now=now))
    done["windows"] = _isolated("windows", lambda: pruning.prune_rate_windows(now=now))
    if any(done.values()):
        logger.info(
            "maintenance done rescued=%d expired=%d scheduled=%d rolled=%d pruned=%d windows=%d",
            done["rescued"],
            done["expired"],
            done["scheduled"],
            done["rolled"],
            done["pruned"],
            done["windows"],
        )
    return done


def _isolated(duty, call) -> int:
    """Run one duty so that its bug (a bad schedule, say) does not stop the others.

    Database faults still propagate: the worker reconnects and runs the round again.
    """
    try:
        return call()
    except Exception as exc:
        if is_connection_fault(exc):
            raise
        logger.exception("maintenance duty failed duty=%s", duty)
        return 0
