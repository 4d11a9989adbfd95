"""Guards of the shortcuts into Django's internals: each fails if a Django release moves the ground.

Verdicts and figures: docs/performance.md, "Shortcuts into Django's internals"; the benchmark is
benchmarks/django_shortcuts.py.
"""

import datetime
import inspect
import io
import json
import logging

import pytest
from django.db import connection
from django.db.models import Count
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.models import Task
from jobs.sql.common import default_literal, unique_held_condition
from jobs.tasks import inserting
from jobs.worker import warmup
from jobs.worker.wire import task_from_values
from tests.factories import TaskFactory, UserFactory
from tests.helpers import claim_for_dispatch
from tests.testapp import tasks

pytestmark = pytest.mark.django_db

HOSTILE_TEXT = [
    "",
    "it's",
    "''; DROP TABLE jobs_task; --",
    'back\\slash \\\' and "double"',
    "100% %s %(name)s %% %",
    "line\nbreak\ttab\r",
    "é ü ß 漢字 🙂 \u202e",
    "E'\\x41' $$dollar$$ $tag$x$tag$",
]


def _claimed_row():
    TaskFactory(
        payload={"args": [1.5, "é", None], "kwargs": {"nested": {"a": [1, 2]}}},
        summary="Import of contacts.csv",
        owner=UserFactory(),
        steps={"parse": {"done": True}},
        progress_total=10,
        idempotency_key="key-1",
        result={"rows": 3},
    )
    (claimed,) = claim_for_dispatch("w", 1, lease_seconds=30)
    return claimed, json.loads(claimed.row)


def _built_by_django(values):
    """What ``task_from_values`` returns when a post_init receiver waits: ``Task.from_db``'s."""

    def receiver(**kwargs):
        pass

    post_init.connect(receiver, sender=Task, weak=False, dispatch_uid="shortcut-guard")
    try:
        return task_from_values(values)
    finally:
        post_init.disconnect(sender=Task, dispatch_uid="shortcut-guard")


def test_a_task_built_the_short_way_is_the_instance_django_builds():
    """Task.__new__ + ModelState (wire.py): the same __dict__ and _state as Model.from_db's."""
    claimed, values = _claimed_row()
    assert not post_init.has_listeners(Task)  # else the short way is not taken
    short = task_from_values(values)
    plain = _built_by_django(values)
    fetched = Task.objects.get(pk=claimed.id)
    assert type(short) is Task
    # ModelState makes some attributes on first read (fields_cache; fetch_mode since Django
    # 6.1, which a query sets and from_db leaves to its default): read each, so that absent and
    # default compare equal, and anything Django sets otherwise still shows.
    lazy = [
        name
        for name, value in vars(ModelState).items()
        if not name.startswith("__")
        and not inspect.isfunction(value)
        and hasattr(type(value), "__get__")
    ]
    assert "fields_cache" in lazy
    for task in (short, plain, fetched):
        for name in lazy:
            getattr(task._state, name)
        assert task._state.fields_cache == {}
    without_state = [
        {key: value for key, value in vars(task).items() if key != "_state"}
        for task in (short, plain, fetched)
    ]
    assert without_state[0] == without_state[1] == without_state[2]
    assert vars(short._state) == vars(plain._state) == vars(fetched._state)
    assert (short._state.db, short._state.adding) == ("default", False)
    assert short.get_deferred_fields() == set()


def test_a_task_built_the_short_way_refreshes_saves_and_follows_relations():
    claimed, values = _claimed_row()
    short = task_from_values(values)
    assert short.owner == Task.objects.get(pk=claimed.id).owner
    short.progress_message = "half"
    short.save(update_fields=["progress_message"])  # an UPDATE of the row, not an INSERT
    assert Task.objects.get(pk=claimed.id).progress_message == "half"
    Task.objects.filter(pk=claimed.id).update(progress_current=7)
    short.refresh_from_db()
    assert short.progress_current == 7
    assert Task.objects.count() == 1


