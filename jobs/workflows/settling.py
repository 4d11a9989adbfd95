"""What an outcome releases: the tasks waiting for it, and its workflow's completion.

Called by ``jobs.transitions`` in the transaction that records a task's final status (every
path: a success written by the supervisor or a child, a failure, a cancellation, an expiry, a
rescue that used up the attempts), with the rows that something waits for. Nothing here writes
a status: it decides, and ``jobs.transitions`` applies, each a guarded UPDATE.

Two outcomes finishing at once take turns where it matters (PostgreSQL; SQLite has one
writer): the tasks waiting for them are locked (``FOR UPDATE``, in id order) before their
dependencies' statuses are read, and a workflow's row before its members are, so the second
reads the first's committed outcome (READ COMMITTED gives each statement a fresh snapshot) and
exactly one of them sees the last member finished. A callback leaves ``blocked`` once: its
release is an UPDATE guarded by that status, made under the workflow's lock.

A cascade (a failed link cancelling the rest of its chain) is walked as a loop over the tasks
each step finished, not a recursion, so a chain of any length settles in one transaction.
"""

import logging

from jobs import transitions
from jobs.models import Task, TaskDependency, Workflow
from jobs.states import TERMINAL, Status

logger = logging.getLogger(__name__)

MEMBER = "member"
CALLBACK_ROLES = ("on_success", "on_failure", "on_finish")
UNFINISHED = sorted({Status.PENDING, Status.RETRYING, Status.RUNNING, Status.BLOCKED})
ENDED_BADLY = (Status.FAILED, Status.CANCELLED)
_CHUNK = 500  # ids per statement (SQLite caps a statement's parameters)


def settle(rows, *, now):
    """Settle what waits for ``rows``: ``(id, workflow_id, workflow_role, has_dependents)``
    of tasks that just reached a final status, in the caller's transaction."""
    frontier = list(rows)
    while frontier:
        finished: list[tuple] = []
        with_dependents = [row[0] for row in frontier if row[3]]
        if with_dependents:
            finished += _settle_dependents(with_dependents, now)
        workflows = sorted({row[1] for row in frontier if row[1] is not None and row[2] == MEMBER})
        for workflow_id in workflows:
            finished += _complete_if_done(workflow_id, now)
        frontier = [row for row in finished if row[1] is not None or row[3]]


def waiting_on(task_ids) -> list:
    """The ids of the blocked tasks that depend on any of ``task_ids``."""
    waiting: set = set()
    ids = list(task_ids)
    for start in range(0, len(ids), _CHUNK):
        edges = TaskDependency.objects.filter(depends_on_id__in=ids[start : start + _CHUNK])
        waiting.update(edges.values_list("task_id", flat=True))
    return sorted(waiting)


def _settle_dependents(task_ids, now) -> list[tuple]:
    """Release or cancel the blocked tasks waiting for ``task_ids`` whose dependencies have all
    finished; return the rows cancelled (they settle in turn)."""
    return settle_waiting(waiting_on(task_ids), now=now)


def settle_waiting(task_ids, *, now) -> list[tuple]:
    """Decide the blocked tasks ``task_ids`` whose dependencies have all finished: release
    them, or cancel them when one failed or was cancelled and their policy says so; return the
    rows cancelled, as ``settle`` takes them. Also called by an enqueue, for a task whose
    dependencies finished before it was written."""
    if not task_ids:
        return []
    release: list = []
    passed: dict = {}
    cancel: dict = {}
    ids = sorted(task_ids)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        # Locked before the dependencies are read: see the module's docstring.
        locked = list(
            Task.objects.select_for_update()
            .filter(pk__in=chunk, status=Status.BLOCKED)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        if not locked:
            continue
        edges = TaskDependency.objects.filter(task_id__in=locked).order_by("pk")
        by_task: dict = {}
        for edge in edges.values_list(
            "task_id", "depends_on_id", "depends_on__name", "depends_on__status",
            "on_failure", "passes_result",
        ):  # fmt: skip
            by_task.setdefault(edge[0], []).append(edge)
        for task_id in locked:
            verdict = _verdict(by_task.get(task_id, []))
            if verdict is None:
                continue
            if isinstance(verdict, str):
                cancel[task_id] = verdict
                continue
            release.append(task_id)
            if verdict:
                passed[task_id] = verdict
    results = _results(passed)
    moved: list[tuple] = []
    if cancel:
        transitions.cancel_blocked(cancel, now=now, moved_rows=moved)
    if release:
        transitions.unblock_many(release, now=now, passed=results)
    return moved


def _verdict(edges):
    """None: still waiting. A message: cancel, with it as the reason. Otherwise the ids of the
    dependencies whose results the task receives (empty: none): release."""
    if any(status not in TERMINAL for _, _, _, status, _, _ in edges):
        return None
    for _, dependency_id, name, status, policy, _ in edges:
        if status in ENDED_BADLY and policy == TaskDependency.OnFailure.CANCEL:
            what = status if status == Status.FAILED else f"was {status}"
            return f"Cancelled: it depended on {name} ({dependency_id}), which {what}."
    return [dependency_id for _, dependency_id, _, _, _, passes in edges if passes]


def _results(passed: dict) -> dict:
    """By task id, the results of the dependencies it receives, in their order."""
    wanted = sorted({dependency for dependencies in passed.values() for dependency in dependencies})
    if not wanted:
        return {}
    found = dict(Task.objects.filter(pk__in=wanted).values_list("pk", "result"))
    return {task_id: [found.get(d) for d in deps] for task_id, deps in passed.items()}


def _complete_if_done(workflow_id, now) -> list[tuple]:
    """If every member of the workflow has finished, record its outcome and release or cancel
    its callbacks; return the callback rows cancelled (they settle in turn)."""
    if not transitions.lock_workflow(workflow_id, now=now):
        return []  # deleted
    members = Task.objects.filter(workflow_id=workflow_id, workflow_role=MEMBER)
    if members.filter(status__in=UNFINISHED).exists():
        return []
    return complete(workflow_id, now=now)


def complete(workflow_id, *, now) -> list[tuple]:
    """Record the outcome of a workflow whose members have all finished (its row locked) and
    release or cancel its callbacks; the rows cancelled, as ``settle`` takes them."""
    state = Workflow.objects.filter(pk=workflow_id).values_list("status", flat=True).first()
    members = Task.objects.filter(workflow_id=workflow_id, workflow_role=MEMBER)
    failed = members.filter(status__in=ENDED_BADLY).exists()
    outcome = Workflow.State.FAILED if failed else Workflow.State.SUCCEEDED
    if state == Workflow.State.RUNNING:
        transitions.finish_workflow(workflow_id, outcome, now=now)
        logger.info("workflow finished workflow_id=%s outcome=%s", workflow_id, outcome)
    callbacks = dict(
        Task.objects.filter(workflow_id=workflow_id, status=Status.BLOCKED)
        .exclude(workflow_role=MEMBER)
        .values_list("workflow_role", "pk")
    )
    if not callbacks:
        return []
    run = {"on_finish"} | ({"on_failure"} if failed else {"on_success"})
    if state == Workflow.State.CANCELLED:
        run = set()
    release = [pk for role, pk in callbacks.items() if role in run]
    word = "was cancelled" if state == Workflow.State.CANCELLED else outcome
    reasons = {
        pk: f"Not run: the batch {word}." for role, pk in callbacks.items() if role not in run
    }
    moved: list[tuple] = []
    if reasons:
        transitions.cancel_blocked(reasons, now=now, moved_rows=moved)
    if release:
        transitions.unblock_many(release, now=now)
    return moved
