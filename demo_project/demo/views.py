"""Pages of the demo product: start work, watch it, fetch what it made."""

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

import jobs
from demo_project.demo import batches, tasks
from demo_project.demo.forms import MAX_FILES, InviteForm, PrimeForm, ReportForm, UploadForm
from demo_project.demo.models import Contact, Invitation, Report, Upload, organisation_for
from jobs.models import Task
from jobs.text import clean_text
from jobs.web.views import visible_task
from jobs.web.workflow_views import visible_workflow
from jobs.workflows.progress import MEMBER


@login_required
def home(request):
    organisation = organisation_for(request.user)
    context = {
        "organisation": organisation,
        "contact_count": Contact.objects.filter(organisation=organisation).count(),
        "contacts": Contact.objects.filter(organisation=organisation).order_by("-created_at")[:10],
        "invitations": Invitation.objects.filter(organisation=organisation)[:10],
        "upload_form": UploadForm(),
        "invite_form": InviteForm(),
        "report_form": ReportForm(),
        "prime_form": PrimeForm(),
        "tasks": Task.objects.owned_by(request.user)[:5],
    }
    return render(request, "demo/home.html", context)


@login_required
@require_POST
def start_import(request):
    """Import the uploaded files: one file is one task, several are one batch of them."""
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, " ".join(form.errors["file"]))
        return redirect("home")
    uploads = [_stored(request, file) for file in form.cleaned_data["file"]]
    if len(uploads) == 1:
        task = tasks.import_contacts.using(
            owner=request.user, summary=f"Import of {uploads[0].filename}"
        ).enqueue(uploads[0].pk)
        return redirect("task-detail", task.id)
    # One bar and one e-mail for all: each file's task tells nobody itself (notify_owner).
    workflow = jobs.batch(
        [
            tasks.import_contacts.using(summary=f"Import of {upload.filename}").s(upload.pk)
            for upload in uploads
        ],
        on_finish=tasks.report_import_batch.using(
            summary=f"E-mail about the import of {len(uploads)} files"
        ).s(),
        owner=request.user,
        summary=f"Import of {len(uploads)} files",
        noun="file",
        verb="imported",  # "7 of 10 files imported, 1 failed"
    )
    return redirect("import-batch", workflow.pk)


def _stored(request, file) -> Upload:
    return Upload.objects.create(
        owner=request.user,
        organisation=organisation_for(request.user),
        filename=clean_text(file.name, 255),  # as shown: no NUL or surrogate reaches the row
        content_type=clean_text(file.content_type or "", 100),
        file=file,  # saved to storage in chunks, never read whole
    )


@login_required
def import_batch(request, workflow_id):
    """Return the page of a multi-file import: one bar for the batch, a line per file."""
    workflow = visible_workflow(request.user, workflow_id)  # 404 but to its owner and viewers
    members = Task.objects.filter(workflow=workflow, workflow_role=MEMBER)[:MAX_FILES]
    ordered = sorted(members, key=lambda task: (batches.upload_id(task) or 0, str(task.pk)))
    context = {"workflow": workflow, "members": ordered}
    return render(request, "demo/import_batch.html", context)


@login_required
@require_POST
def start_invites(request):
    form = InviteForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(form.errors["emails"]))
        return redirect("home")
    emails = form.cleaned_data["emails"]
    organisation = organisation_for(request.user)
    count = len(emails)
    task = tasks.send_invites.using(
        owner=request.user, summary=f"Invitations to {count} {'person' if count == 1 else 'people'}"
    ).enqueue(organisation.pk, emails, request.user.pk)
    return redirect("task-detail", task.id)


@login_required
@require_POST
def start_report(request):
    form = ReportForm(request.POST)
    sections = form.cleaned_data["sections"] if form.is_valid() else 20
    organisation = organisation_for(request.user)
    task = tasks.build_report.using(
        owner=request.user, summary=f"Contacts report of {organisation.name}"
    ).enqueue(organisation.pk, request.user.pk, sections)
    return redirect("task-detail", task.id)


@login_required
@require_POST
def start_primes(request):
    form = PrimeForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Please choose a number between 2 and 5,000,000.")
        return redirect("home")
    limit = form.cleaned_data["limit"]
    task = tasks.count_primes.using(owner=request.user, summary=f"Primes below {limit:,}").enqueue(
        limit
    )
    return redirect("task-detail", task.id)


@login_required
def task_list(request):
    """Return the "my tasks" page: the user's tasks, newest first, each with a live bar."""
    # Under a minute timesince says "0 minutes": "just now" reads better.
    context = {
        "tasks": Task.objects.owned_by(request.user)[:50],
        "a_minute_ago": timezone.now() - timedelta(minutes=1),
    }
    return render(request, "demo/tasks.html", context)


@login_required
def task_detail(request, task_id):
    task = visible_task(request.user, task_id)  # 404 for anyone but the owner and staff
    return render(request, "demo/task_detail.html", {"task": task})


@login_required
def report_download(request, report_id):
    report = Report.objects.filter(pk=report_id, owner=request.user).first()
    if report is None:
        raise Http404("No such report.")
    if not report.file:
        raise Http404("This report was cleaned up: please build it again.")
    try:
        with report.file.open("rb") as content:  # a report is a few lines of counts
            response = HttpResponse(content.read(), content_type="text/csv; charset=utf-8")
    except FileNotFoundError:
        raise Http404("This report was cleaned up: please build it again.") from None
    response["Content-Disposition"] = f'attachment; filename="{report.filename}"'
    return response