def _select_literal(literal):
    # Executed with parameters, as enqueue's INSERT is: a bare % would be a placeholder.
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {literal}, %s", [1])
        return cursor.fetchone()[0]


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_quote_value_round_trips_hostile_text_through_the_database(text):
    """The schema editor's quote_value (inserting.py): the literal reads back as the value."""
    field = Task._meta.get_field("last_error")
    literal = default_literal(field, text, connection)
    assert _select_literal(literal) == text


@pytest.mark.parametrize(
    "value",
    [{}, [], {"it's": ["%s", "\\", '"', None, 1.5, True]}, [{"é🙂": "$$"}], None],
)
def test_quote_value_round_trips_json_through_the_database(value):
    field = Task._meta.get_field("error_details")
    literal = default_literal(field, value, connection)
    fetched = _select_literal(literal)
    assert (json.loads(fetched) if isinstance(fetched, str) else fetched) == value


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("attempts", 0),
        ("progress_total", None),
        ("result_public", False),
        ("lease_expires_at", None),
    ],
)
def test_quote_value_round_trips_numbers_booleans_and_null(name, value):
    field = Task._meta.get_field(name)
    fetched = _select_literal(default_literal(field, value, connection))
    assert fetched == value or (fetched == 0 and value is False)


def test_every_default_written_as_a_literal_reads_back_as_the_model_default():
    """Through the public enqueue and enqueue_many: every column enqueue leaves to its default."""
    one = tasks.add.enqueue(1, 2).record
    many = tasks.add.enqueue_many([((3, 4), {})])
    expected = Task(name=tasks.add.module_path, run_after=timezone.now())
    for pk in [one.pk, *many]:  # enqueue_many returns the ids
        stored = Task.objects.get(pk=pk)
        for field in Task._meta.concrete_fields:
            if field.name not in inserting.SET_BY_ENQUEUE:
                assert getattr(stored, field.attname) == getattr(expected, field.attname), (
                    field.name
                )
    assert isinstance(stored.run_after, datetime.datetime)


class _Recording(logging.StreamHandler):
    """A handler that keeps what it formats; its stream shows what it emits."""

    def __init__(self, level):
        super().__init__(io.StringIO())
        self.setLevel(level)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
        self.formatted = []

    def format(self, record):
        text = super().format(record)
        self.formatted.append((record, text))
        return text


@pytest.mark.django_db(transaction=True)
def test_the_warm_up_formats_for_the_handlers_a_log_line_reaches_and_emits_nothing(
    monkeypatch, caplog
):
    """Formatted before the fork (warmup.py): what those handlers write, and only them."""
    reached = _Recording(logging.INFO)
    too_high = _Recording(logging.ERROR)
    beyond = _Recording(logging.DEBUG)
    middle = logging.getLogger("jobs.execution")
    monkeypatch.setattr(middle, "handlers", [reached, too_high])
    monkeypatch.setattr(middle, "propagate", False)  # so "beyond", above it, is not reached
    monkeypatch.setattr(logging.getLogger("jobs"), "handlers", [beyond])
    caplog.set_level(logging.INFO, logger="jobs.execution.executor")  # whatever JOBS_LOG_LEVEL
    warmup.warm_children_path()
    assert [handler.stream.getvalue() for handler in (reached, too_high, beyond)] == ["", "", ""]
    assert reached.formatted
    assert (too_high.formatted, beyond.formatted) == ([], [])
    record, text = reached.formatted[-1]
    reached.handle(record)
    assert reached.stream.getvalue() == text + reached.terminator
    logging.getLogger("jobs.execution.executor").info("a line")  # the same handlers, emitting
    assert [bool(h.stream.getvalue()) for h in (reached, too_high, beyond)] == [True, False, False]


