"""System checks of the settings that shape a fleet of workers on one database: the maintenance
leader's lease (``jobs.worker.maintenance_runner``), the cap on children's connections
(``jobs.worker.connection_slots``) and the session proof of life (``jobs.worker.session``).
Registered by ``jobs.apps`` with the ``"jobs"`` tag, like every check in ``jobs.checks``."""

from django.core import checks

from jobs import limits
from jobs.checks import TAG
from jobs.conf import jobs_settings


@checks.register(TAG)
def check_leader_lease(app_configs, **kwargs):
    """A lease shorter than two maintenance intervals would lapse between a leader's renewals
    (a round late by a moment), and leadership would move from worker to worker at random."""
    value = jobs_settings.LEADER_LEASE_SECONDS
    if value is None:
        return []
    interval = jobs_settings.MAINTENANCE_INTERVAL
    least = 2 * interval if limits.is_seconds(interval) else 0
    if not limits.is_seconds(value) or value < least:
        return [
            checks.Error(
                f"JOBS_LEADER_LEASE_SECONDS must be None or a finite number of seconds from "
                f"{least:g} (two JOBS_MAINTENANCE_INTERVAL) to {limits.MAX_SECONDS:,}, "
                f"got {value!r}.",
                id="jobs.E024",
            )
        ]
    return []


@checks.register(TAG)
def check_child_connections(app_configs, **kwargs):
    value = jobs_settings.CHILD_CONNECTIONS
    if value is None:
        return []
    most = limits.max_concurrency()
    whole = isinstance(value, int) and not isinstance(value, bool)
    if not whole or not 1 <= value <= most:
        return [
            checks.Error(
                f"JOBS_CHILD_CONNECTIONS must be None or a whole number from 1 to {most:,} "
                f"(JOBS_MAX_CONCURRENCY), got {value!r}.",
                id="jobs.E025",
            )
        ]
    return []


@checks.register(TAG)
def check_session_rescue(app_configs, **kwargs):
    """JOBS_SESSION_RESCUE is None, True or False: a string such as "off" would read as on."""
    value = jobs_settings.SESSION_RESCUE
    if value is None or isinstance(value, bool):
        return []
    return [
        checks.Error(
            f"JOBS_SESSION_RESCUE must be None (on where the database allows it), True or "
            f"False, got {value!r}.",
            id="jobs.E026",
        )
    ]
