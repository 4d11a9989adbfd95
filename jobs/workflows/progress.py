"""A workflow's progress, counted from its members: "7 of 10 done, 1 failed".

The one place that counts a workflow (the status view, the admin, the dashboard and the demo
read it here): one grouped COUNT over the members' partial index (jobs_task_workflow_idx).
"""

import uuid
from dataclasses import dataclass

from django.db.models import Count

from jobs.models import Task, Workflow
from jobs.states import Status

MEMBER = "member"


@dataclass(frozen=True)
class Progress:
    """How far the members of one workflow have got (callbacks not counted)."""

    total: int
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    running: int = 0
    waiting: int = 0  # pending, retrying, or blocked behind another member

    @property
    def done(self) -> int:
        return self.succeeded + self.failed + self.cancelled

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    @property
    def percent(self) -> int:
        return 100 if not self.total else min(100, round(100 * self.done / self.total))

    @property
    def text(self) -> str:
        """ "7 of 10 done, 1 failed": for the person waiting."""
        parts = [f"{self.done:,} of {self.total:,} done"]
        if self.failed:
            parts.append(f"{self.failed:,} failed")
        if self.cancelled:
            parts.append(f"{self.cancelled:,} cancelled")
        return ", ".join(parts)

    def as_dict(self) -> dict:
        return {
            "total": self.total,
            "done": self.done,
            Status.SUCCEEDED.value: self.succeeded,
            Status.FAILED.value: self.failed,
            Status.CANCELLED.value: self.cancelled,
            Status.RUNNING.value: self.running,
            "waiting": self.waiting,
            "percent": self.percent,
            "text": self.text,
        }


def progress(workflow: "Workflow | uuid.UUID | str") -> Progress:
    """The progress of ``workflow`` (a ``Workflow`` or its id), counted now."""
    workflow_id = workflow.pk if isinstance(workflow, Workflow) else workflow
    counts = dict(
        Task.objects.filter(workflow_id=workflow_id, workflow_role=MEMBER)
        .order_by()
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    total = getattr(workflow, "total", None)
    if total is None:
        total = Workflow.objects.filter(pk=workflow_id).values_list("total", flat=True).first()
    return Progress(
        total=total or sum(counts.values()),
        succeeded=counts.get(Status.SUCCEEDED, 0),
        failed=counts.get(Status.FAILED, 0),
        cancelled=counts.get(Status.CANCELLED, 0),
        running=counts.get(Status.RUNNING, 0),
        waiting=sum(counts.get(s, 0) for s in (Status.PENDING, Status.RETRYING, Status.BLOCKED)),
    )
