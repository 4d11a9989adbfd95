"""Running the INSERTs behind enqueue: one task per statement, or thousands per statement.

``Model.save()`` rebuilds its INSERT on every call (28 columns, each through the field's
conversion and the driver's quoting); enqueue is hot enough to pay for doing that once. The
statement is built on first use per database: the columns an enqueue sets are parameters, and
every other column is its model default, written into the SQL as a literal. New model fields
with a default need nothing here; a field without a default that enqueue must set does. The
statements themselves are written by ``jobs.sql`` (``common.Inserts``, and per database).
"""

from django.db import connections
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from jobs import sql
from jobs.db import server_binding_cursor
from jobs.models import Task
from jobs.sql.common import Inserts

# The columns an enqueue sets; every other one takes its model default.
SET_BY_ENQUEUE = (
    "id", "name", "backend", "queue", "priority", "payload", "summary", "idempotency_key",
    "max_attempts", "run_after", "owner", "created_at", "updated_at", "concurrency_key",
    "concurrency_limit", "unique_key", "unique_while", "expires_at", "rate_key", "rate_limit",
    "rate_period", "status", "workflow", "workflow_role",
)  # fmt: skip

_FIELDS = Task._meta.concrete_fields
_OWNER = Task._meta.get_field("owner")
_ATTNAMES = [field.attname for field in _FIELDS]

# How new_task fills each column, in the model's order: from the values enqueue set (by name),
# else by the field's default (the callable ``Field.get_default`` calls).
_BUILD = [
    (field.attname, field.name, None if field.name in SET_BY_ENQUEUE else field.get_default)
    for field in _FIELDS
    if field.name not in ("payload", "owner")  # new_task's own
]

# Per database alias: its statements module and the INSERTs it built (jobs.sql).
_statements: dict[str, tuple] = {}


def statements(using: str) -> Inserts:
    """The INSERTs of enqueue for the database ``using``, built on first use."""
    dialect = sql.dialect(using)
    built = _statements.get(using)
    if built is None or built[0] is not dialect:
        built = _statements[using] = (dialect, dialect.inserts(connections[using], SET_BY_ENQUEUE))
    return built[1]


def insert_one(values: dict, payload_text: str, *, using: str) -> bool:
    """INSERT one task from ``values`` (by field name); False if its idempotency key, or its
    unique key while waiting or active, was taken.

    ``values`` holds every name of ``SET_BY_ENQUEUE`` (``owner`` as the user or None,
    ``workflow`` as its id or None), and
    ``payload_text`` the payload's JSON.
    """
    connection = connections[using]
    built = statements(using)
    params: list[object] = []
    for field in built.variable:
        name = field.name
        if name == "payload":
            params.append(payload_text)
        elif name == "owner":
            owner = values["owner"]
            params.append(None if owner is None else owner.pk)
        elif built.native_params:
            params.append(values[name])  # the driver adapts uuid, str, int and datetime as is
        else:
            params.append(field.get_db_prep_save(values[name], connection))
    with server_binding_cursor(connection, built.server_binding) as cursor:
        if values["unique_while"] is not None:  # an idempotency key too, if it has one
            cursor.execute(built.one_unique, params)
        elif values["idempotency_key"] is not None:
            cursor.execute(built.one_with_key, params)
        else:
            cursor.execute(built.one, params)
            return True
        return cursor.rowcount == 1


def new_task(values: dict, payload: dict, *, using: str) -> Task:
    """Return the Task instance of a row just inserted from ``values``, as if read back."""
    row: dict[str, object] = {}
    for attname, name, default in _BUILD:
        if default is None:
            row[attname] = values[name]
        else:
            row[attname] = default()  # a fresh dict or list where the default is one
    row["payload"] = payload
    owner = values["owner"]
    row[_OWNER.attname] = None if owner is None else owner.pk
    task = loaded_task(row, using=using)
    if values["owner"] is not None:
        # task.owner costs no query. Not ``task.owner = owner``: that also runs the router's
        # relation check (docs/performance.md, "Shortcuts into Django's internals"; guarded by
        # tests/db/test_django_shortcuts.py).
        _OWNER.set_cached_value(task, values["owner"])
    return task


def loaded_task(values: dict, *, using: str) -> Task:
    """A saved Task from ``values``, every column's value by its attname: what
    ``Model.from_db`` makes, built without ``Model.__init__``'s walk through the fields (the
    values set in the instance's ``__dict__``, as loading a row does). Where a receiver of
    ``pre_init`` or ``post_init`` waits for tasks, Django's way is taken so it is called.

    A shortcut into Django's internals that pays: 5.0 µs a task against 8.7 for ``from_db`` in
    a worker's child, 24 µs an enqueue against 8 (docs/performance.md, "Shortcuts into
    Django's internals"); guarded by tests/db/test_django_shortcuts.py, which compares it with
    the instance Django builds.
    """
    if pre_init.has_listeners(Task) or post_init.has_listeners(Task):
        # In the model's order: from_db passes the values to Model.__init__ by position.
        return Task.from_db(using, _ATTNAMES, [values[name] for name in _ATTNAMES])
    task = Task.__new__(Task)
    task.__dict__.update(values)
    task._state = ModelState()
    task._state.adding = False
    task._state.db = using
    return task


def insert_many(template: dict, rows, *, using: str):
    """INSERT ``rows`` of (id, payload JSON text), every other column from ``template``."""
    connection = connections[using]
    built = statements(using)
    owner = template["owner"]
    constant = {**template, "owner": None if owner is None else owner.pk}
    with connection.cursor() as cursor:
        sql.dialect(connection).insert_many(cursor, connection, built, constant, rows)
