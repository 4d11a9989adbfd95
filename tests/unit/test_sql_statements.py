"""jobs.sql alone: the dialect chosen by vendor, the same names per database, statements whose
placeholders match their parameters. Built on connections that never connect."""

import json
import uuid
from datetime import UTC, datetime

import pytest
from django.db.backends.postgresql.base import DatabaseWrapper as PostgreSQLWrapper
from django.db.backends.sqlite3.base import DatabaseWrapper as SQLiteWrapper

from jobs import sql, states
from jobs.sql import common, postgresql, sqlite

SETTINGS = {
    "NAME": "probe", "USER": "", "PASSWORD": "", "HOST": "", "PORT": "", "OPTIONS": {},
    "TIME_ZONE": None, "AUTOCOMMIT": True, "ATOMIC_REQUESTS": False, "CONN_MAX_AGE": 0,
    "CONN_HEALTH_CHECKS": False, "TEST": {},
}  # fmt: skip
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
# Every name each module of statements defines (see jobs.sql).
INTERFACE = (
    "NAME", "LISTENS", "ONE_WRITER", "CHECK_LIBRARY", "claim_sql", "claim_params",
    "claim_tasks", "is_busy", "succeed_attempts", "release_attempts", "inserts", "insert_many",
    "percentiles_sql", "LAST_EXCEPTION", "planner_rows", "listen_sql",
)  # fmt: skip


@pytest.fixture(params=[postgresql, sqlite], ids=["postgresql", "sqlite"])
def dialect_and_connection(request):
    wrapper = PostgreSQLWrapper if request.param is postgresql else SQLiteWrapper
    return request.param, wrapper(SETTINGS, alias="probe")


class Unknown:
    vendor = "mysql"


def test_dialect_is_chosen_by_the_connections_vendor(dialect_and_connection):
    module, connection = dialect_and_connection
    assert sql.dialect(connection) is module
    assert connection.vendor == module.NAME


def test_a_database_without_statements_is_named_in_the_error():
    with pytest.raises(NotImplementedError, match=r"'mysql'.*postgresql, sqlite"):
        sql.dialect(Unknown())


@pytest.mark.parametrize("module", [postgresql, sqlite], ids=["postgresql", "sqlite"])
def test_every_database_module_defines_the_same_names(module):
    missing = [name for name in INTERFACE if not hasattr(module, name)]
    assert missing == []


@pytest.mark.parametrize("queues", [[], ["a"], ["a", "b", "c"]])
def test_the_claim_takes_as_many_parameters_as_it_has_placeholders(dialect_and_connection, queues):
    module, connection = dialect_and_connection
    claim = module.claim_sql(connection, len(queues))
    params = module.claim_params(
        connection, now=NOW, queues=queues, limit=5, worker_id="w", lease_expires_at=NOW
    )
    # "%%s" is a literal "%s" (strftime's), not a placeholder.
    assert claim.replace("%%", "").count("%s") == len(params)
    assert ("queue = %s" in claim) == (len(queues) == 1)
    assert ("queue IN (%s, %s, %s)" in claim) == (len(queues) == 3)


def test_on_postgresql_the_pick_is_a_materialized_cte_that_skips_locked_rows():
    connection = PostgreSQLWrapper(SETTINGS, alias="probe")
    claim = postgresql.claim_sql(connection, 1)
    assert "picked AS MATERIALIZED (" in claim
    assert "FOR UPDATE SKIP LOCKED" in claim
    assert "ORDER BY priority DESC, run_after" in claim.split("claimed AS")[-1]


@pytest.mark.parametrize(
    ("statement", "options"),
    [("succeed_attempts", {}), ("succeed_attempts", {"unwaited": True}), ("release_attempts", {})],
)
def test_outcomes_travel_as_one_json_parameter_and_one_text(
    dialect_and_connection, statement, options
):
    module, connection = dialect_and_connection
    task_id = uuid.uuid4()
    row = (task_id, 2, "w")
    succeeds = statement.startswith("succeed")
    if succeeds:
        row += ({"answer": 42}, NOW)
    transition = states.SUCCEED if succeeds else states.RELEASE
    build = getattr(module, statement)
    one, params = build(connection, transition, [row], now=NOW, **options)
    many, _ = build(connection, transition, [row] * 50, now=NOW, **options)
    assert one == many  # one statement text whatever the number of rows
    assert one.count("%s") == len(params)
    assert params[1] == transition.target
    (values,) = json.loads(params[0])
    assert values[1:3] == [2, "w"]
    assert uuid.UUID(values[0]) == task_id
    assert "RETURNING" in one
    for status in transition.sources:
        assert f"'{status}'" in one


def test_a_success_recorded_alone_leaves_the_tasks_something_waits_for(dialect_and_connection):
    module, connection = dialect_and_connection
    row = (uuid.uuid4(), 1, "w", None, NOW)
    alone, _ = module.succeed_attempts(connection, states.SUCCEED, [row], now=NOW, unwaited=True)
    waited, _ = module.succeed_attempts(connection, states.SUCCEED, [row], now=NOW)
    assert ".workflow_id IS NULL AND NOT" in alone
    assert ".has_dependents" in alone
    assert "workflow_id IS NULL" not in waited


def test_only_sqlite_waits_out_a_busy_database():
    locked = Exception("database is locked")
    assert sqlite.is_busy(locked)
    assert not postgresql.is_busy(locked)


def test_the_skip_scan_reads_the_column_asked_for(dialect_and_connection):
    _, connection = dialect_and_connection
    text = common.distinct_values(connection, "queue")
    assert text.count('"queue"') == 5
    assert "%s" not in text


def test_percentiles_are_computed_by_postgresql_and_interpolated_elsewhere():
    assert "percentile_cont(0.95)" in postgresql.percentiles_sql("SELECT 1", "a", "b")
    assert sqlite.percentiles_sql("SELECT 1", "a", "b") is None
