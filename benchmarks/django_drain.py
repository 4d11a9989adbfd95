"""Drain no-op tasks declared with Django's ``@task`` beside the same body with ``@jobs.task``.

    .venv/bin/python benchmarks/django_drain.py --database postgres://root@127.0.0.1:5432/jobs_perf_bench
    .venv/bin/python benchmarks/django_drain.py --database sqlite:///$PWD/var/bench.sqlite3

Drains ``--tasks`` queued no-op tasks with one ``runworker --burst`` (``--concurrency``
children), once per kind in each run, the kinds interleaved so that both see the same machine;
``--runs`` runs, medians and min..max. Django's own signal receivers stay connected (its log
lines are written at ``--log-level``), as in a project. Also the CPU time the worker (supervisor
and children) used per task: steadier than the rate on a shared machine.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.comparison import compare  # noqa: E402 (the path)


def enqueue_django(count: int):
    """Queue ``count`` calls of ``benchmarks.tasks.django_noop`` in bulk: Django has no bulk
    enqueue, jobs' task object has (``enqueue_many``), rows as its backend stores them (due at
    their creation, ``run_after == created_at``: not deferred to Django's API)."""
    from benchmarks import tasks

    tasks.django_noop.enqueue_many([(n,) for n in range(count)])


def main():
    compare(
        __doc__,
        lambda args: {
            "@jobs.task": {"task": "noop"},
            "Django's @task": {"task": "django_noop", "enqueue": enqueue_django},
        },
        runs=5,
        target="≥ 0.90",
    )


if __name__ == "__main__":
    main()
