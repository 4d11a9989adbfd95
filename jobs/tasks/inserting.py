"""The INSERT statements behind enqueue: one task per statement, or thousands per statement.

``Model.save()`` rebuilds its INSERT on every call (28 columns, each through the field's
conversion and the driver's quoting); enqueue is hot enough to pay for doing that once. The
statement is built on first use per database: the columns an enqueue sets are parameters, and
every other column is its model default, written into the SQL as a literal. New model fields
with a default need nothing here; a field without a default that enqueue must set does.
"""

from django.db import connections

from jobs.models import Task

# The columns an enqueue sets; every other one takes its model default.
SET_BY_ENQUEUE = (
    "id", "name", "backend", "queue", "priority", "payload", "summary", "idempotency_key",
    "max_attempts", "run_after", "owner", "created_at", "updated_at",
)  # fmt: skip

_FIELDS = Task._meta.concrete_fields
_OWNER = Task._meta.get_field("owner")
_NAMES = [field.attname for field in _FIELDS]  # from_db reads them only if a value is missing


class _Statements:
    """The SQL of one database, built once: literals for the defaults, parameters for the rest."""

    def __init__(self, connection):
        connection.ensure_connection()
        quote = connection.ops.quote_name
        self.table = quote(Task._meta.db_table)
        self.columns = ", ".join(quote(field.column) for field in _FIELDS)
        self.variable = [field for field in _FIELDS if field.name in SET_BY_ENQUEUE]
        literals = {
            field.name: default_literal(field, field.get_default(), connection)
            for field in _FIELDS
            if field.name not in SET_BY_ENQUEUE
        }
        values = ", ".join(literals.get(field.name, "%s") for field in _FIELDS)
        self.one = f"INSERT INTO {self.table} ({self.columns}) VALUES ({values})"
        # With a key, a duplicate makes no row and no error (so no savepoint is needed to keep
        # the caller's transaction usable); the unique index still decides between two racers.
        self.one_with_key = (
            f"{self.one} ON CONFLICT (name, idempotency_key) "
            "WHERE idempotency_key IS NOT NULL DO NOTHING"
        )
        self.postgresql = connection.vendor == "postgresql"
        self.server_binding = None
        if self.postgresql:
            from django.db.backends.postgresql.psycopg_any import is_psycopg3

            if is_psycopg3:  # psycopg2 binds on the client only
                from django.db.backends.postgresql.base import ServerBindingCursor

                self.server_binding = ServerBindingCursor
        if self.postgresql:
            # Many rows: the ids and the payloads travel as two newline-separated texts, split
            # by the server. JSON text from json.dumps never holds a raw newline, and one long
            # string costs the driver one escape, where an array of 5,000 costs 5,000.
            many = ", ".join(
                {"id": "u.id::uuid", "payload": "u.payload::jsonb"}.get(field.name)
                or literals.get(field.name, "%s")
                for field in _FIELDS
            )
            self.many = (
                f"INSERT INTO {self.table} ({self.columns}) SELECT {many} FROM unnest("
                "string_to_array(%s, E'\\n'), string_to_array(%s, E'\\n')) AS u(id, payload)"
            )
            self.many_fields = [f for f in self.variable if f.name not in ("id", "payload")]
        else:
            self.many = self.one


def default_literal(field, value, connection) -> str:
    """Write ``value`` of ``field`` as an SQL literal, ready for a statement run with parameters.

    A shortcut into Django's internals: the schema editor's ``quote_value``, as migrations use
    it for defaults. It pays: an INSERT takes 61 µs on SQLite and 282 on PostgreSQL, against 72
    and 360 with every default a parameter (docs/performance.md, "Shortcuts into Django's
    internals"); guarded by tests/db/test_django_shortcuts.py, which reads hostile values back
    through both databases.
    ``quote_value`` leaves ``%`` alone, which the driver would read as a placeholder: doubled.
    """
    editor = connection.SchemaEditorClass(connection)  # its quote_value only, never entered
    return editor.quote_value(field.get_db_prep_save(value, connection)).replace("%", "%%")


_statements: dict[str, _Statements] = {}


