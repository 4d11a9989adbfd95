"""Tasks of the demo product: contacts import, invitations, a report, and a prime count.

Written with Django's ``@task``: jobs is the backend (``settings.TASKS``), so its options
(``max_attempts``, ``timeout``, ``transient``), context (progress, steps, cancellation) and
``using(owner=..., summary=...)`` come with it.
"""

import csv
import io
import math
import time

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Count
from django.urls import reverse

from demo_project.demo import batches, cleanup
from demo_project.demo.imports import open_csv, read_rows
from demo_project.demo.models import Contact, Invitation, Organisation, Report, Upload
from jobs import PermanentError
from jobs.models import Workflow

try:  # Django 6: Django's own task API, stored and run by jobs (settings.TASKS)
    from django.tasks import task
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task

IMPORT_CHUNK = 100
MAX_ERRORS_SHOWN = 200  # broken rows listed to the owner; all are counted


def _pause(setting: str):
    # The demo paces its work so a person can watch the bar move; 0 in the test settings.
    seconds = getattr(settings, setting, 0)
    if seconds:
        time.sleep(seconds)


@task(takes_context=True, max_attempts=3, timeout=600)
def import_contacts(context, upload_id: int):
    """Import an uploaded CSV of contacts in recorded steps: validate once, then chunk by chunk.

    The file is streamed twice (a count and validation, then the import), a chunk of rows at a
    time, so memory stays flat however long the file. A retry skips the steps already done; a
    chunk re-run after a crash finds its contacts present (one per address and organisation)
    and creates none twice.
    """
    upload = Upload.objects.filter(pk=upload_id).first()
    if upload is None or not upload.file:
        raise PermanentError("The uploaded file is no longer available: please upload it again.")
    checked = context.step("validate", _validate, upload)
    total = checked["total"]

    imported = created = 0
    errors = list(checked["errors"])
    duplicate_count = 0
    context.progress(0, total, f"Imported 0 of {total:,} rows")
    for start, records in _chunks(upload):
        chunk = [[row.line, row.email, row.name] for row in records if not row.error]
        if chunk:
            outcome = context.step(
                f"import:{start}", _import_chunk, upload.organisation_id, upload.pk, chunk
            )
            created += outcome["created"]
            imported += len(chunk) - len(outcome["duplicates"])
            duplicate_count += len(outcome["duplicates"])
            errors.extend(outcome["duplicates"][: max(0, MAX_ERRORS_SHOWN - len(errors))])
        processed = start + len(records)
        context.progress(processed, total, f"Imported {processed:,} of {total:,} rows")
        _pause("DEMO_IMPORT_CHUNK_SECONDS")

    error_count = checked["error_count"] + duplicate_count
    message = f"Imported {imported:,} of {total:,} rows"
    if imported > created:  # a re-import: say what it added, not only what it read
        message += f": {created:,} new, {imported - created:,} already present"
    if error_count:
        message += f"; {error_count:,} broken {'row' if error_count == 1 else 'rows'} skipped"
    context.progress(total, total, message, force=True)
    context.mark_result_public()
    return {
        "total": total,
        "imported": imported,
        "created": created,
        "already_present": imported - created,
        "errors": sorted(errors, key=lambda error: error["line"])[:MAX_ERRORS_SHOWN],
        "error_count": error_count,  # all of them; "errors" lists the first MAX_ERRORS_SHOWN
        "filename": upload.filename,
    }


def _rows(upload: Upload):
    """Yield the rows of the upload's file, read from storage a little at a time."""
    with upload.file.open("rb") as binary:
        yield from read_rows(open_csv(upload.filename, binary))


def _chunks(upload: Upload):
    """Yield ``(index of the first record, records)`` for each IMPORT_CHUNK records."""
    records = []
    start = 0
    for row in _rows(upload):
        records.append(row)
        if len(records) == IMPORT_CHUNK:
            yield start, records
            start, records = start + IMPORT_CHUNK, []
    if records:
        yield start, records


def _validate(upload: Upload) -> dict:
    """Count the rows, and report the broken ones (the first MAX_ERRORS_SHOWN) by line."""
    total = error_count = 0
    errors = []
    for row in _rows(upload):
        total += 1
        if row.error:
            error_count += 1
            if len(errors) < MAX_ERRORS_SHOWN:
                errors.append({"line": row.line, "reason": row.error})
    return {"total": total, "errors": errors, "error_count": error_count}


def _import_chunk(organisation_id: int, upload_id: int, chunk: list) -> dict:
    """Create the chunk's contacts that do not exist yet; report repeats of earlier lines.

    Return ``{"created": n, "duplicates": [{"line", "reason"}]}``. A row whose address this
    upload already created at an earlier line is a duplicate; at its own line (a re-run of the
    chunk), it counts as created by this import.
    """
    emails = {email for _, email, _ in chunk}
    with transaction.atomic():
        present = {
            email: (upload, line)
            for email, upload, line in Contact.objects.filter(
                organisation_id=organisation_id, email__in=emails
            ).values_list("email", "upload_id", "line")
        }
        new, duplicates, created = [], [], 0
        for line, email, name in chunk:
            origin = present.get(email)
            if origin is None:
                new.append(
                    Contact(
                        organisation_id=organisation_id,
                        email=email,
                        name=name,
                        upload_id=upload_id,
                        line=line,
                    )
                )
                present[email] = (upload_id, line)
            elif origin[0] == upload_id and origin[1] != line:
                duplicates.append({"line": line, "reason": f"duplicate of line {origin[1]}"})
            elif origin[0] == upload_id:
                created += 1  # created by an earlier run of this very chunk
        # ignore_conflicts: a concurrent run of the same chunk (a rescued task) is harmless too.
        Contact.objects.bulk_create(new, ignore_conflicts=True)
    return {"created": created + len(new), "duplicates": duplicates}


