"""Benchmark enqueue beside plain psycopg: one at a time, in bulk, and what each index costs.

    .venv/bin/python benchmarks/enqueue.py --database postgres://root@127.0.0.1:5432/jobs_enqueue_bench

PostgreSQL only; the database is created and migrated if needed, and its task table emptied
before each measurement: give it a database of its own. Every round runs each kind once, the
order turned round by round (interleaved); the tables give the median and (min to max) over the
rounds, ratios taken round by round, and the load average before and after.

- **one**: ``--one`` tasks, each in its own transaction as a request makes it
  (``transaction.atomic()`` around ``noop.enqueue(n)``), against a plain psycopg connection
  inserting the same row (a row jobs made, with a fresh id) into the same table, each in its
  own transaction (``BEGIN``, a prepared ``INSERT`` of its 28 columns, ``COMMIT``).
- **bulk**: ``--bulk`` tasks with ``enqueue_many``, against plain ``COPY`` of the same rows into
  the same table (lines built in Python from the text PostgreSQL writes for a jobs row), and
  ``COPY`` of ids and payloads into a table with nothing but a primary key (the floor) and into
  a bare heap with no index at all (the ceiling: what PostgreSQL writes here at best).
- **costs**: what each index and trigger of the task table costs per task. A scratch table
  like ``jobs_task`` with only its primary key is the base; each index (its definition read from
  ``pg_indexes``) or trigger is added alone to it, and the same work runs on each: enqueue
  (``COPY`` of ``--cost-rows`` rows, one commit), one at a time (``--cost-single`` one-row
  ``INSERT`` transactions), claim (``UPDATE`` to running, 400 rows a transaction, picked by id so
  that no index's help in finding rows is counted: only its upkeep) and outcome (``UPDATE`` to
  succeeded, 400 a transaction). A cost is the difference to the base of the same round, in µs
  per task. "as migrated" has every index and trigger of ``jobs_task``.
"""

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KINDS = ["one", "bulk", "costs"]
SCRATCH = "enqueue_cost"
FLOOR = "enqueue_floor"
CLAIM_BATCH = 400


# Set-up ----------------------------------------------------------------------------------------


def plain_connection(url: str):
    import psycopg

    return psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True)


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def spread(values, fmt="{:,.0f}") -> str:
    low, high = fmt.format(min(values)), fmt.format(max(values))
    return f"{fmt.format(statistics.median(values))} ({low} \N{EN DASH} {high})"


class Template:
    """A row jobs made, as the plain clients insert it again: columns, values, COPY text."""

    def __init__(self, plain):
        from benchmarks.tasks import noop
        from benchmarks.workers import empty

        empty()
        task = noop.enqueue(0)
        with plain.cursor() as cursor:
            cursor.execute("SELECT * FROM jobs_task WHERE id = %s", [task.id])
            assert cursor.description is not None
            self.columns = [column.name for column in cursor.description]
            self.values = list(cursor.fetchone() or ())
            buffer = bytearray()
            with cursor.copy(
                f"COPY (SELECT * FROM jobs_task WHERE id = '{task.id}') TO STDOUT"
            ) as copy:
                for data in copy:
                    buffer += data
        self.line = bytes(buffer).decode().rstrip("\n").split("\t")
        self.id_at = self.columns.index("id")
        self.payload_at = self.columns.index("payload")
        from psycopg.types.json import Jsonb

        self.values[self.payload_at] = Jsonb(self.values[self.payload_at])
        names = ", ".join(self.columns)
        marks = ", ".join(["%s"] * len(self.columns))
        self.insert = f"INSERT INTO {{table}} ({names}) VALUES ({marks})"
        self.copy = f"COPY {{table}} ({names}) FROM STDIN"

    def params(self):
        values = list(self.values)
        values[self.id_at] = uuid.uuid4()
        return values

    def lines(self, count: int) -> tuple[list[uuid.UUID], str]:
        """``count`` rows in COPY text, each with its own id and payload, the rest the same."""
        ids = [uuid.uuid4() for _ in range(count)]
        fields = list(self.line)
        out = []
        for n, task_id in enumerate(ids):
            fields[self.id_at] = task_id.hex
            fields[self.payload_at] = f'{{"args": [{n}], "kwargs": {{}}}}'
            out.append("\t".join(fields))
        return ids, "\n".join(out) + "\n"


# One at a time ---------------------------------------------------------------------------------


def jobs_one(count: int) -> float:
    from django.db import transaction

    from benchmarks.tasks import noop
    from benchmarks.workers import empty

    empty()
    started = time.perf_counter()
    for n in range(count):
        with transaction.atomic():  # as a request would: its own transaction
            noop.enqueue(n)
    return count / (time.perf_counter() - started)


def plain_one(plain, template: Template, count: int, table="jobs_task") -> float:
    from benchmarks.workers import empty

    empty()
    statement = template.insert.format(table=table)
    params = [template.params() for _ in range(count)]
    with plain.cursor() as cursor:
        started = time.perf_counter()
        for values in params:
            with plain.transaction():
                cursor.execute(statement, values)
        return count / (time.perf_counter() - started)


