"""SQL text lives in ``jobs.sql`` only, and only ``jobs.sql`` asks which database it talks to.

The scan reads the package with ``ast``: every string literal and f-string (docstrings aside)
that reads as a statement or as a database-specific fragment is SQL. Exempt:

- ``jobs/migrations/``: ``RunSQL`` and ``RunPython`` with ``schema_editor.connection.vendor``
  live there by Django's design, and a migration must keep the SQL it was written with even
  when ``jobs.sql`` changes later.
"""

import ast
import re
from pathlib import Path

import jobs

PACKAGE = Path(jobs.__file__).parent
HOME = PACKAGE / "sql"
EXEMPT = (PACKAGE / "migrations",)

# A string that starts as a statement does (our SQL is written in capitals).
STATEMENT = re.compile(
    r"""^\s*\(?\s*(
        SELECT\s.*\bFROM\b
      | SELECT\s+[\w(]
      | INSERT\s+INTO\s
      | UPDATE\s+\S+\s+(AS\s+\S+\s+)?SET\s
      | DELETE\s+FROM\s
      | WITH\s+(RECURSIVE\s+)?\S+(\s*\([^)]*\))?\s+AS\s+(MATERIALIZED\s+)?\(
      | EXPLAIN\s
      | (LISTEN|UNLISTEN|NOTIFY)\s
      | PRAGMA\s
    )""",
    re.VERBOSE | re.DOTALL,
)
# Fragments spliced into statements: functions and operators of one database or another.
FRAGMENT = re.compile(
    r"""\b(json_extract|json_object|json_each|jsonb_array_elements|row_to_json|percentile_cont
          |string_to_array|unnest|pg_notify)\s*\(
      | ->>
      | ::(jsonb|uuid|text|integer|timestamptz)\b
      | \bFOR\s+UPDATE\s+SKIP\s+LOCKED\b
      | \bUNION\s+ALL\s+SELECT\b
      | \bRETURNING\s+[\w*]
      | \bON\s+CONFLICT\b
    """,
    re.VERBOSE,
)


def _docstrings(tree) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _text(node) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # the holes read as a name: "SELECT x FROM x"
        return "".join(v.value if isinstance(v, ast.Constant) else "x" for v in node.values)
    return None


def sql_literals(source: str) -> list[tuple[int, str]]:
    """The line and text of every string in ``source`` that is SQL (docstrings aside)."""
    tree = ast.parse(source)
    skipped = _docstrings(tree)  # and the pieces of f-strings, read whole instead:
    skipped |= {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    found = []
    for node in ast.walk(tree):
        text = _text(node)
        if text is None or id(node) in skipped:
            continue
        if STATEMENT.match(text) or FRAGMENT.search(text):
            found.append((node.lineno, text.strip()[:60]))
    return sorted(found)


def vendor_tests(source: str) -> list[int]:
    """The lines of ``source`` that read a connection's ``vendor``."""
    tree = ast.parse(source)
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "vendor"
    )


def _modules(outside):
    for path in sorted(PACKAGE.rglob("*.py")):
        if any(path.is_relative_to(folder) for folder in (*outside, *EXEMPT)):
            continue
        yield path, path.read_text()


def test_no_sql_text_outside_jobs_sql():
    found = [
        f"{path.relative_to(PACKAGE)}:{line}: {text!r}"
        for path, source in _modules([HOME])
        for line, text in sql_literals(source)
    ]
    assert not found, "SQL text belongs in jobs/sql/:\n" + "\n".join(found)


def test_only_jobs_sql_asks_which_database_it_is():
    found = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path, source in _modules([HOME])
        for line in vendor_tests(source)
    ]
    assert not found, "ask jobs.sql.dialect(connection) instead:\n" + "\n".join(found)


def test_the_vendor_is_read_in_one_place_in_jobs_sql():
    found = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(HOME.glob("*.py"))
        for line in vendor_tests(path.read_text())
    ]
    # dialect() reads it; the per-database modules are chosen, they never ask.
    assert {place.split(":")[0] for place in found} == {"sql/__init__.py"}, found


def test_jobs_sql_holds_sql_the_scan_recognises():
    # Were the patterns to rot, the scans above would pass on anything: they must still see
    # the statements of jobs.sql.
    found = {path.name: sql_literals(path.read_text()) for path in HOME.glob("*.py")}
    assert all(found[name] for name in ("common.py", "postgresql.py", "sqlite.py")), found


# The scan itself, on sources that hold SQL and sources that only talk about it. -------------


def test_the_scan_finds_statements_fragments_and_fstrings():
    source = """
table = "t"
a = "SELECT id FROM t WHERE x = %s"
b = f"UPDATE {table} SET status = %s"
c = "  WITH picked AS MATERIALIZED (SELECT 1)"
d = "UNION ALL SELECT 1, id, NULL, NULL FROM recorded"
e = "(error_details -> -1 ->> 'exception')"
f = "json_extract(error_details, '$[#-1].exception')"
g = f"INSERT INTO {table} (a) VALUES (%s)"
h = "DELETE FROM t"
i = f"LISTEN {table}"
j = "EXPLAIN (FORMAT JSON) SELECT 1"
"""
    assert [line for line, _ in sql_literals(source)] == list(range(3, 13))


def test_the_scan_leaves_prose_and_docstrings_alone():
    source = '''
def insert_one():
    """INSERT one task; SELECT the rows FROM the table; UPDATE ... RETURNING."""


message = "jobs needs SQLite 3.35 or newer (UPDATE ... RETURNING); this Python has 3.31."
other = "Delete succeeded, failed and cancelled tasks older than their retention"
log = "listen failed, polling meanwhile error=%s"
functions = "SQLite's JSON functions (json_each, json_extract, json_object)"
'''
    assert sql_literals(source) == []


def test_the_vendor_scan_finds_any_read_of_vendor():
    source = """
a = connection.vendor == "postgresql"
b = connections[alias].vendor
c = connection.display_name
"""
    assert vendor_tests(source) == [2, 3]
