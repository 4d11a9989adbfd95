"""jobs beside its peers, the same workload on each, kinds interleaved, in one command.

    .venv/bin/python benchmarks/peers.py

Makes a virtualenv per peer under ``var/peers/`` (once; ``--reinstall`` for the newest releases)
and installs there django-tasks-db (the django-tasks database backend, with the django_tasks
backport on Django 5.2), procrastinate, and Celery with Redis. Each kind gets a PostgreSQL
database of its own (``--database-prefix`` + kind: jobs_peers_jobs, jobs_peers_dtdb, ...);
Celery uses the Redis database ``--redis`` (emptied before each of its runs: give it its own).

Measured, each kind once per round, ``--rounds`` rounds, the kinds' order turned each round:

- **drain**: ``--tasks`` no-op tasks queued, then ``--workers`` worker processes (1, then 2)
  run them all; tasks / (last finish - first start), both from each kind's own records (jobs
  and django-tasks-db: ``started_at``/``finished_at``; procrastinate: its events; Celery: the
  first task's start in each child, ``task_prerun``, and the results' ``date_done``; the plain
  worker: its columns).
- **pickup** (jobs, Celery, the plain worker): one idle worker, ``--pickup`` tasks enqueued 20 ms
  apart; each latency is the ``time.time()`` the task body's first line writes (to a file) less
  the enqueuing process's ``time.time()`` just before the enqueue call.

What "one worker" is for each: jobs, ``runworker --concurrency 4`` (a supervisor and 4
children); Celery, ``celery worker -c 4`` (prefork: a parent and 4 children), Redis broker and
results, ``-l INFO``; procrastinate, ``procrastinate worker --concurrency 4 --one-shot`` (one
process, 4 at once on asyncio); django-tasks-db, ``db_worker --batch`` (one process, one task
at a time, its only mode; connections kept, ``CONN_MAX_AGE``); the plain worker,
``benchmarks/peers/plain_worker.py`` (one process, claims of 100 with ``SKIP LOCKED``, woken
by ``NOTIFY``). Prints each round, then a Markdown table: medians (min to max), and ratios to
jobs taken round by round.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var" / "peers"

# The peers' packages, each in its own virtualenv; jobs and the plain worker use this one.
PEERS = {
    "django-tasks-db": ["Django>=5.2,<6", "django-tasks", "django-tasks-db", "psycopg[binary]"],
    "procrastinate": ["procrastinate", "psycopg[binary]"],
    "celery": ["celery[redis]"],
}
VERSIONS = {
    "jobs": ["django-jobs-queue", "Django", "psycopg"],
    "plain": ["psycopg"],
    "django-tasks-db": ["django-tasks-db", "django-tasks", "Django", "psycopg"],
    "procrastinate": ["procrastinate", "psycopg"],
    "celery": ["celery", "kombu", "redis"],
}
KINDS = ["jobs", "plain", "django-tasks-db", "procrastinate", "celery"]
PICKUP_KINDS = ["jobs", "plain", "celery"]
DATABASE_SUFFIX = {"django-tasks-db": "dtdb"}


def python_of(kind: str) -> str:
    if kind in PEERS:
        return str(VAR / kind / "bin" / "python")
    return sys.executable


def ensure_virtualenv(kind: str, reinstall: bool):
    """Make ``var/peers/KIND`` and install the peer's packages, unless already done."""
    home = VAR / kind
    marker = home / ".installed"
    wanted = "\n".join(PEERS[kind])
    if marker.exists() and marker.read_text() == wanted and not reinstall:
        return
    print(f"installing {kind} into {home.relative_to(ROOT)} ...", flush=True)
    if not (home / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
    pip = [str(home / "bin" / "python"), "-m", "pip", "install", "--quiet", "--upgrade"]
    subprocess.run([*pip, *PEERS[kind]], check=True)
    marker.write_text(wanted)


def versions(kind: str) -> str:
    code = (
        "import importlib.metadata as m, json, sys;"
        "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
    )
    out = subprocess.run(
        [python_of(kind), "-c", code, *VERSIONS[kind]], capture_output=True, text=True, check=True
    ).stdout
    return ", ".join(f"{name} {version}" for name, version in json.loads(out).items())


def measure(kind: str, measurement: str, args, **options) -> dict:
    database = args.database_prefix + DATABASE_SUFFIX.get(kind, kind)
    command = [python_of(kind), "-m", "benchmarks.peers.drive", kind, measurement]
    command += ["--database", database, "--log-level", args.log_level]
    for name, value in options.items():
        command += [f"--{name}", str(value)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PEERS_REDIS": args.redis}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} {measurement} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def percentile(values, p):
    values = sorted(values)
    k = (len(values) - 1) * p / 100
    low, high = int(k), min(int(k) + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (k - low)


def spread(values, fmt="{:,.0f}") -> str:
    if not values:
        return ""
    median = statistics.median(values)
    return f"{fmt.format(median)} ({fmt.format(min(values))} \N{EN DASH} {fmt.format(max(values))})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database-prefix",
        default="postgres://root@127.0.0.1:5432/jobs_peers_",
        help="each kind's database is this and its name (created if missing)",
    )
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/15", help="Celery's, emptied")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each kind once in each")
    parser.add_argument("--tasks", type=int, default=10_000, help="no-op tasks per drain")
    parser.add_argument("--workers", default="1,2", help="worker processes of the drains")
    parser.add_argument("--pickup", type=int, default=200, help="tasks per pickup run, 20 ms apart")
    parser.add_argument("--kinds", default=",".join(KINDS), help="kinds to measure")
    parser.add_argument("--log-level", default="INFO", help="JOBS_LOG_LEVEL of jobs's worker")
    parser.add_argument("--reinstall", action="store_true", help="the peers' newest releases")
    args = parser.parse_args()
    kinds = [kind for kind in KINDS if kind in args.kinds.split(",")]
    workers = [int(value) for value in args.workers.split(",") if value]
    VAR.mkdir(parents=True, exist_ok=True)
    for kind in kinds:
        if kind in PEERS:
            ensure_virtualenv(kind, args.reinstall)
    installed = {kind: versions(kind) for kind in kinds}
    print(f"{os.cpu_count()} cpus, {args.rounds} rounds, {args.tasks:,} tasks per drain")
    for kind in kinds:
        print(f"  {kind}: {installed[kind]}")
    rates = {(kind, w): [] for kind in kinds for w in workers}
    pickups = {kind: [] for kind in kinds if kind in PICKUP_KINDS}
    for round_number in range(args.rounds):
        turned = kinds[round_number % len(kinds) :] + kinds[: round_number % len(kinds)]
        for w in workers:
            for kind in turned:
                result = measure(kind, "drain", args, tasks=args.tasks, workers=w)
                rates[kind, w].append(result["rate"])
                print(f"round {round_number + 1}: {kind}, {w} worker(s): ", end="")
                print(f"{result['rate']:,.0f} tasks/s", flush=True)
        for kind in turned:
            if kind in pickups:
                ms = measure(kind, "pickup", args, tasks=args.pickup)["ms"]
                pickups[kind].append((percentile(ms, 50), percentile(ms, 95)))
                p50, p95 = pickups[kind][-1]
                print(f"round {round_number + 1}: {kind} pickup p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    print("\n" + table(kinds, workers, rates, pickups, installed))


def table(kinds, workers, rates, pickups, installed) -> str:
    head = ["kind"]
    for w in workers:
        head += [f"drain, {w} worker{'s' if w > 1 else ''}, tasks/s", "÷ jobs"]
    head += ["pickup p50, ms", "p95, ms", "p50 ÷ jobs"]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for kind in kinds:
        row = [f"{kind} ({installed[kind].split(',')[0]})"]
        for w in workers:
            row.append(spread(rates[kind, w]))
            if "jobs" in kinds:
                ratios = [r / j for r, j in zip(rates[kind, w], rates["jobs", w], strict=True)]
                row.append(spread(ratios, "{:.2f}"))
            else:
                row.append("")
        if pickups.get(kind):
            row.append(spread([p50 for p50, _ in pickups[kind]], "{:.1f}"))
            row.append(spread([p95 for _, p95 in pickups[kind]], "{:.1f}"))
            if "jobs" in pickups:
                jobs = [p50 for p50, _ in pickups["jobs"]]
                ratios = [p / j for (p, _), j in zip(pickups[kind], jobs, strict=True)]
                row.append(spread(ratios, "{:.2f}"))
            else:
                row.append("")
        else:
            row += ["", "", ""]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
