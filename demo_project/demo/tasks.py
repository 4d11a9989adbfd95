"""Tasks of the demo product: contacts import, invitations, a report, and a prime count."""

import csv
import io
import math
import time

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Count
from django.urls import reverse

from demo_project.demo.imports import decode_csv, parse_contacts
from demo_project.demo.models import Contact, Invitation, Organisation, Report, Upload
from jobs import PermanentError, task

IMPORT_CHUNK = 100


def _pause(setting: str):
    # The demo paces its work so a person can watch the bar move; 0 in the test settings.
    seconds = getattr(settings, setting, 0)
    if seconds:
        time.sleep(seconds)


@task(takes_context=True, queue="default", max_attempts=3, timeout=600)
def import_contacts(context, upload_id: int):
    """Import an uploaded CSV of contacts in recorded steps: validate once, then chunk by chunk.

    A retry skips the steps already done; a chunk re-run after a crash finds its contacts
    present (one per address and organisation) and creates none twice.
    """
    upload = Upload.objects.filter(pk=upload_id).first()
    if upload is None:
        raise PermanentError("The uploaded file is no longer available: please upload it again.")
    # Parsing is pure and quick, so every attempt redoes it rather than storing the rows on the
    # task: step results should stay small (counts, ids), as a retry reads them back.
    parsed = parse_contacts(decode_csv(upload.filename, upload.data))
    rows, total = parsed["rows"], parsed["total"]
    errors_by_line = sorted(error["line"] for error in parsed["errors"])
    checked = context.step("validate", _validation_report, parsed)

    processed = created = 0
    context.progress(0, total, f"Imported 0 of {total:,} rows")
    for start in range(0, len(rows), IMPORT_CHUNK):
        chunk = rows[start : start + IMPORT_CHUNK]
        created += context.step(f"import:{start}", _import_chunk, upload.organisation_id, chunk)
        # Broken rows up to this chunk's last line count as processed too.
        last_line = chunk[-1][0]
        processed = start + len(chunk) + sum(1 for line in errors_by_line if line <= last_line)
        context.progress(processed, total, f"Imported {processed:,} of {total:,} rows")
        _pause("DEMO_IMPORT_CHUNK_SECONDS")

    imported = len(rows)
    message = f"Imported {imported:,} of {total:,} rows"
    if checked["error_count"]:
        count = checked["error_count"]
        message += f"; {count:,} broken {'row' if count == 1 else 'rows'} skipped"
    context.progress(total, total, message, force=True)
    context.mark_result_public()
    return {
        "total": total,
        "imported": imported,
        "created": created,
        "already_present": imported - created,
        "errors": checked["errors"],
        "error_count": checked["error_count"],
        "filename": upload.filename,
    }


def _validation_report(parsed: dict) -> dict:
    """Return what the owner is shown about broken rows (the first 200 of them) and counts."""
    return {
        "total": parsed["total"],
        "valid": len(parsed["rows"]),
        "errors": parsed["errors"][:200],
        "error_count": len(parsed["errors"]),
    }


def _import_chunk(organisation_id: int, chunk: list) -> int:
    """Create the contacts of ``chunk`` that do not exist yet; return how many were created."""
    emails = [email for _, email, _ in chunk]
    with transaction.atomic():
        present = set(
            Contact.objects.filter(organisation_id=organisation_id, email__in=emails).values_list(
                "email", flat=True
            )
        )
        new = [
            Contact(organisation_id=organisation_id, email=email, name=name)
            for _, email, name in chunk
            if email not in present
        ]
        # ignore_conflicts: a concurrent run of the same chunk (a rescued task) is harmless too.
        Contact.objects.bulk_create(new, ignore_conflicts=True)
    return len(new)


@task(takes_context=True, queue="default", max_attempts=5, transient=(OSError,))
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
        context.progress(done, len(emails), f"Sent {sent:,} of {len(emails):,} invitations")
    context.mark_result_public()
    return {"sent": sent, "already_invited": len(emails) - sent}


def _invite(organisation, email, invited_by_id):
    # Recorded with the effect marker in one transaction (see jobs.effects.once).
    Invitation.objects.create(organisation=organisation, email=email, invited_by_id=invited_by_id)
    send_mail(
        subject=f"You are invited to {organisation.name}",
        message=f"Hello,\n\n{organisation.name} invites you to join them on the jobs demo.\n",
        from_email=None,
        recipient_list=[email],
    )


@task(takes_context=True, queue="default", max_attempts=3, timeout=900)
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
        report = Report.objects.create(
            owner_id=owner_id,
            filename=f"contacts-report-{context.task.pk.hex[:8]}.csv",
            content=out.getvalue(),
        )
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