def test_the_task_enqueue_returns_is_the_instance_django_reads_back():
    """loaded_task (inserting.py), for enqueue's row: the __dict__ and _state of the row read
    back, every default a fresh object of its own; with a pre_init or post_init receiver,
    Model.from_db's way, so the receiver is called."""
    owner = UserFactory()
    made = [
        tasks.add.using(owner=owner, summary="Sum", idempotency_key="k").enqueue(1, 2).record,
        tasks.add.using(priority=3, delay=60).enqueue(3, 4).record,
    ]
    for task in made:
        fetched = Task.objects.get(pk=task.pk)
        for row in (task, fetched):
            row._state.fields_cache  # noqa: B018 (made on first read)
            # Django 6.1's fetch mode: a queryset stamps its own, a row built otherwise reads
            # the default on first use; the same mode either way.
            getattr(row._state, "fetch_mode", None)
        assert type(task) is Task
        assert task.created is True
        own = {"_state", "created", "replaced"}  # what enqueue adds, and the state
        assert {k: v for k, v in vars(task).items() if k not in own} == {
            k: v for k, v in vars(fetched).items() if k not in own
        }
        assert task.owner == fetched.owner
        lazy = {"fields_cache"}  # owner's cache: set where enqueue had the owner at hand
        assert {k: v for k, v in vars(task._state).items() if k not in lazy} == {
            k: v for k, v in vars(fetched._state).items() if k not in lazy
        }
        assert (task._state.db, task._state.adding) == ("default", False)
        assert task.get_deferred_fields() == set()
    assert made[0].error_details is not made[1].error_details  # fresh, not shared
    assert made[0].steps is not made[1].steps
    seen = []
    for signal in (pre_init, post_init):
        signal.connect(
            lambda **kwargs: seen.append(kwargs),
            sender=Task,
            weak=False,
            dispatch_uid="shortcut-guard",
        )
        try:
            tasks.add.enqueue(5, 6)
        finally:
            signal.disconnect(sender=Task, dispatch_uid="shortcut-guard")
    assert len(seen) == 2
    assert seen[1]["instance"].payload == {"args": [5, 6], "kwargs": {}}


def test_the_owner_given_to_enqueue_is_cached_on_the_task_it_returns(django_assert_num_queries):
    """Field.set_cached_value (inserting.py): task.owner costs no query."""
    owner = UserFactory()
    task = tasks.add.using(owner=owner).enqueue(1, 2).record
    with django_assert_num_queries(0):
        assert task.owner is owner


def test_enqueue_statements_are_prepared_by_the_server(postgres_only, monkeypatch):
    """ServerBindingCursor wrapped by hand (inserting.py): prepared, seen by execute wrappers."""
    connection.ensure_connection()
    # What "prepare_threshold": 5 in the database OPTIONS gives (Django's default is None).
    monkeypatch.setattr(connection.connection, "prepare_threshold", 5)
    seen = []

    def wrapper(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        for number in range(8):  # psycopg prepares a statement on its 6th use
            tasks.add.enqueue(number, 1)
    assert len([sql for sql in seen if sql.startswith("INSERT")]) == 8
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'INSERT INTO %%'"
        )
        assert cursor.fetchone()[0] >= 1


def test_the_query_log_shows_every_enqueue_statement(monkeypatch):
    """While queries are logged, each INSERT is there with its SQL (never None)."""
    if connection.vendor == "postgresql":
        connection.ensure_connection()
        monkeypatch.setattr(connection.connection, "prepare_threshold", 5)
    with CaptureQueriesContext(connection) as logged:
        for number in range(8):
            tasks.add.enqueue(number, 1)
    assert [query["sql"][:11] for query in logged.captured_queries] == ["INSERT INTO"] * 8


def test_the_unique_keys_condition_is_the_one_the_schema_editor_writes_in_its_index():
    """``unique_held_condition`` is the WHERE of ``jobs_task_unique_while``'s DDL, word for word
    (the plan it buys: tests/db/test_unique_scopes.py)."""
    constraint = next(c for c in Task._meta.constraints if c.name == "jobs_task_unique_while")
    editor = connection.SchemaEditorClass(connection)  # not entered: no transaction needed
    ddl = str(constraint.create_sql(Task, editor))
    condition = unique_held_condition(connection)
    assert ddl.endswith(f" WHERE {condition.replace('%%', '%')}"), (ddl, condition)
    assert "'waiting'" in condition
    assert "'active'" in condition


