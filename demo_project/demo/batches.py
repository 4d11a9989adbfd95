"""Several contacts files at once: one batch, one bar, and one e-mail once all are imported.

The view makes the batch (``views.start_import``): an ``import_contacts`` member per file, and
``tasks.report_import_batch`` as its ``on_finish`` callback. The members tell nobody on their
own (``notifications.notify_owner`` skips batch members); the callback reads each member's
outcome from its row, the import's result or its error, and writes the owner one e-mail and
one notification.
"""

from dataclasses import dataclass, field

from django.core.mail import send_mail

from demo_project.demo.models import Notification, Upload
from jobs.models import Task, Workflow
from jobs.states import Status
from jobs.web.views import status_text
from jobs.workflows.progress import MEMBER

SKIPPED_SHOWN = 20  # skipped rows listed per file in the e-mail; the others are counted


@dataclass(frozen=True)
class FileOutcome:
    """What the import of one file of the batch did."""

    filename: str
    status: str
    created: int = 0
    already_present: int = 0
    skipped: list = field(default_factory=list)  # [{"line", "reason"}], the first ones
    skipped_count: int = 0
    detail: str = ""  # why it failed, or who cancelled it

    @property
    def text(self) -> str:
        """The file's paragraph of the e-mail."""
        if self.status == Status.FAILED:
            return f"{self.filename}: failed: {self.detail}"
        if self.status == Status.CANCELLED:
            return f"{self.filename}: {self.detail[:1].lower()}{self.detail[1:]}"
        if self.status != Status.SUCCEEDED:
            return f"{self.filename}: not finished ({self.status})"
        text = f"{self.filename}: {self.created:,} {_plural(self.created, 'contact')} added"
        if self.already_present:
            text += f" ({self.already_present:,} already present)"
        if not self.skipped_count:
            return text + "; no rows skipped."
        text += f"; {self.skipped_count:,} {_plural(self.skipped_count, 'row')} skipped:"
        shown = self.skipped[:SKIPPED_SHOWN]
        lines = [f"  line {row['line']}: {row['reason']}" for row in shown]
        if self.skipped_count > len(shown):
            lines.append(f"  and {self.skipped_count - len(shown):,} more")
        return "\n".join([text, *lines])


def outcomes(workflow_id) -> list[FileOutcome]:
    """Each member's outcome, in the order the files were uploaded."""
    members = list(Task.objects.filter(workflow_id=workflow_id, workflow_role=MEMBER))
    upload_ids = {upload_id(task) for task in members}
    names = dict(Upload.objects.filter(pk__in=upload_ids).values_list("pk", "filename"))
    members.sort(key=lambda task: (upload_id(task) or 0, str(task.pk)))
    found = []
    for task in members:
        # The upload may be gone (cleaned up): its task's summary still names it.
        name = names.get(upload_id(task)) or task.summary.removeprefix("Import of ")
        result = task.result if task.status == Status.SUCCEEDED else None
        if isinstance(result, dict):
            found.append(
                FileOutcome(
                    filename=name,
                    status=task.status,
                    created=result.get("created", 0),
                    already_present=result.get("already_present", 0),
                    skipped=result.get("errors", []),
                    skipped_count=result.get("error_count", 0),
                )
            )
        else:
            found.append(FileOutcome(name, task.status, detail=status_text(task)))
    return found


def report(workflow_id) -> dict:
    """E-mail the batch's owner what each file added and skipped; leave one notification."""
    workflow = Workflow.objects.select_related("owner").get(pk=workflow_id)
    files = outcomes(workflow.pk)
    failed = sum(f.status == Status.FAILED for f in files)
    cancelled = sum(f.status == Status.CANCELLED for f in files)
    created = sum(f.created for f in files)
    skipped = sum(f.skipped_count for f in files)
    what = workflow.summary or f"Import of {len(files)} files"
    headline = f"{what} is done"
    if failed or cancelled:
        # "Import of 3 files finished, 1 of 3 files failed and 1 cancelled"
        ended = [f"{failed:,} failed"] if failed else []
        ended += [f"{cancelled:,} cancelled"] if cancelled else []
        of = f"of {len(files):,} {_plural(len(files), 'file')}"
        ended[0] = ended[0].replace(" ", f" {of} ", 1)
        headline = f"{what} finished, {' and '.join(ended)}"
    totals = (
        f"{created:,} {_plural(created, 'contact')} added, "
        f"{skipped:,} {_plural(skipped, 'row')} skipped"
    )
    owner = workflow.owner
    if owner is not None:
        Notification.objects.create(
            user=owner,
            text=f"{headline}: {totals}."[:500],
            succeeded=not (failed or cancelled),
            cancelled=bool(cancelled and not failed),
        )
    sent = bool(owner is not None and owner.email)
    if sent:
        body = "\n\n".join(
            [f"Hello {owner.get_username()},", f"{headline}: {totals}."] + [f.text for f in files]
        )
        send_mail(
            subject=headline, message=body + "\n", from_email=None, recipient_list=[owner.email]
        )
    return {
        "files": len(files),
        "failed": failed,
        "cancelled": cancelled,
        "created": created,
        "skipped": skipped,
        "mailed": sent,
    }


def upload_id(task: Task):
    args = (task.payload or {}).get("args") or [None]
    return args[0] if isinstance(args[0], int) else None


def _plural(n: int, word: str) -> str:
    return word if n == 1 else f"{word}s"
