"""Benchmark the worker side: enqueue, drain, pickup latency, mixed load, memory, big tables.

    .venv/bin/python benchmarks/workers.py --database postgres://root@127.0.0.1:5432/jobs_perf_bench
    .venv/bin/python benchmarks/workers.py --database sqlite:///$PWD/var/bench.sqlite3

The database is created (PostgreSQL) and migrated if needed, and its task table is emptied
between measurements: use a database of its own. Workers are real ``manage.py runworker``
processes (each a supervisor with its child processes), started with ``benchmarks.settings``.
Every measurement runs ``--runs`` times; the median and the spread (min..max) are printed, then
a table in Markdown for the README. ``--only drain,pickup`` picks measurements.
"""

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.memory import MemorySampler  # noqa: E402 (after the path is set)

MEASUREMENTS = ["enqueue", "drain", "pickup", "mixed", "memory", "table"]


# Set-up ----------------------------------------------------------------------------------------


def setup_django(url: str):
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    os.environ.setdefault("ALLOWED_HOSTS", "localhost")
    if url.startswith(("postgres://", "postgresql://")):
        from benchmarks.dashboard import create_database

        create_database(url)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def vendor() -> str:
    from django.db import connection

    return connection.vendor


def empty():
    from django.db import connection

    tables = "jobs_task, jobs_worker, jobs_queuepause"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"TRUNCATE {tables} CASCADE")
        else:
            for table in tables.split(", "):
                cursor.execute(f"DELETE FROM {table}")


def start_workers(
    count: int, *, concurrency: int, burst: bool, log_level: str, env: dict | None = None
) -> list:
    env = {**os.environ, "JOBS_LOG_LEVEL": log_level, "PYTHONUNBUFFERED": "0", **(env or {})}
    log_dir = ROOT / "var"
    log_dir.mkdir(exist_ok=True)
    command = [sys.executable, str(ROOT / "manage.py"), "runworker", "--queues", "bench"]
    command += ["--concurrency", str(concurrency)]
    if burst:
        command.append("--burst")
    processes = []
    for n in range(count):
        log = open(log_dir / f"bench-worker-{n}.log", "ab")  # noqa: SIM115 (closed with the run)
        processes.append(subprocess.Popen(command, env=env, stdout=log, stderr=log, cwd=ROOT))
    return processes


def stop_workers(processes, timeout=60):
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_for(predicate, timeout: float, what: str, step=0.005):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(step)


def wait_idle_workers(count: int):
    from jobs.models import Worker

    wait_for(lambda: Worker.objects.filter(stopped_at=None).count() >= count, 60, "workers")
    time.sleep(0.5)  # past the first claim and heartbeat: idle, listening


def finished_count() -> int:
    from jobs.models import Task

    return Task.objects.filter(status__in=["succeeded", "failed"]).count()


# Measurements ----------------------------------------------------------------------------------


def enqueue_one(count: int) -> float:
    from django.db import transaction

    from benchmarks.tasks import noop

    empty()
    started = time.perf_counter()
    for n in range(count):
        with transaction.atomic():  # as a request would: its own transaction
            noop.enqueue(n)
    return count / (time.perf_counter() - started)


def enqueue_bulk(count: int) -> float:
    from benchmarks.tasks import noop

    empty()
    started = time.perf_counter()
    noop.enqueue_many([(n,) for n in range(count)])
    return count / (time.perf_counter() - started)


def drain(
    count: int, workers: int, concurrency: int, log_level: str, task="noop", enqueue=None,
    env=None,
):  # fmt: skip
    """Run ``count`` queued tasks with ``workers`` runworker processes; return rate and memory.

    ``enqueue(count)`` queues them, if given (by default ``task.enqueue_many``); ``env``: more
    environment for the workers."""
    from django.db.models import Max, Min

    from benchmarks import tasks
    from jobs.models import Task

    empty()
    if enqueue is None:
        getattr(tasks, task).enqueue_many([(n,) for n in range(count)])
    else:
        enqueue(count)
    processes = start_workers(
        workers, concurrency=concurrency, burst=True, log_level=log_level, env=env
    )
    sampler = MemorySampler(processes)
    sampler.start()
    try:
        for process in processes:
            process.wait(600)
    finally:
        sampler.done.set()
        sampler.join()
        stop_workers(processes)
    done = finished_count()
    if done != count:
        raise RuntimeError(f"drain finished {done} of {count} tasks")
    span = Task.objects.aggregate(first=Min("started_at"), last=Max("finished_at"))
    seconds = (span["last"] - span["first"]).total_seconds()
    return {"rate": count / seconds, "seconds": seconds, "rss": sampler.peak_rss,
            "pss": sampler.peak_pss}  # fmt: skip


