"""The reference: a plain psycopg worker on LISTEN/NOTIFY, claiming with ``SKIP LOCKED``.

    python -m benchmarks.peers.plain_worker --database postgres://... [--burst] [--batch 100]

What any PostgreSQL queue does at the least: one table, a partial index on waiting rows, a
claim of up to ``--batch`` rows (``UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP
LOCKED)``), the tasks run in this process, one update marking the batch done, and a
``NOTIFY`` with each enqueue that wakes an idle worker. No retries, leases, timeouts, results
or logging: the floor the frameworks are measured against.
"""

import argparse
import json
import time

import psycopg

from benchmarks.peers.stamps import write_stamp

CHANNEL = "plain_task"
SCHEMA = """
CREATE TABLE IF NOT EXISTS plain_task (
    id bigserial PRIMARY KEY,
    name text NOT NULL,
    args jsonb NOT NULL,
    status text NOT NULL DEFAULT 'queued',
    started_at timestamptz,
    finished_at timestamptz
);
CREATE INDEX IF NOT EXISTS plain_task_queued ON plain_task (id) WHERE status = 'queued';
"""
CLAIM = """
UPDATE plain_task SET status = 'running', started_at = clock_timestamp()
WHERE id IN (
    SELECT id FROM plain_task WHERE status = 'queued' ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED
)
RETURNING id, name, args
"""
DONE = "UPDATE plain_task SET status = 'done', finished_at = clock_timestamp() WHERE id = ANY(%s)"


def noop(n=0):
    return None


def stamp(n=0):
    write_stamp(n, time.time())


TASKS = {"noop": noop, "stamp": stamp}


def create_schema(conn):
    conn.execute(SCHEMA)
    conn.commit()


def enqueue(conn, name: str, *args):
    """One task in its own transaction, with the ``NOTIFY`` that wakes an idle worker."""
    with conn.transaction():
        conn.execute(
            "INSERT INTO plain_task (name, args) VALUES (%s, %s)", (name, json.dumps(args))
        )
        conn.execute(f"NOTIFY {CHANNEL}")


def enqueue_many(conn, name: str, count: int):
    with conn.transaction():
        conn.execute(
            "INSERT INTO plain_task (name, args) SELECT %s, jsonb_build_array(n) "
            "FROM generate_series(0, %s - 1) AS n",
            (name, count),
        )
        conn.execute(f"NOTIFY {CHANNEL}")


def run(url: str, *, burst: bool, batch: int):
    conn = psycopg.connect(url, autocommit=True)
    woken = [False]
    conn.add_notify_handler(lambda notify: woken.__setitem__(0, True))
    conn.execute(f"LISTEN {CHANNEL}")
    while True:
        woken[0] = False
        with conn.transaction():
            rows = conn.execute(CLAIM, (batch,)).fetchall()
        if rows:
            for _, name, args in rows:
                TASKS[name](*args)
            with conn.transaction():
                conn.execute(DONE, ([row[0] for row in rows],))
            continue
        if burst:
            return
        if not woken[0]:  # a NOTIFY that came during the claim already set it
            for _ in conn.notifies(timeout=1.0, stop_after=1):
                pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True)
    parser.add_argument("--burst", action="store_true", help="run what is queued, then exit")
    parser.add_argument("--batch", type=int, default=100, help="tasks per claim")
    args = parser.parse_args()
    run(args.database, burst=args.burst, batch=args.batch)


if __name__ == "__main__":
    main()
