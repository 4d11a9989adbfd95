"""Metrics in the Prometheus text format, computed from the database at each scrape.

Every web process exports the same numbers because they live in the database, not in process
memory: no multiprocess directory, no push gateway. Metric names (documented in the README):

- ``jobs_tasks{queue,status}``: tasks in the table.
- ``jobs_oldest_waiting_seconds{queue}``: age of the longest-due waiting task (0 if none).
- ``jobs_task_run_seconds{queue}`` and ``jobs_task_wait_seconds{queue}``: histograms of run and
  wait times of the tasks finished in the last ``JOBS_METRICS_WINDOW_SECONDS``. They describe
  that window (a gauge histogram: ``_bucket``, ``_gcount``, ``_gsum``), so read them with
  ``histogram_quantile`` directly, not through ``rate()``.
- ``jobs_task_retries_total``, ``jobs_task_failures_total``, ``jobs_task_rescues_total``
  ``{queue}``: counters kept in the database (``jobs.metrics.counters``); pruning never lowers them.
- ``jobs_live_workers``: workers that sent a heartbeat within a lease; ``jobs_queue_paused``,
  ``jobs_task_type_paused{name}``.
"""

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
)

# Seconds; wide, since tasks range from a mail (sub-second) to a report (many minutes).
from jobs import metrics
from jobs.maintenance import pausing
from jobs.metrics import counters

RUN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600)
WAIT_BUCKETS = (0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 4 * 3600)


class JobsCollector:
    """A prometheus-client collector that reads ``jobs.metrics`` when scraped."""

    def __init__(self, *, now=None):
        self.now = now  # tests pin the clock; a scrape uses the current time

    def collect(self):
        counts = metrics.status_counts()
        tasks = GaugeMetricFamily(
            "jobs_tasks", "Tasks by queue and status.", labels=["queue", "status"]
        )
        for queue, by_status in sorted(counts.items()):
            for status, n in sorted(by_status.items()):
                tasks.add_metric([queue, status], n)
        yield tasks

        oldest = metrics.oldest_waiting(now=self.now)
        waiting = GaugeMetricFamily(
            "jobs_oldest_waiting_seconds",
            "Seconds the longest-due waiting task of the queue has waited (0 if none waits).",
            labels=["queue"],
        )
        for queue in sorted(counts.keys() | oldest.keys()):
            waiting.add_metric([queue], oldest.get(queue, 0.0))
        yield waiting

        yield self._histogram(
            "jobs_task_run_seconds",
            "Run time (start to finish of the last attempt) of tasks finished in the window.",
            "started_at",
            "finished_at",
            RUN_BUCKETS,
        )
        yield self._histogram(
            "jobs_task_wait_seconds",
            "Wait (due to started) of tasks finished in the window.",
            "run_after",
            "started_at",
            WAIT_BUCKETS,
        )

        totals = counters.totals()
        for event, name, text in (
            (counters.RETRIED, "jobs_task_retries", "Attempts that failed and were retried."),
            (counters.FAILED, "jobs_task_failures", "Tasks that ended failed."),
            (counters.RESCUED, "jobs_task_rescues", "Tasks taken back from a vanished worker."),
        ):
            family = CounterMetricFamily(name, text, labels=["queue"])
            for queue, value in sorted(totals.get(event, {}).items()):
                family.add_metric([queue], value)
            yield family

        workers = GaugeMetricFamily(
            "jobs_live_workers", "Workers that sent a heartbeat within a lease."
        )
        workers.add_metric([], len(metrics.live_workers(now=self.now)))
        yield workers

        paused = GaugeMetricFamily(
            "jobs_queue_paused", "1 if the queue is paused.", labels=["queue"]
        )
        for queue in sorted(pausing.paused_queues()):
            paused.add_metric([queue], 1)
        yield paused

        types = GaugeMetricFamily(
            "jobs_task_type_paused", "1 if the task type is paused.", labels=["name"]
        )
        for name in sorted(pausing.paused_task_types()):
            types.add_metric([name], 1)
        yield types

    def _histogram(self, name, text, start, end, bounds):
        family = GaugeHistogramMetricFamily(name, text, labels=["queue"])
        found = metrics.duration_histograms(start, end, bounds, now=self.now)
        for queue, (cumulative, total, count) in sorted(found.items()):
            buckets = [(str(float(b)), n) for b, n in zip(bounds, cumulative, strict=True)]
            family.add_metric([queue], [*buckets, ("+Inf", count)], gsum_value=total)
        return family


def render(*, now=None) -> bytes:
    """Return every jobs metric in the Prometheus text exposition format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobsCollector(now=now))
    return generate_latest(registry)
