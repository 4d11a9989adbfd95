"""Enqueueing a task that waits: for its dependencies (``depends_on``), or as a workflow's
link or callback. The row is written ``blocked``, its dependencies recorded, and, if they have
all finished already, decided at once, all in one transaction.
"""

from dataclasses import dataclass

from django.db import router, transaction

from jobs.exceptions import PayloadError
from jobs.models import Task, TaskDependency
from jobs.states import Status
from jobs.workflows import settling


@dataclass(frozen=True)
class Place:
    """Where a task stands in a workflow: its workflow's id, its role ("member" or a
    callback's), whether it waits even without dependencies (a callback), and whether it
    receives its dependencies' results (a chain's link)."""

    workflow_id: object
    role: str = "member"
    blocked: bool = False
    passes_result: bool = False


def create_waiting(task, payload, payload_text, unique, place: Place | None) -> Task:
    """Write ``task`` (its ``depends_on``, ``on_dependency_failure``) as a blocked row; return
    it, released or cancelled already if its dependencies had all finished.

    A dependency must exist and be the same owner's, or nobody's (a task may not wait on, nor
    receive the result of, another user's): an id that is neither is refused as unknown, and
    nothing is written. The dependencies are locked first (id order), so an outcome recorded
    meanwhile either sees this task's dependency, or has committed before it is read here.
    Cycles cannot be made: a task depends only on tasks that existed before it.
    """
    from jobs.tasks.enqueueing import (  # a cycle: via jobs.backends
        call_enqueue_hooks,
        create_task,
        enqueue_hooks,
        row_fields,
    )

    fields = row_fields(task)
    if place is not None:
        fields.update(workflow=place.workflow_id, workflow_role=place.role)
    owner = fields.get("owner")
    owner_id = getattr(owner, "pk", None) if getattr(owner, "is_authenticated", False) else None
    ids = list(task.depends_on)
    policy = task.on_dependency_failure or TaskDependency.OnFailure.CANCEL
    using = router.db_for_write(Task)
    with transaction.atomic(using=using):
        found = dict(
            Task.objects.using(using)
            .select_for_update()
            .filter(pk__in=ids)
            .order_by("pk")
            .values_list("pk", "owner_id")
        )
        for dependency_id in ids:
            if dependency_id not in found or found[dependency_id] not in (None, owner_id):
                raise PayloadError(
                    f"depends_on: there is no task {dependency_id} that this task may wait for."
                )
        row = create_task(
            payload=payload,
            payload_text=payload_text,
            unique=unique,
            **{**fields, "status": Status.BLOCKED},
        )
        if not row.created:  # an idempotency or unique key's task: it keeps its own waits
            return row
        passes = place is not None and place.passes_result
        TaskDependency.objects.using(using).bulk_create(
            TaskDependency(task_id=row.pk, depends_on_id=d, on_failure=policy, passes_result=passes)
            for d in ids
        )
        if ids:
            Task.objects.using(using).filter(pk__in=ids, has_dependents=False).update(
                has_dependents=True
            )
        if ids or place is None or not place.blocked:  # decided now if all have finished
            now = row.created_at
            settling.settle(settling.settle_waiting([row.pk], now=now), now=now)
            row.refresh_from_db()
    if enqueue_hooks and row.status == Status.PENDING:  # released at once: due like any enqueue
        call_enqueue_hooks([row])
    return row