# In bulk ---------------------------------------------------------------------------------------


def jobs_bulk(count: int) -> float:
    from benchmarks.tasks import noop
    from benchmarks.workers import empty

    empty()
    started = time.perf_counter()
    noop.enqueue_many([(n,) for n in range(count)])
    return count / (time.perf_counter() - started)


def copy_rows(plain, template: Template, count: int, table="jobs_task") -> float:
    """COPY ``count`` rows into ``table``, lines built in the time measured; tasks/s."""
    from benchmarks.workers import empty

    empty()
    started = time.perf_counter()
    _, text = template.lines(count)
    with (
        plain.transaction(),
        plain.cursor() as cursor,
        cursor.copy(template.copy.format(table=table)) as copy,
    ):
        copy.write(text)
    return count / (time.perf_counter() - started)


def copy_floor(plain, count: int, *, primary_key: bool = True) -> float:
    """COPY ids and payloads into a table with a primary key and nothing else (or, without
    ``primary_key``, into a bare heap: no index at all, what no task table can be); tasks/s."""
    key = " PRIMARY KEY" if primary_key else ""
    with plain.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {FLOOR}")
        cursor.execute(f"CREATE TABLE {FLOOR} (id uuid{key}, payload jsonb NOT NULL)")
    started = time.perf_counter()
    text = "".join(f'{uuid.uuid4().hex}\t{{"args": [{n}], "kwargs": {{}}}}\n' for n in range(count))
    with (
        plain.transaction(),
        plain.cursor() as cursor,
        cursor.copy(f"COPY {FLOOR} (id, payload) FROM STDIN") as copy,
    ):
        copy.write(text)
    rate = count / (time.perf_counter() - started)
    with plain.cursor() as cursor:
        cursor.execute(f"DROP TABLE {FLOOR}")
    return rate


# What each index and trigger costs ------------------------------------------------------------


def parts(plain) -> dict[str, list[str]]:
    """Each index and trigger of jobs_task, as the statements that add it to the scratch table."""
    found: dict[str, list[str]] = {}
    with plain.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'jobs_task' "
            "AND indexname <> 'jobs_task_pkey' ORDER BY indexname"
        )
        for name, definition in cursor.fetchall():
            statement = definition.replace(" ON public.jobs_task ", f" ON {SCRATCH} ")
            found[name] = [statement.replace(name, f"{name}_cost", 1)]
        cursor.execute(
            "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
            "WHERE tgrelid = 'jobs_task'::regclass AND NOT tgisinternal ORDER BY tgname"
        )
        for name, definition in cursor.fetchall():
            statement = definition.replace(" ON public.jobs_task ", f" ON {SCRATCH} ")
            found[f"trigger {name}"] = [statement]
        # The foreign keys (owner, cancelled_by): each is a trigger of PostgreSQL's own per row.
        cursor.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 'jobs_task'::regclass AND contype = 'f' ORDER BY conname"
        )
        for name, definition in cursor.fetchall():
            statement = f"ALTER TABLE {SCRATCH} ADD CONSTRAINT {name}_cost {definition}"
            found[f"foreign key {name.split('_fk_')[0].removeprefix('jobs_task_')}"] = [statement]
    return found


def build_scratch(plain, statements: list[str]):
    with plain.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {SCRATCH}")
        cursor.execute(
            f"CREATE TABLE {SCRATCH} (LIKE jobs_task INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
        )
        cursor.execute(f"ALTER TABLE {SCRATCH} ADD PRIMARY KEY (id)")
        for statement in statements:
            cursor.execute(statement)


def work(plain, template: Template, rows: int, single: int) -> dict[str, float]:
    """Seconds of each step on the scratch table: enqueue, one at a time, claim, outcome."""
    seconds = {}
    ids, text = template.lines(rows)
    with plain.cursor() as cursor:
        started = time.perf_counter()
        with plain.transaction(), cursor.copy(template.copy.format(table=SCRATCH)) as copy:
            copy.write(text)
        seconds["enqueue"] = time.perf_counter() - started
        statement = template.insert.format(table=SCRATCH)
        params = [template.params() for _ in range(single)]
        started = time.perf_counter()
        for values in params:
            with plain.transaction():
                cursor.execute(statement, values)
        seconds["one at a time"] = time.perf_counter() - started
        batches = [ids[at : at + CLAIM_BATCH] for at in range(0, len(ids), CLAIM_BATCH)]
        claim = (
            f"UPDATE {SCRATCH} SET status = 'running', attempts = attempts + 1, "
            "worker_id = 'bench', started_at = now(), updated_at = now(), "
            "lease_expires_at = now() + interval '60 seconds' WHERE id = ANY(%s)"
        )
        outcome = (
            f"UPDATE {SCRATCH} SET status = 'succeeded', finished_at = now(), updated_at = now(), "
            "lease_expires_at = NULL WHERE id = ANY(%s)"
        )
        for step, sql in (("claim", claim), ("outcome", outcome)):
            started = time.perf_counter()
            for batch in batches:
                with plain.transaction():
                    cursor.execute(sql, [batch])
            seconds[step] = time.perf_counter() - started
    return seconds


