"""Housekeeping that every worker runs now and then, and that can be called directly.

Each duty is safe to run from many workers at once: each is set-based and guarded by conditions
in its own UPDATE, so two workers doing the same duty do it once.
"""

import logging

from django.utils import timezone

from jobs import transitions

logger = logging.getLogger(__name__)


def run(*, now=None) -> dict:
    """Run every maintenance duty once; return what each did, by name."""
    now = now or timezone.now()
    done = {"rescued": transitions.rescue_expired(now=now)}
    if any(done.values()):
        logger.info("maintenance %s", " ".join(f"{k}={v}" for k, v in done.items()))
    return done