def pickup(count: int, log_level: str, window=None) -> tuple[float, float]:
    """Enqueue-to-start latency (p50, p95, in ms) with an idle worker, tasks 20 ms apart.

    ``window``, a context manager, is entered once the worker is idle and left when the last
    task is done (benchmarks/transports.py counts the worker's statements in it)."""
    from benchmarks.tasks import noop
    from jobs.models import Task

    empty()
    processes = start_workers(1, concurrency=4, burst=False, log_level=log_level)
    try:
        wait_idle_workers(1)
        with window or contextlib.nullcontext():
            next_at = time.monotonic()
            for n in range(count):
                noop.enqueue(n)
                next_at += 0.02
                time.sleep(max(0.0, next_at - time.monotonic()))
            wait_for(lambda: finished_count() >= count, 60, "pickup tasks")
    finally:
        stop_workers(processes)
    waits = sorted(
        (started - created).total_seconds() * 1000
        for created, started in Task.objects.values_list("created_at", "started_at")
    )
    return percentile(waits, 50), percentile(waits, 95)


def mixed(count: int, workers: int, concurrency: int, log_level: str) -> dict:
    """Tasks that sleep 50 ms: measured throughput as a share of the ideal one."""
    result = drain(count, workers, concurrency, log_level, task="sleep50")
    ideal = workers * concurrency / 0.05
    return {"rate": result["rate"], "ideal": ideal, "share": result["rate"] / ideal}


def fill_finished(rows: int):
    """Add ``rows`` succeeded tasks (spread over the last 30 days) to the task table."""
    from django.db import connection

    from benchmarks.tasks import noop
    from jobs.models import Task

    template = noop.enqueue(0).record
    Task.objects.filter(pk=template.pk).update(status="succeeded", attempts=1)
    columns = [field.column for field in Task._meta.concrete_fields]
    step = 30 * 86400 / max(rows, 1)
    if connection.vendor == "postgresql":
        series = f"generate_series(1, {int(rows)}) AS s(i)"
        new_id = "gen_random_uuid()"
        at = f"now() - s.i * interval '{step} seconds'"
    else:
        series = f"(WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {int(rows)}) SELECT i FROM s) AS s"  # noqa: E501
        new_id = "lower(hex(randomblob(16)))"
        at = f"strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (s.i * {step}) || ' seconds')"
    values = {"id": new_id, "created_at": at, "updated_at": at, "started_at": at,
              "finished_at": at, "run_after": at}  # fmt: skip
    select = ", ".join(values.get(column, f"t.{column}") for column in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO jobs_task ({', '.join(columns)}) SELECT {select} "
            f"FROM jobs_task AS t, {series} WHERE t.id = %s",
            [template.pk.hex if connection.vendor == "sqlite" else template.pk],
        )
        if connection.vendor == "postgresql":
            cursor.execute("VACUUM ANALYZE jobs_task")
        else:
            cursor.execute("ANALYZE")