STEPS = ["enqueue", "one at a time", "claim", "outcome"]


def costs(plain, template: Template, rounds: int, rows: int, single: int):
    every = parts(plain)
    configs = {"primary key only (the base)": []}
    configs.update({name: [statements[0]] for name, statements in every.items()})
    configs["as migrated (all of them)"] = [s for statements in every.values() for s in statements]
    per_step_rows = {"enqueue": rows, "one at a time": single, "claim": rows, "outcome": rows}
    results: dict[str, dict[str, list[float]]] = {name: {s: [] for s in STEPS} for name in configs}
    base_name = next(iter(configs))
    names = list(configs)
    loads = [load()]
    for number in range(rounds):
        order = names[number % len(names) :] + names[: number % len(names)]
        measured = {}
        for name in order:
            build_scratch(plain, configs[name])
            measured[name] = work(plain, template, rows, single)
        for name in names:
            for step in STEPS:
                extra = measured[name][step] - (
                    0 if name == base_name else measured[base_name][step]
                )
                results[name][step].append(extra * 1e6 / per_step_rows[step])
        loads.append(load())
        print(f"costs round {number + 1}/{rounds} done, load {loads[-1]}", flush=True)
    with plain.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {SCRATCH}")
    print(f"\nWhat each index and trigger costs, µs per task (load {' → '.join(loads)})")
    print("| index or trigger | " + " | ".join(STEPS) + " | sum |")
    print("| --- |" + " ---: |" * (len(STEPS) + 1))
    for name in names:
        cells = [spread(results[name][step], "{:,.1f}") for step in STEPS]
        total = [
            sum(results[name][step][n] for step in ("enqueue", "claim", "outcome"))
            for n in range(rounds)
        ]
        label = name if name != base_name else f"{name}, total"
        print(f"| {label} | " + " | ".join(cells) + f" | {spread(total, '{:,.1f}')} |")


# Main ------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--only", default=",".join(KINDS), help=",".join(KINDS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--one", type=int, default=1000, help="tasks one at a time, per run")
    parser.add_argument("--bulk", type=int, default=100_000, help="tasks in bulk, per run")
    parser.add_argument("--cost-rows", type=int, default=20_000)
    parser.add_argument("--cost-single", type=int, default=300)
    args = parser.parse_args()
    if not args.database.startswith(("postgres://", "postgresql://")):
        sys.exit("Name a PostgreSQL database: --database postgres://...")
    only = set(args.only.split(","))
    from benchmarks.workers import setup_django

    setup_django(args.database)
    plain = plain_connection(args.database)
    template = Template(plain)
    if "one" in only:
        kinds = {
            "jobs `enqueue`, own transaction": lambda: jobs_one(args.one),
            "plain psycopg `INSERT`, own transaction": lambda: plain_one(plain, template, args.one),
        }
        interleave("one at a time", kinds, args.rounds)
    if "bulk" in only:
        kinds = {
            "jobs `enqueue_many`": lambda: jobs_bulk(args.bulk),
            "plain `COPY` into jobs_task": lambda: copy_rows(plain, template, args.bulk),
            "plain `COPY` into (id, payload), primary key only": lambda: copy_floor(
                plain, args.bulk
            ),
            "plain `COPY` into (id, payload), no index at all": lambda: copy_floor(
                plain, args.bulk, primary_key=False
            ),
        }
        interleave("in bulk", kinds, args.rounds)
    if "costs" in only:
        costs(plain, template, args.rounds, args.cost_rows, args.cost_single)
    from benchmarks.workers import empty

    empty()


def interleave(what: str, kinds: dict, rounds: int):
    names = list(kinds)
    rates: dict[str, list[float]] = {name: [] for name in names}
    loads = [load()]
    for number in range(rounds):
        order = names[number % len(names) :] + names[: number % len(names)]
        for name in order:
            rates[name].append(kinds[name]())
        loads.append(load())
        print(
            f"{what} round {number + 1}/{rounds}: "
            + ", ".join(f"{name} {rates[name][-1]:,.0f}/s" for name in names)
            + f" (load {loads[-1]})",
            flush=True,
        )
    first = names[0]
    print(f"\n{what}, {rounds} rounds, tasks/s (load {' → '.join(loads)})")
    print(f"| kind | tasks/s | {first.split(',')[0]} ÷ this, round by round |")
    print("| --- | ---: | ---: |")
    for name in names:
        ratio = [rates[first][n] / rates[name][n] for n in range(rounds)]
        print(f"| {name} | {spread(rates[name])} | {spread(ratio, '{:.2f}')} |")


if __name__ == "__main__":
    main()