def test_the_claim_is_prepared_by_the_server_and_keeps_its_limits(postgres_only, monkeypatch):
    """ServerBindingCursor for the claim (jobs.sql.postgresql.claim_cursor): with a threshold,
    psycopg prepares it, PostgreSQL settles on a generic plan, and the claims it makes still
    take one task per key at limit 1, whatever the number asked for (a limit that needs an
    int4 parameter too) or the number of queues. psycopg prepares a statement at its 6th
    use; PostgreSQL plans its first five executions afresh."""
    from jobs.worker import claiming

    connection.ensure_connection()
    monkeypatch.setattr(connection.connection, "prepare_threshold", 5)
    for key in range(3):
        for n in range(15):
            tasks.add.using(concurrency_key=f"k{key}", concurrency_limit=1).enqueue(n, key)
    seen = []

    def wrapper(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    taken = 0
    with connection.execute_wrapper(wrapper):
        for number in range(20):
            # Twelve alike (prepared at the 6th, generic from the 11th), then others.
            queues = ["default"] if number < 12 or number % 2 else ["default", "other"]
            limit = 2 if number < 12 else [1, 70_000][number % 2]
            claimed, _ = claiming.claim_and_record("w", limit, [], queues=queues, lease_seconds=60)
            taken += len(claimed)
            running = Task.objects.filter(status="running")
            per_key = running.values("concurrency_key").annotate(n=Count("id"))
            assert all(row["n"] == 1 for row in per_key), list(per_key)
            if number % 2:  # every second claim, the keys' running tasks end
                running.update(status="succeeded")
    assert taken >= 20
    assert sum("WITH RECURSIVE" in sql for sql in seen) == 20  # seen by execute wrappers
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT max(generic_plans) FROM pg_prepared_statements "
            "WHERE statement LIKE '%%WITH RECURSIVE%%'"
        )
        assert cursor.fetchone()[0] >= 1


def test_the_claim_is_prepared_without_a_threshold_where_the_session_is_kept(
    postgres_only, monkeypatch
):
    """claim_cursor(prepare=True) (a worker whose LISTEN probe came back): Django's default
    threshold (None) or not, the claim is a prepared statement of this session from its first
    use; without ``prepare`` it is not, and nothing else on the connection is prepared."""
    from jobs.worker import claiming

    connection.ensure_connection()
    monkeypatch.setattr(connection.connection, "prepare_threshold", None)

    def prepared_claims():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_prepared_statements "
                "WHERE statement LIKE '%%WITH RECURSIVE%%'"
            )
            return cursor.fetchone()[0]

    before = prepared_claims()
    tasks.add.enqueue(1, 2)
    claimed, _ = claiming.claim_and_record("w", 1, [], queues=["default"], lease_seconds=60)
    assert len(claimed) == 1
    assert prepared_claims() == before  # not asked: planned afresh, as before
    tasks.add.enqueue(3, 4)
    claimed, _ = claiming.claim_and_record(
        "w", 1, [], queues=["default"], lease_seconds=60, prepare=True
    )
    assert len(claimed) == 1
    assert prepared_claims() >= 1
    Task.objects.update(status="succeeded")  # client-bound ORM statements: never prepared
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'UPDATE%%'"
        )
        assert cursor.fetchone()[0] == 0


def test_the_update_returning_ids_is_djangos_update_with_a_returning_clause():
    """``update_returning_ids`` compiles ``QuerySet.update``'s statement (``UpdateQuery``): the
    same text and parameters Django runs, then ``RETURNING`` the id; run, it returns the ids."""
    from jobs import states, transitions
    from jobs.sql.common import update_returning_ids

    task = TaskFactory(failed=True)
    rows = Task.objects.filter(pk__in=[task.pk], status__in=["failed"])
    values = {"status": "failed", "last_error": "100% it's", "owner": UserFactory()}
    statement, params = update_returning_ids(rows, values, using="default")
    ran = []

    def note(execute, sql, params, many, context):
        ran.append((sql, list(params)))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(note):
        rows.update(**values)
    head, _, returning = statement.partition(" RETURNING ")
    quote = connection.ops.quote_name
    assert returning == f"{quote('jobs_task')}.{quote('id')}"
    assert ran == [(head, params)]
    moved = transitions.base._update_returning(states.REQUEUE, [task.pk], {}, timezone.now())
    assert moved == [task.pk]
