"""Two kinds of the same drain, interleaved run by run: the main of a comparing benchmark.

``benchmarks/django_drain.py`` (Django's ``@task`` against ``@jobs.task``) and
``benchmarks/flow_control.py`` (concurrency keys against none) each say what their two kinds are;
this module drains them, the kinds interleaved so that both see the same machine, and reports
the rates, the CPU the worker used per task (steadier than the rate on a shared machine) and the
ratio of the second kind to the first, run by run.
"""

import argparse
import os
import resource
import statistics
import sys
from collections.abc import Callable

from benchmarks.workers import Report, drain, setup_django, vendor


def children_cpu_seconds() -> float:
    """User and system CPU time of the ended processes this one started, and theirs (the
    worker's children are waited for by it)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def compare(
    doc: str, kinds_of: Callable[[argparse.Namespace], dict], *, runs: int, target: str,
    add_arguments: Callable[[argparse.ArgumentParser], object] = lambda parser: None,
):  # fmt: skip
    """Parse the command line, drain each kind ``--runs`` times, print the report.

    ``kinds_of(args)`` returns ``{name: {"task": ..., "enqueue": ..., "env": ...}}``, two kinds
    or more, the reference first (the keywords of ``benchmarks.workers.drain``): the ratio is
    the second's to the reference's, and each further kind's is reported beside it.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--runs", type=int, default=runs, help="runs of each kind, interleaved")
    parser.add_argument("--tasks", type=int, default=10_000, help="no-op tasks to drain")
    parser.add_argument("--concurrency", type=int, default=4, help="children of the worker")
    parser.add_argument("--log-level", default="INFO", help="JOBS_LOG_LEVEL of the worker")
    add_arguments(parser)
    args = parser.parse_args()
    if not args.database:
        sys.exit("Name a database: --database postgres://... or sqlite:///path")
    setup_django(args.database)
    print(f"{vendor()}, {os.cpu_count()} cpus, {args.runs} runs, log level {args.log_level}\n")
    kinds = kinds_of(args)
    rates: dict[str, list[float]] = {kind: [] for kind in kinds}
    cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(args.runs):
        for kind, options in kinds.items():
            before = children_cpu_seconds()
            result = drain(args.tasks, 1, args.concurrency, args.log_level, **options)
            rates[kind].append(result["rate"])
            cpu[kind].append((children_cpu_seconds() - before) / args.tasks * 1e6)
    report = Report()
    for kind, values in rates.items():
        report.add(
            f"drain {args.tasks:,} no-op tasks, {kind}, 1 worker x {args.concurrency}",
            values,
            "tasks/s",
        )
    for kind, values in cpu.items():
        report.add(f"worker CPU per task, {kind}", values, "µs")
    reference, other, *more = kinds
    ratios = [o / r for r, o in zip(rates[reference], rates[other], strict=True)]
    report.add(f"{other} / {reference}, run by run", ratios, "", target, "{:.2f}")
    for kind in more:  # the kinds beyond the second: each against the reference too
        theirs = [o / r for r, o in zip(rates[reference], rates[kind], strict=True)]
        report.add(f"{kind} / {reference}, run by run", theirs, "", "", "{:.2f}")
    print(f"\nmedian ratio {statistics.median(ratios):.2f}")
    print("\n" + report.markdown())
