"""One measurement of one kind, run inside that kind's virtualenv; prints its result as JSON.

    python -m benchmarks.peers.drive KIND drain --tasks 10000 --workers 1 --database URL
    python -m benchmarks.peers.drive KIND pickup --tasks 200 --database URL

KIND is jobs, plain, django-tasks-db, procrastinate or celery. ``drain``: the tasks queued
first, then ``--workers`` worker processes started; the rate is tasks / (last finish - first
start), both from the kind's own records. ``pickup``: one idle worker, tasks enqueued 20 ms
apart; each latency is the task body's ``time.time()`` less the enqueuer's just before the
enqueue call. Called by ``benchmarks/peers.py``, which says what each kind's worker is.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from benchmarks.peers.stamps import STAMP_FILE, read_stamps
from benchmarks.workers import stop_workers

ROOT = Path(__file__).resolve().parent.parent.parent
VAR = ROOT / "var" / "peers"
CONCURRENCY = 4  # children of a jobs or Celery worker, tasks at once of a procrastinate one


def wait_for(predicate, timeout: float, what: str, step=0.01):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(step)


def start(command: list[str], name: str, env=None) -> subprocess.Popen:
    log = open(VAR / f"{name}.log", "ab")  # noqa: SIM115 (the process holds it)
    return subprocess.Popen(
        command, cwd=ROOT, stdout=log, stderr=log, env={**os.environ, **(env or {})}
    )


def wait_all(processes, timeout=900):
    for process in processes:
        if process.wait(timeout) != 0:
            raise RuntimeError(f"{process.args} exited {process.returncode}")


def pickup_loop(enqueue, count: int, stamp_file: Path) -> dict:
    """Enqueue ``count`` stamping tasks 20 ms apart; the latencies in ms, from the stamps."""
    sent = {}
    next_at = time.monotonic()
    for n in range(count):
        sent[n] = time.time()
        enqueue(n)
        next_at += 0.02
        time.sleep(max(0.0, next_at - time.monotonic()))
    wait_for(lambda: len(read_stamps(str(stamp_file))) >= count + 1, 60, "the stamps")
    stamps = read_stamps(str(stamp_file))
    return {"ms": sorted((stamps[n] - sent[n]) * 1000 for n in range(count))}


def warm_up(enqueue, stamp_file: Path):
    """One task first (stamp -1), waited for: the worker is up, connected and idle."""
    enqueue(-1)
    wait_for(lambda: -1 in read_stamps(str(stamp_file)), 120, "the worker's first task")
    time.sleep(0.5)


# jobs ------------------------------------------------------------------------------------------


def jobs_setup(url):
    from benchmarks.workers import setup_django

    setup_django(url)


def jobs_drain(args):
    from benchmarks.workers import drain

    jobs_setup(args.database)
    return drain(args.tasks, args.workers, CONCURRENCY, args.log_level)


def jobs_pickup(args, stamp_file):
    jobs_setup(args.database)
    from benchmarks.tasks import stamp
    from benchmarks.workers import empty, start_workers, stop_workers

    empty()
    processes = start_workers(1, concurrency=CONCURRENCY, burst=False, log_level=args.log_level)
    try:
        warm_up(stamp.enqueue, stamp_file)
        return pickup_loop(stamp.enqueue, args.tasks, stamp_file)
    finally:
        stop_workers(processes)


# the plain psycopg worker ----------------------------------------------------------------------


def plain_connect(url):
    import psycopg

    from benchmarks.peers import plain_worker

    create_database(url)
    conn = psycopg.connect(url)
    plain_worker.create_schema(conn)
    conn.execute("TRUNCATE plain_task")
    conn.commit()
    return conn


def plain_command(args, burst):
    command = [sys.executable, "-m", "benchmarks.peers.plain_worker", "--database", args.database]
    return command + (["--burst"] if burst else [])


def plain_drain(args):
    from benchmarks.peers import plain_worker

    conn = plain_connect(args.database)
    plain_worker.enqueue_many(conn, "noop", args.tasks)
    processes = [start(plain_command(args, True), f"plain-{n}") for n in range(args.workers)]
    wait_all(processes)
    first, last, done = conn.execute(
        "SELECT min(started_at), max(finished_at), count(*) FILTER (WHERE status = 'done') "
        "FROM plain_task"
    ).fetchone()
    return span(args.tasks, done, first, last)


def plain_pickup(args, stamp_file):
    from benchmarks.peers import plain_worker

    conn = plain_connect(args.database)
    conn.autocommit = True
    processes = [start(plain_command(args, False), "plain-pickup")]
    try:
        enqueue = lambda n: plain_worker.enqueue(conn, "stamp", n)  # noqa: E731
        warm_up(enqueue, stamp_file)
        return pickup_loop(enqueue, args.tasks, stamp_file)
    finally:
        stop_workers(processes)


# django-tasks-db -------------------------------------------------------------------------------


def dtdb_setup():
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.peers.dtdb_settings"
    import django
    from django.core.management import call_command

    create_database(os.environ["DATABASE_URL"])
    django.setup()
    call_command("migrate", verbosity=0)
    from django_tasks_db.models import DBTaskResult

    DBTaskResult.objects.all().delete()
    return DBTaskResult


def dtdb_drain(args):
    from django.db import transaction

    results = dtdb_setup()
    from benchmarks.peers.dtdb_tasks import noop

    with transaction.atomic():
        for n in range(args.tasks):
            noop.enqueue(n)
    command = [sys.executable, "-m", "django", "db_worker", "--queue-name", "bench", "--batch"]
    command += ["--no-startup-delay", "--settings", "benchmarks.peers.dtdb_settings"]
    wait_all([start(command, f"dtdb-{n}") for n in range(args.workers)])
    from django.db.models import Count, Max, Min, Q

    row = results.objects.aggregate(
        first=Min("started_at"),
        last=Max("finished_at"),
        done=Count("id", filter=Q(status="SUCCESSFUL")),
    )
    return span(args.tasks, row["done"], row["first"], row["last"])


# procrastinate ---------------------------------------------------------------------------------


def procrastinate_drain(args):
    import psycopg

    create_database(args.database)
    from benchmarks.peers.procrastinate_app import app, noop

    with psycopg.connect(args.database, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()[0]
    if exists is None:
        with app.open():
            app.schema_manager.apply_schema()
    with psycopg.connect(args.database, autocommit=True) as conn:
        conn.execute("TRUNCATE procrastinate_jobs, procrastinate_events CASCADE")
    with app.open():
        noop.batch_defer(*({"n": n} for n in range(args.tasks)))
    command = [
        sys.executable,
        "-m",
        "procrastinate",
        "--app",
        "benchmarks.peers.procrastinate_app.app",
    ]
    command += ["worker", "--queues", "bench", "--concurrency", str(CONCURRENCY), "--one-shot"]
    wait_all([start(command, f"procrastinate-{n}") for n in range(args.workers)])
    with psycopg.connect(args.database) as conn:
        first, last, done = conn.execute(
            "SELECT min(at) FILTER (WHERE type = 'started'), max(at) FILTER (WHERE type = "
            "'succeeded'), count(*) FILTER (WHERE type = 'succeeded') FROM procrastinate_events"
        ).fetchone()
    return span(args.tasks, done, first, last)


# Celery ----------------------------------------------------------------------------------------


def celery_command(name: str):
    command = [sys.executable, "-m", "celery", "-A", "benchmarks.peers.celery_app", "worker"]
    return [*command, "-Q", "bench", "-c", str(CONCURRENCY), "-n", f"{name}@%h", "-l", "INFO"]


def celery_drain(args):
    from benchmarks.peers.celery_app import app, noop

    app.backend.client.flushdb()
    first_file = VAR / "celery-first"
    first_file.unlink(missing_ok=True)
    ids = [noop.apply_async((n,)).id for n in range(args.tasks)]
    env = {"PEERS_FIRST_FILE": str(first_file)}
    processes = [
        start(celery_command(f"drain{n}"), f"celery-{n}", env) for n in range(args.workers)
    ]
    keys = [app.backend.get_key_for_task(task_id) for task_id in ids]
    client = app.backend.client
    try:
        wait_for(lambda: client.exists(keys[-1]) and all(client.mget(keys)), 900, "Celery", 0.2)
    finally:
        stop_workers(processes)
    metas = [app.backend.decode(value) for value in client.mget(keys)]
    done = sum(meta["status"] == "SUCCESS" for meta in metas)
    last = max(datetime.fromisoformat(meta["date_done"]) for meta in metas).timestamp()
    first = min(float(line) for line in first_file.read_text().split())
    return {"rate": args.tasks / (last - first), "seconds": last - first, "done": done}


def celery_pickup(args, stamp_file):
    from benchmarks.peers.celery_app import app, stamp

    app.backend.client.flushdb()
    processes = [start(celery_command("pickup"), "celery-pickup")]
    try:
        enqueue = lambda n: stamp.apply_async((n,))  # noqa: E731
        warm_up(enqueue, stamp_file)
        return pickup_loop(enqueue, args.tasks, stamp_file)
    finally:
        stop_workers(processes)


# Helpers ---------------------------------------------------------------------------------------


def create_database(url):
    """Create the database ``url`` names, if missing (PostgreSQL)."""
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def span(count, done, first, last) -> dict:
    if done != count:
        raise RuntimeError(f"finished {done} of {count} tasks")
    seconds = (last - first).total_seconds()
    return {"rate": count / seconds, "seconds": seconds}


DRAINS = {
    "jobs": jobs_drain,
    "plain": plain_drain,
    "django-tasks-db": dtdb_drain,
    "procrastinate": procrastinate_drain,
    "celery": celery_drain,
}
PICKUPS = {"jobs": jobs_pickup, "plain": plain_pickup, "celery": celery_pickup}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=sorted(DRAINS))
    parser.add_argument("measurement", choices=["drain", "pickup"])
    parser.add_argument("--database", required=True)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--log-level", default="INFO", help="JOBS_LOG_LEVEL of jobs's worker")
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = args.database
    VAR.mkdir(parents=True, exist_ok=True)
    if args.measurement == "drain":
        result = DRAINS[args.kind](args)
    else:
        stamp_file = VAR / f"stamps-{args.kind}"
        stamp_file.unlink(missing_ok=True)
        os.environ[STAMP_FILE] = str(stamp_file)
        result = PICKUPS[args.kind](args, stamp_file)
    print(
        json.dumps(
            {key: value for key, value in result.items() if key in ("rate", "seconds", "ms")}
        )
    )


if __name__ == "__main__":
    main()
