"""The fleet's settings: the maintenance leader's lease (jobs.E024), the cap on children's
database connections (jobs.E025) and the session proof of life (jobs.E026)."""

import pytest

from jobs.fleet_checks import check_child_connections, check_leader_lease, check_session_rescue
from jobs.worker import connection_slots
from jobs.worker.maintenance_runner import leader_lease_seconds


def ids(check):
    return [error.id for error in check(None)]


@pytest.mark.parametrize("value", [None, 10, 20.5, 365 * 86400])
def test_sensible_leader_leases_pass(settings, value):
    settings.JOBS_MAINTENANCE_INTERVAL = 5.0
    settings.JOBS_LEADER_LEASE_SECONDS = value
    assert ids(check_leader_lease) == []


@pytest.mark.parametrize(
    "value", [0, -1, 9.9, "20", True, float("nan"), float("inf"), 365 * 86400 + 1, [20]]
)
def test_hostile_leader_leases_are_refused(settings, value):
    """Below two maintenance intervals the lease lapses between renewals (9.9 with 5 s)."""
    settings.JOBS_MAINTENANCE_INTERVAL = 5.0
    settings.JOBS_LEADER_LEASE_SECONDS = value
    assert ids(check_leader_lease) == ["jobs.E024"]


def test_the_default_lease_is_four_maintenance_intervals(settings):
    settings.JOBS_MAINTENANCE_INTERVAL = 2.5
    assert leader_lease_seconds() == 10.0
    settings.JOBS_LEADER_LEASE_SECONDS = 7
    assert leader_lease_seconds() == 7.0


@pytest.mark.parametrize("value", [None, 1, 4, 256])
def test_sensible_connection_caps_pass(settings, value):
    settings.JOBS_CHILD_CONNECTIONS = value
    assert ids(check_child_connections) == []


@pytest.mark.parametrize("value", [0, -3, 1.5, "2", True, 257, 10**9, float("nan")])
def test_hostile_connection_caps_are_refused(settings, value):
    settings.JOBS_CHILD_CONNECTIONS = value
    assert ids(check_child_connections) == ["jobs.E025"]


def test_a_cap_at_or_above_the_concurrency_changes_nothing(settings):
    settings.JOBS_CHILD_CONNECTIONS = 4
    assert connection_slots.cap(4) == 0
    assert connection_slots.cap(8) == 4
    settings.JOBS_CHILD_CONNECTIONS = None
    assert connection_slots.cap(8) == 0


@pytest.mark.parametrize("value", [None, True, False])
def test_sensible_session_rescue_values_pass(settings, value):
    settings.JOBS_SESSION_RESCUE = value
    assert ids(check_session_rescue) == []


@pytest.mark.parametrize("value", ["off", "False", 0, 1, "", [], {"on": True}])
def test_hostile_session_rescue_values_are_refused(settings, value):
    """A string "off" is truthy: refused rather than read as on."""
    settings.JOBS_SESSION_RESCUE = value
    assert ids(check_session_rescue) == ["jobs.E026"]
