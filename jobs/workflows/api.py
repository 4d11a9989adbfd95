"""The workflow API: ``jobs.chain``, ``jobs.batch``, and actions on a workflow as a whole."""

import logging
import uuid
from itertools import groupby

from django.db import router, transaction
from django.utils import timezone

from jobs import transitions
from jobs.exceptions import PayloadError
from jobs.models import Task, Workflow
from jobs.tasks.definition import Call, JobsTask
from jobs.text import clean_text
from jobs.workflows import settling
from jobs.workflows.progress import wording
from jobs.workflows.waiting import Place

logger = logging.getLogger(__name__)

# Members written per INSERT; a batch's members go in with enqueue_many's statement.
BATCH_SIZE = 5000


def chain(*calls, owner=None, summary: str = "", noun=None, verb=None) -> Workflow:
    """Enqueue ``calls`` (``task.s(...)``; or one list of them) to run one after the other.

    Each link runs once the previous one has succeeded, and receives its result as its first
    argument (``task.si(...)``: it does not). A link that fails (its attempts used up) or is
    cancelled cancels the links after it, each with a reason naming it. ``owner`` and
    ``summary``: the workflow's, and each link's where the call sets none. ``noun`` and
    ``verb``: how its progress names the links ("2 of 3 steps done"; ``progress.wording``).
    Returns the workflow (``jobs.workflows.progress`` counts its links).
    """
    words = wording(noun, verb)
    from jobs.tasks.enqueueing import hooks_deferred  # app registry (jobs.backends: a cycle)

    links = _calls(calls, "chain")
    if not links:
        raise PayloadError("A chain needs at least one task.")
    using = router.db_for_write(Task)
    with hooks_deferred(), transaction.atomic(using=using):
        workflow = _workflow(Workflow.Kind.CHAIN, owner, summary, len(links), words)
        previous = None
        for call in links:
            task = _with_owner(call.task, owner, summary)
            if previous is None:
                place = Place(workflow.pk)
            else:
                task = task.using(depends_on=[previous, *task.depends_on])
                place = Place(workflow.pk, passes_result=call.receives)
            previous = _store(task, call.args, call.kwargs, place)
    return workflow


def batch(
    calls,
    *,
    on_success=None,
    on_failure=None,
    on_finish=None,
    owner=None,
    summary: str = "",
    noun=None,
    verb=None,
) -> Workflow:
    """Enqueue ``calls`` (``task.s(...)``) as one batch; return the workflow.

    The members run as any tasks do, in parallel. Once every one has finished, ``on_finish``
    runs; then ``on_success`` if all succeeded, else ``on_failure`` (the other is cancelled,
    "Not run"). Each callback runs exactly once: it is enqueued now, ``blocked``, and the
    transaction recording the last member's outcome releases it (``jobs.workflows.settling``).
    A callback made with ``.s()`` receives the batch's id as its first argument. A batch of no
    members has finished at once: it succeeded. ``noun`` and ``verb`` name the members in its
    progress: ``noun="file", verb="imported"`` says "7 of 10 files imported, 1 failed"
    (default "7 of 10 done, 1 failed"); a bad one raises ``PayloadError`` here.
    """
    words = wording(noun, verb)
    calls = _calls(calls, "batch")
    callbacks = {
        role: call
        for role, call in (
            ("on_success", on_success),
            ("on_failure", on_failure),
            ("on_finish", on_finish),
        )
        if call is not None
    }
    for role, call in callbacks.items():
        if not isinstance(call, Call):
            raise PayloadError(f"{role} must be a task call (task.s(...)), not {call!r:.80}.")
    # The app registry (jobs.backends: a cycle).
    from jobs.tasks.enqueueing import enqueue_many, hooks_deferred

    using = router.db_for_write(Task)
    with hooks_deferred(), transaction.atomic(using=using):
        workflow = _workflow(Workflow.Kind.BATCH, owner, summary, len(calls), words)
        for role, call in callbacks.items():
            args = (str(workflow.pk), *call.args) if call.receives else call.args
            task = _with_owner(call.task, owner, summary)
            _store(task, args, call.kwargs, Place(workflow.pk, role=role, blocked=True))
        # Consecutive calls of one task with the same options go in together, thousands a
        # statement (enqueue_many); a call it does not take (a key, dependencies) alone.
        for task, group in groupby(calls, key=lambda call: call.task):
            task = _with_owner(task, owner, summary)
            same = list(group)
            if _bulk(task):
                enqueue_many(
                    task,
                    [(call.args, call.kwargs) for call in same],
                    batch_size=BATCH_SIZE,
                    workflow_id=workflow.pk,
                    workflow_role=settling.MEMBER,
                )
            else:
                for call in same:
                    _store(task, call.args, call.kwargs, Place(workflow.pk))
        if not calls:
            transitions.lock_workflow(workflow.pk)
            settling.settle(settling.complete(workflow.pk, now=timezone.now()), now=timezone.now())
    workflow.refresh_from_db()
    return workflow