def statements(using: str) -> _Statements:
    connection = connections[using]
    built = _statements.get(using)
    if built is None or built.postgresql != (connection.vendor == "postgresql"):
        built = _statements[using] = _Statements(connection)
    return built


def insert_one(values: dict, payload_text: str, *, using: str) -> bool:
    """INSERT one task from ``values`` (by field name); False if its idempotency key was taken.

    ``values`` holds every name of ``SET_BY_ENQUEUE`` (``owner`` as the user or None), and
    ``payload_text`` the payload's JSON.
    """
    connection = connections[using]
    sql = statements(using)
    params: list[object] = []
    for field in sql.variable:
        name = field.name
        if name == "payload":
            params.append(payload_text)
        elif name == "owner":
            owner = values["owner"]
            params.append(None if owner is None else owner.pk)
        elif sql.postgresql:
            params.append(values[name])  # the driver adapts uuid, str, int and datetime as is
        else:
            params.append(field.get_db_prep_save(values[name], connection))
    with _cursor(connection, sql.server_binding) as cursor:
        if values["idempotency_key"] is None:
            cursor.execute(sql.one, params)
            return True
        cursor.execute(sql.one_with_key, params)
        return cursor.rowcount == 1


def _cursor(connection, server_binding):
    """A cursor that binds parameters on the server, so psycopg can prepare the INSERT.

    Django's default psycopg 3 cursor binds on the client: PostgreSQL then parses and plans
    the same 28-column INSERT on every enqueue. A server-side binding cursor lets psycopg
    prepare it after ``prepare_threshold`` uses, when the database OPTIONS set one (Django's
    default, ``None``, prepares nothing, as PgBouncer in transaction mode needs), without
    switching the whole ORM to ``server_side_binding``. It is wrapped like any Django cursor,
    so execute wrappers see the statement. While queries are logged (DEBUG), Django's own
    cursor is used: the log of a prepared statement would read ``None`` as its SQL.

    A shortcut into Django's internals (``ServerBindingCursor``, ``make_cursor``) that pays
    only with a threshold: 434 µs an enqueue against 697 (docs/performance.md, "Shortcuts into
    Django's internals"); guarded by tests/db/test_django_shortcuts.py.
    """
    if server_binding is None or connection.queries_logged:
        return connection.cursor()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    return connection.make_cursor(server_binding(connection.connection))


def new_task(values: dict, payload: dict, *, using: str) -> Task:
    """Return the Task instance of a row just inserted from ``values``, as if read back."""
    row: list[object] = []
    for field in _FIELDS:
        name = field.name
        if name == "payload":
            row.append(payload)
        elif name == "owner":
            row.append(None if values["owner"] is None else values["owner"].pk)
        elif name in values:
            row.append(values[name])
        else:
            row.append(field.get_default())  # a fresh dict or list where the default is one
    task = Task.from_db(using, _NAMES, row)
    if values["owner"] is not None:
        # task.owner costs no query. Not ``task.owner = owner``: that also runs the router's
        # relation check (docs/performance.md, "Shortcuts into Django's internals"; guarded by
        # tests/db/test_django_shortcuts.py).
        _OWNER.set_cached_value(task, values["owner"])
    return task


def insert_many(template: dict, rows, *, using: str):
    """INSERT ``rows`` of (id, payload JSON text), every other column from ``template``."""
    connection = connections[using]
    sql = statements(using)
    owner = template["owner"]
    constant = {**template, "owner": None if owner is None else owner.pk}
    with connection.cursor() as cursor:
        if sql.postgresql:
            ids = "\n".join(task_id.hex for task_id, _ in rows)
            payloads = "\n".join(text for _, text in rows)
            # The parameters in the order of their placeholders: columns first, then unnest's.
            params = [constant[field.name] for field in sql.many_fields]
            cursor.execute(sql.many, [*params, ids, payloads])
            return
        prepared = {
            field.name: field.get_db_prep_save(constant[field.name], connection)
            for field in sql.variable
            if field.name not in ("id", "payload")
        }
        cursor.executemany(
            sql.many,
            [
                [
                    task_id.hex if field.name == "id" else text if field.name == "payload"
                    else prepared[field.name]
                    for field in sql.variable
                ]
                for task_id, text in rows
            ],
        )  # fmt: skip
