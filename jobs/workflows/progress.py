"""A workflow's progress, counted from its members: "7 of 10 done, 1 failed".

The one place that counts a workflow (the status view, the admin, the dashboard and the demo
read it here): one grouped COUNT over the members' partial index (jobs_task_workflow_idx).
A workflow may name its members and what is done to them (``wording``, given to
``jobs.batch``/``jobs.chain`` and stored on its row): "7 of 10 files imported, 1 failed".
"""

import unicodedata
import uuid
from dataclasses import dataclass

from django.db.models import Count

from jobs.exceptions import PayloadError
from jobs.models import Task, Workflow
from jobs.states import Status

MEMBER = "member"
DEFAULT_VERB = "done"
WORD_LIMIT = 40  # characters of the noun, its plural and the verb (the columns' max_length)


def wording(noun=None, verb=None) -> tuple[str, str, str]:
    """Check how a workflow's progress names its members; return (noun, plural, verb).

    ``noun``: "file" (plural "files", an "s" added) or a pair ("child", "children"); none: the
    text says "7 of 10 done". ``verb``: "imported" (default "done"). A value that is not text,
    is empty, holds a control character or a surrogate, or is over 40 characters is refused
    with ``PayloadError``, at the call, before anything is written.
    """
    if noun is None or noun == "":
        singular = plural = ""
    elif isinstance(noun, str):
        singular = _word(noun, "noun")
        plural = _word(singular + "s", "noun")
    elif isinstance(noun, (tuple, list)) and len(noun) == 2:
        singular, plural = _word(noun[0], "noun"), _word(noun[1], "plural noun")
    else:
        raise PayloadError(
            f'noun must be text ("file") or a pair ("child", "children"), not {noun!r:.80}.'
        )
    return singular, plural, _word(DEFAULT_VERB if verb is None else verb, "verb")


def _word(value, what: str) -> str:
    if not isinstance(value, str):
        raise PayloadError(f"The {what} of a workflow's progress must be text, not {value!r:.80}.")
    value = value.strip()
    if not value:
        raise PayloadError(f"The {what} of a workflow's progress cannot be empty.")
    if len(value) > WORD_LIMIT:
        raise PayloadError(
            f"The {what} of a workflow's progress is {len(value):,} characters long; "
            f"at most {WORD_LIMIT} fit: {value[:40]!r}…"
        )
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cs")), None)
    if bad is not None:
        raise PayloadError(
            f"The {what} of a workflow's progress holds the character {bad!r}, "
            f"which it cannot show: {value!r:.80}."
        )
    return value


@dataclass(frozen=True)
class Progress:
    """How far the members of one workflow have got (callbacks not counted)."""

    total: int
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    running: int = 0
    waiting: int = 0  # pending, retrying, or blocked behind another member
    noun: str = ""  # "file"; none: "7 of 10 done"
    noun_plural: str = ""  # "files"
    verb: str = DEFAULT_VERB  # "imported"

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
    def unit(self) -> str:
        """What the members are and what is done to them, in the number of the total:
        "files imported", "file imported" (a total of 1), "done" (no noun)."""
        noun = self.noun if self.total == 1 else self.noun_plural
        return f"{noun} {self.verb}" if noun else self.verb

    @property
    def text(self) -> str:
        """ "7 of 10 done, 1 failed"; in a workflow's own words "7 of 10 files imported, 1
        failed". "done" counts every finished member; a verb of the workflow's own counts those
        it is true of, the members that succeeded (a failed file was not imported)."""
        counted = self.done if self.verb == DEFAULT_VERB else self.succeeded
        parts = [f"{counted:,} of {self.total:,} {self.unit}"]
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
            "unit": self.unit,
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
    if isinstance(workflow, Workflow):
        total, noun, noun_plural, verb = (
            workflow.total, workflow.noun, workflow.noun_plural, workflow.verb
        )  # fmt: skip
    else:
        row = Workflow.objects.filter(pk=workflow_id).values_list(
            "total", "noun", "noun_plural", "verb"
        )
        total, noun, noun_plural, verb = row.first() or (0, "", "", DEFAULT_VERB)
    return Progress(
        total=total or sum(counts.values()),
        noun=noun,
        noun_plural=noun_plural,
        verb=verb or DEFAULT_VERB,
        succeeded=counts.get(Status.SUCCEEDED, 0),
        failed=counts.get(Status.FAILED, 0),
        cancelled=counts.get(Status.CANCELLED, 0),
        running=counts.get(Status.RUNNING, 0),
        waiting=sum(counts.get(s, 0) for s in (Status.PENDING, Status.RETRYING, Status.BLOCKED)),
    )