def cancel_workflow(workflow, *, by=None) -> transitions.CancelCounts:
    """Cancel a workflow as a whole: its waiting tasks and callbacks at once, its running ones
    at their next checkpoint; it ends ``cancelled``, and no callback runs. ``by``: who asked.
    An id no workflow has (or one that is no UUID) raises ``Workflow.DoesNotExist``."""
    workflow_id = _workflow_id(workflow)
    now = timezone.now()
    with transaction.atomic(using=router.db_for_write(Task)):
        _lock_existing(workflow_id, now)
        transitions.cancel_workflow_record(workflow_id, now=now)
        counts = transitions.cancel_many(Task.objects.filter(workflow_id=workflow_id), by=by)
    logger.info("workflow cancelled workflow_id=%s tasks=%s", workflow_id, counts)
    return counts


def retry_workflow(workflow) -> int:
    """Run a workflow's failed and cancelled members again (those that succeeded are kept);
    return how many. A batch's callbacks wait again, to run at its next completion as its new
    outcome says; a chain's links after a retried one wait for it again. An id no workflow has
    (or one that is no UUID) raises ``Workflow.DoesNotExist``."""
    workflow_id = _workflow_id(workflow)
    now = timezone.now()
    with transaction.atomic(using=router.db_for_write(Task)):
        _lock_existing(workflow_id, now)
        members = Task.objects.filter(
            workflow_id=workflow_id, workflow_role=settling.MEMBER, status__in=settling.ENDED_BADLY
        )
        # A member cancelled because a dependency failed waits for it again: blocked, not
        # pending, so a chain runs in order; the others are requeued.
        waiting = set(
            members.filter(dependencies__isnull=False).values_list("pk", flat=True).distinct()
        )
        retried = transitions.requeue_many(members.exclude(pk__in=waiting), now=now)
        retried += transitions.rearm_many(Task.objects.filter(pk__in=waiting), now=now)
        transitions.reopen_workflows([workflow_id], now=now)
        callbacks = Task.objects.filter(workflow_id=workflow_id).exclude(
            workflow_role=settling.MEMBER
        )
        transitions.rearm_many(callbacks, now=now)
    logger.info("workflow retried workflow_id=%s members=%d", workflow_id, retried)
    return retried


def _workflow_id(workflow) -> uuid.UUID:
    """The id of ``workflow`` (a row or an id); a malformed id is as absent as an unknown one,
    as for a task (``jobs.backends``' ``get_result``)."""
    workflow_id = getattr(workflow, "pk", workflow)
    try:
        return workflow_id if isinstance(workflow_id, uuid.UUID) else uuid.UUID(str(workflow_id))
    except ValueError:
        raise Workflow.DoesNotExist(f"No workflow has the id {workflow_id!r:.80}.") from None


def _lock_existing(workflow_id, now):
    # The lock is the lookup: an action on a workflow that is not there must say so rather
    # than count nothing done.
    if not transitions.lock_workflow(workflow_id, now=now):
        raise Workflow.DoesNotExist(f"No workflow has the id {str(workflow_id)!r}.")


def _calls(calls, shape: str) -> list[Call]:
    if shape == "chain" and len(calls) == 1 and not isinstance(calls[0], Call):
        calls = calls[0]  # chain([a.s(), b.s()]): one list of them
    if isinstance(calls, Call):  # batch(task.s(1)): one call where a list of them was due
        raise PayloadError(f"A {shape} takes a list of task calls: [{calls!r:.80}].")
    try:
        calls = list(calls)
    except TypeError:
        raise PayloadError(
            f"A {shape} takes task calls (task.s(...)), not {calls!r:.80}."
        ) from None
    for number, call in enumerate(calls):
        if not isinstance(call, Call):
            raise PayloadError(
                f"A {shape}'s tasks are calls, task.s(...): item {number} is {call!r:.80}."
            )
    return calls


def _workflow(kind, owner, summary, total, words) -> Workflow:
    if owner is not None and not getattr(owner, "is_authenticated", False):
        owner = None  # an anonymous visitor owns nothing
    noun, noun_plural, verb = words
    return Workflow.objects.create(
        kind=kind,
        owner=owner,
        summary=clean_text(summary or "", 255),
        total=total,
        noun=noun,
        noun_plural=noun_plural,
        verb=verb,
    )


def _with_owner(task: JobsTask, owner, summary) -> JobsTask:
    options = {}
    if task.owner is None and owner is not None:
        options["owner"] = owner
    if not task.summary and summary:
        options["summary"] = summary
    return task.using(**options) if options else task


def _bulk(task: JobsTask) -> bool:
    return not task.depends_on and task.idempotency_key is None and task.resolved_unique() is None


def _store(task: JobsTask, args, kwargs, place: Place) -> Task:
    from jobs.tasks.enqueueing import backend_of  # jobs' models: app registry

    return backend_of(task).store(task, args, kwargs, with_result=False, workflow=place)[0]