@task(takes_context=True, max_attempts=3)
def report_import_batch(context, workflow_id: str):
    """Tell the owner of a multi-file import what each file did: one e-mail, one notification.

    The ``on_finish`` callback of the batch ``views.start_import`` makes (``demo.batches``).
    Once per completion of the batch: a retry of this task sends nothing twice, and a batch
    whose failed files were run again (``jobs.retry_workflow``) reports its new outcome.
    """
    finished_at = (
        Workflow.objects.filter(pk=workflow_id).values_list("finished_at", flat=True).first()
    )
    stamp = finished_at.isoformat() if finished_at else ""
    return context.once(f"import-batch:{workflow_id}:{stamp}", batches.report, workflow_id).result


@task(takes_context=True, max_attempts=5, transient=(OSError,))
def send_invites(context, organisation_id: int, emails: list, invited_by_id: int | None = None):
    """E-mail an invitation to each address, at most once per (organisation, e-mail)."""
    organisation = Organisation.objects.get(pk=organisation_id)
    sent = 0
    for done, email in enumerate(emails, start=1):
        outcome = context.once(
            f"invite:{organisation_id}:{email.lower()}",
            _invite,
            organisation,
            email.lower(),
            invited_by_id,
        )
        sent += outcome.ran
        message = f"Sent {sent:,} of {len(emails):,} invitations"
        if done > sent:  # "Sent 0 of 2" alone reads like a failure; they were sent before
            message += f": {done - sent:,} already invited"
        context.progress(done, len(emails), message)
    context.mark_result_public()
    return {"sent": sent, "already_invited": len(emails) - sent}


def _invite(organisation, email, invited_by_id):
    # Recorded with the effect marker in one transaction (see jobs.execution.effects.once).
    Invitation.objects.create(organisation=organisation, email=email, invited_by_id=invited_by_id)
    send_mail(
        subject=f"You are invited to {organisation.name}",
        message=f"Hello,\n\n{organisation.name} invites you to join them on the jobs demo.\n",
        from_email=None,
        recipient_list=[email],
    )


@task(takes_context=True, max_attempts=3, timeout=900)
def build_report(context, organisation_id: int, owner_id: int, sections: int = 20):
    """Build a CSV of the organisation's contacts by e-mail domain, section by section."""
    organisation = Organisation.objects.get(pk=organisation_id)
    by_domain = {}
    for email in Contact.objects.filter(organisation=organisation).values_list("email", flat=True):
        domain = email.rpartition("@")[2]
        by_domain[domain] = by_domain.get(domain, 0) + 1
    for section in range(sections):
        # Each progress write is also a cancellation checkpoint.
        context.progress(section, sections, f"Building section {section + 1} of {sections}")
        _pause("DEMO_REPORT_SECTION_SECONDS")
    context.check_cancelled()

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["domain", "contacts"])
    writer.writerows(sorted(by_domain.items(), key=lambda item: (-item[1], item[0])))
    writer.writerow(["total", sum(by_domain.values())])
    invited = Invitation.objects.filter(organisation=organisation).aggregate(n=Count("pk"))["n"]
    writer.writerow(["invitations sent", invited])

    def save():
        filename = f"contacts-report-{context.task.pk.hex[:8]}.csv"
        report = Report(owner_id=owner_id, filename=filename, task_id=context.task.pk)
        report.file.save(filename, ContentFile(out.getvalue().encode()), save=False)
        report.save()
        return report.pk

    report_id = context.once(f"report:{context.task.pk}", save).result
    context.progress(sections, sections, "Report ready", force=True)
    context.mark_result_public()
    return {
        "url": reverse("report-download", args=[report_id]),
        "label": "Download the report (CSV)",
        "domains": len(by_domain),
    }


@task(takes_context=True, max_attempts=3)
def count_primes(context, limit: int):
    """Count the primes below ``limit``, reporting progress as it goes."""
    if not isinstance(limit, int) or limit < 2 or limit > 5_000_000:
        raise PermanentError("Please choose a number between 2 and 5,000,000.")
    found = 0
    step = max(1, limit // 100)
    for number in range(2, limit):
        if all(number % d for d in range(2, math.isqrt(number) + 1)):
            found += 1
        if number % step == 0:
            context.progress(number, limit, f"Checked {number:,} of {limit:,} numbers")
    context.progress(limit, limit, f"Found {found:,} primes below {limit:,}", force=True)
    context.mark_result_public()
    return {"limit": limit, "primes": found}


@task(max_attempts=3)
def clean_up_files():
    """Delete uploads and reports older than DEMO_FILES_KEEP_SECONDS (hourly: JOBS_SCHEDULES)."""
    return cleanup.clean_up_files()
