"""The dashboard's tables and sentences as rows of plain-text cells: one source for the page and
for its live updates (``jobs.admin.live``), so that both say the same thing in the same words.

A cell is a dict: ``text``, and optionally ``href`` (a link the admin built), ``title`` (shown
on hover), ``code`` (set in monospace) and ``num`` (a right-aligned figure). The template
escapes each text; ``static/jobs/admin/live.js`` sets it as text.
"""

from urllib.parse import urlencode

from django.urls import reverse
from django.utils import dateformat, timezone
from django.utils.text import Truncator

from jobs import metrics
from jobs.humanize import moment_text, seconds_text
from jobs.metrics import waiting
from jobs.states import Status

MESSAGE_SHOWN = 120  # characters of a failure's latest message


def cell(text, *, href="", title="", code=False, num=False) -> dict:
    """Return one cell; ``text`` is made a string (counts are numbers)."""
    return {"text": str(text), "href": href, "title": title, "code": code, "num": num}


def tables(snap: metrics.Snapshot, held: waiting.HeldByKeys) -> dict[str, list[list[dict]]]:
    """Return the dashboard's tables but the queues', by the id of their body on the page."""
    return {
        "workers": [_worker(worker) for worker in snap.workers],
        "failures": [_failure(group) for group in snap.failures],
        "waiting_too_long": [_late(task) for task in snap.waiting_too_long],
        "running_too_long": [_late(task) for task in snap.running_too_long],
        "held_keys": [
            [
                cell(key.shown, code=True),
                cell(key.waiting, num=True),
                cell(f"{key.running} of {key.limit}", num=True),
            ]
            for key in held.keys
        ],
    }


def held_text(held: waiting.HeldByKeys) -> str:
    """Say how many due tasks their concurrency keys hold."""
    keys = len(held.keys)
    return (
        f"{held.held} due task{_s(held.held)} held by {keys} key{_s(keys)} at "
        f"{'its' if keys == 1 else 'their'} limit (not waiting for a worker: a free worker "
        "would not take them)."
    )


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _moment(at, pattern: str) -> str:
    # The template's |date filter: the moment in the current time zone.
    return dateformat.format(timezone.localtime(at), pattern)


def _queues_text(worker: metrics.WorkerStatus) -> str:
    """A worker's queues, each with its cap in this worker (``--queues imports:2``), if any."""
    caps = worker.queue_caps
    return (
        ", ".join(
            f"{queue} (at most {caps[queue]} at once)" if queue in caps else queue
            for queue in worker.queues
        )
        or "all"
    )


def _worker(worker: metrics.WorkerStatus) -> list[dict]:
    return [
        cell(worker.id, code=True),
        cell(_queues_text(worker)),
        cell(f"{worker.busy_processes} of {worker.concurrency}", num=True),
        cell(worker.running_tasks, num=True),
        cell(worker.running, num=True),
        cell(f"{seconds_text(worker.heartbeat_age)} ago"),
        cell(moment_text(worker.started_at)),
    ]


def _failure(group: metrics.FailureGroup) -> list[dict]:
    filters = urlencode({"name": group.name, "status__exact": Status.FAILED})
    return [
        cell(group.name, href=f"{reverse('admin:jobs_task_changelist')}?{filters}"),
        cell(group.exception or "—", code=True),
        cell(group.count, num=True),
        cell(
            _moment(group.last_failed_at, "H:i:s"),
            href=reverse("admin:jobs_task_change", args=[group.last_task_id]),
        ),
        cell(Truncator(group.last_message).chars(MESSAGE_SHOWN)),
    ]


def _late(task: metrics.LateTask) -> list[dict]:
    return [
        cell(task.name, href=reverse("admin:jobs_task_change", args=[task.id])),
        cell(task.queue),
        cell(task.status),
        cell(seconds_text(task.seconds)),
    ]