def table(rows: int, runs: int) -> dict:
    """Claim time (100 tasks per claim) next to ``rows`` finished tasks, and the dashboard."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from benchmarks.tasks import noop
    from jobs import metrics
    from jobs.worker import claiming

    empty()
    fill_finished(rows)
    noop.enqueue_many([(n,) for n in range(100 * (runs + 1))])
    claims = []
    for _ in range(runs + 1):
        started = time.perf_counter()
        claimed, _ = claiming.claim_and_record("bench:claim", 100, [], lease_seconds=60)
        claims.append((time.perf_counter() - started) * 1000)
        assert len(claimed) == 100, len(claimed)
    user, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    pages, snapshots = [], []
    for _ in range(runs + 1):
        started = time.perf_counter()
        assert client.get("/admin/jobs/task/dashboard/").status_code == 200
        pages.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        metrics.snapshot()
        snapshots.append((time.perf_counter() - started) * 1000)
    # The first of each is a warm-up.
    return {"claim": claims[1:], "dashboard": pages[1:], "snapshot": snapshots[1:]}


# Reporting -------------------------------------------------------------------------------------


def percentile(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * p / 100
    low, high = int(k), min(int(k) + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (k - low)


class Report:
    def __init__(self):
        self.rows = []

    def add(self, what, values, unit, target="", fmt="{:,.0f}"):
        median = statistics.median(values)
        spread = f"{fmt.format(min(values))} .. {fmt.format(max(values))}"
        self.rows.append((what, fmt.format(median), spread, unit, target))
        print(f"{what:48} {fmt.format(median):>10} {spread:>22} {unit:8} {target}", flush=True)

    def markdown(self):
        lines = [
            "| what | median | min .. max | unit | target |",
            "| --- | ---: | ---: | --- | --- |",
        ]
        lines += [f"| {' | '.join(row)} |" for row in self.rows]
        return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--runs", type=int, default=5, help="runs per measurement")
    parser.add_argument("--only", default=",".join(MEASUREMENTS), help="measurements to run")
    parser.add_argument("--enqueue-one", type=int, default=2000, help="tasks, one at a time")
    parser.add_argument("--enqueue-bulk", type=int, default=100_000, help="tasks in bulk")
    parser.add_argument("--drain", type=int, default=20_000, help="no-op tasks to drain")
    parser.add_argument("--concurrency", type=int, default=4, help="children per worker (drain)")
    parser.add_argument("--pickup", type=int, default=200, help="tasks, 20 ms apart")
    parser.add_argument("--mixed", type=int, default=4000, help="50 ms tasks, 2 workers x 20")
    parser.add_argument("--rows", default="1000,1000000", help="finished rows for claim cost")
    parser.add_argument("--log-level", default="INFO", help="JOBS_LOG_LEVEL of the workers")
    args = parser.parse_args()
    if not args.database:
        sys.exit("Name a database: --database postgres://... or sqlite:///path")
    setup_django(args.database)
    only = set(args.only.split(","))
    runs = args.runs
    report = Report()
    print(f"{vendor()}, {os.cpu_count()} cpus, {runs} runs, log level {args.log_level}\n")
    if "enqueue" in only:
        report.add(
            "enqueue one at a time (own transaction)",
            [enqueue_one(args.enqueue_one) for _ in range(runs)],
            "tasks/s",
            "≥ 2,500",
        )
        report.add(
            "enqueue in bulk (enqueue_many)",
            [enqueue_bulk(args.enqueue_bulk) for _ in range(runs)],
            "tasks/s",
            "≥ 100,000",
        )
    level = args.log_level
    memory = []
    if "drain" in only or "memory" in only:
        for workers in (1, 2):
            if "drain" not in only and workers == 2:
                continue
            results = [drain(args.drain, workers, args.concurrency, level) for _ in range(runs)]
            if workers == 1:
                memory = results
            if "drain" in only:
                target = "≥ 10,000" if workers == 2 else ""
                report.add(
                    f"drain {args.drain:,} no-op tasks, {workers} worker(s) x {args.concurrency}",
                    [r["rate"] for r in results],
                    "tasks/s",
                    target,
                )
    if memory and "memory" in only:
        mib = 2**20
        report.add(
            f"memory, 1 worker x {args.concurrency}: peak PSS of all",
            [r["pss"] / mib for r in memory],
            "MiB",
            "< 70",
            "{:.1f}",
        )
        report.add(
            f"memory, 1 worker x {args.concurrency}: peak RSS of all",
            [r["rss"] / mib for r in memory],
            "MiB",
            "",
            "{:.1f}",
        )
    if "pickup" in only:
        results = [pickup(args.pickup, level) for _ in range(runs)]
        report.add(
            "pickup latency p50 (idle worker)", [r[0] for r in results], "ms", "≤ 3", "{:.1f}"
        )
        report.add(
            "pickup latency p95 (idle worker)", [r[1] for r in results], "ms", "≤ 5", "{:.1f}"
        )
    if "mixed" in only:
        results = [mixed(args.mixed, 2, 20, level) for _ in range(runs)]
        report.add(
            "mixed: 50 ms tasks, 2 workers x 20, share of ideal",
            [r["share"] * 100 for r in results],
            "%",
            "≥ 90",
            "{:.0f}",
        )
    if "table" in only:
        for rows in (int(value) for value in args.rows.split(",")):
            result = table(rows, runs)
            report.add(
                f"claim 100 tasks beside {rows:,} finished", result["claim"], "ms", "flat", "{:.1f}"
            )
            report.add(
                f"dashboard page, {rows:,} finished", result["dashboard"], "ms", "", "{:.0f}"
            )
            report.add(
                f"metrics.snapshot, {rows:,} finished", result["snapshot"], "ms", "", "{:.0f}"
            )
        empty()
    print("\n" + report.markdown())


if __name__ == "__main__":
    main()
