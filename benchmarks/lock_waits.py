"""Sample a fleet's lock waits from a process of its own, and name what each one waited for.

    .venv/bin/python benchmarks/lock_waits.py --database postgres://... --out waits.jsonl

Every ``--interval`` seconds (10 ms by default) one query reads the backends of
``--application-name`` waiting on a lock (``pg_stat_activity``, ``wait_event_type = 'Lock'``),
each with the lock it waits for (``wait_event``: ``tuple``, ``transactionid``, ``relation``,
``extend``, ``advisory``...), its statement, and the backends blocking it
(``pg_blocking_pids``) with theirs: a blocker idle in its transaction shows the last statement
it ran, the one that most likely took the lock. Each wait seen is one JSON line of ``--out``; a
wait seen in consecutive samples (same backend, same statement) is counted once by
``summarize``. The sampler runs until it is sent SIGTERM or SIGINT, then writes a last line
with its sample count. ``benchmarks/fleet.py`` starts it around each drain.

A relation extension lock (``extend``) is not in ``pg_locks``: ``pg_blocking_pids`` names no
blocker for it.
"""

import argparse
import json
import re
import signal
import sys
import time
from collections import Counter
from pathlib import Path

SAMPLE = """
    SELECT waiter.pid, waiter.wait_event, waiter.query, waiter.backend_xid::text,
           COALESCE(json_agg(json_build_object(
               'pid', blocker.pid, 'state', blocker.state, 'query', blocker.query,
               'wait_event', blocker.wait_event
           )) FILTER (WHERE blocker.pid IS NOT NULL), '[]')
    FROM pg_stat_activity AS waiter
    LEFT JOIN LATERAL unnest(pg_blocking_pids(waiter.pid)) AS blocking(pid) ON true
    LEFT JOIN pg_stat_activity AS blocker ON blocker.pid = blocking.pid
    WHERE waiter.wait_event_type = 'Lock' AND waiter.application_name = %s
    GROUP BY waiter.pid, waiter.wait_event, waiter.query, waiter.backend_xid
"""

# The statements of jobs a fleet runs, by a piece of their text (the first that matches).
STATEMENTS = [
    ("claim", re.compile(r"^\s*WITH RECURSIVE\s+heads\b", re.S)),
    # Many outcomes in one statement (``succeed_attempts``, ``release_attempts``): their text
    # is cut at ``track_activity_query_size`` (1 kB) within the rows, before the status set.
    ("outcome write", re.compile(r"^\s*WITH v\(id, attempts\b|jsonb_array_elements", re.S)),
    ("lease renewal", re.compile(r'UPDATE "jobs_task" SET "lease_expires_at"', re.S)),
    ("worker heartbeat", re.compile(r'UPDATE "jobs_worker"', re.S)),
    ("maintenance lock", re.compile(r'"jobs_maintenancelock"', re.S)),
    ("rescue", re.compile(r'UPDATE "jobs_task".*"lease_expires_at" <', re.S)),
    # A blocker idle in its transaction shows its last statement: the end of a claim's, say.
    ("RELEASE SAVEPOINT", re.compile(r"^\s*RELEASE SAVEPOINT", re.S)),
    ("COMMIT", re.compile(r"^\s*COMMIT", re.S)),
]


def statement(query: str | None) -> str:
    """A name for ``query``: one of ``STATEMENTS``, else its first 100 characters."""
    query = query or ""
    for name, pattern in STATEMENTS:
        if pattern.search(query):
            return name
    return " ".join(query.split())[:100]


def kind(query: str | None) -> str:
    """``claim`` if ``query`` is the claim statement; ``outcome`` if it records outcomes (which
    a worker may do in its claim's transaction, before the claim: ``claim_and_record``); else
    ``other``."""
    name = statement(query)
    return name if name == "claim" else "outcome" if name == "outcome write" else "other"


def sample(url: str, application_name: str, interval: float, out: Path) -> None:
    import psycopg

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    samples = 0
    with psycopg.connect(url, autocommit=True) as connection, out.open("w") as lines:
        cursor = connection.cursor()
        cursor.execute("SET application_name = 'jobs-lock-sampler'")
        next_at = time.monotonic()
        while not stopping:
            cursor.execute(SAMPLE, [application_name])
            rows = cursor.fetchall()
            samples += 1
            for pid, wait_event, query, xid, blockers in rows:
                if isinstance(blockers, str):
                    blockers = json.loads(blockers)
                wait = {"sample": samples, "pid": pid, "wait_event": wait_event, "query": query}
                lines.write(json.dumps({**wait, "xid": xid, "blockers": blockers}) + "\n")
            next_at += interval
            time.sleep(max(0.0, next_at - time.monotonic()))
        lines.write(json.dumps({"samples": samples}) + "\n")


def summarize(out: Path) -> dict:
    """The waits in ``out``: samples taken, and per (kind, lock, waiting statement, blocking
    statements) how many distinct waits and how many samples saw them."""
    samples = 0
    waits: Counter = Counter()
    seen: Counter = Counter()
    last: dict[tuple, int] = {}  # (pid, query) -> the last sample it was seen waiting in
    for line in out.read_text().splitlines():
        row = json.loads(line)
        if "samples" in row:
            samples = row["samples"]
            continue
        blockers = ",".join(sorted({statement(b["query"]) for b in row["blockers"]})) or "-"
        key = (kind(row["query"]), row["wait_event"], statement(row["query"]), blockers)
        seen[key] += 1
        who = (row["pid"], row["query"])
        if last.get(who) != row["sample"] - 1:
            waits[key] += 1
        last[who] = row["sample"]
    return {
        "samples": samples,
        "waits": [
            {
                "kind": k,
                "lock": lock,
                "waiting": waiting,
                "blocking": blocking,
                "waits": count,
                "samples": seen[(k, lock, waiting, blocking)],
            }
            for (k, lock, waiting, blocking), count in sorted(waits.items())
        ],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", required=True, help="postgres://...")
    parser.add_argument("--application-name", default="jobs-fleet-bench")
    parser.add_argument("--interval", type=float, default=0.01)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--summarize", action="store_true", help="summarize --out, then exit")
    args = parser.parse_args()
    if args.summarize:
        json.dump(summarize(args.out), sys.stdout, indent=1)
        return
    sample(args.database, args.application_name, args.interval, args.out)


if __name__ == "__main__":
    main()
