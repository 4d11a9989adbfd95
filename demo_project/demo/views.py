"""Pages of the demo product: start work, watch it, fetch what it made."""

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from demo_project.demo import tasks
from demo_project.demo.forms import InviteForm, PrimeForm, ReportForm, UploadForm
from demo_project.demo.models import Contact, Invitation, Report, Upload, organisation_for
from jobs.models import Task
from jobs.web.views import visible_task


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
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, " ".join(form.errors["file"]))
        return redirect("home")
    file = form.cleaned_data["file"]
    upload = Upload.objects.create(
        owner=request.user,
        organisation=organisation_for(request.user),
        filename=file.name[:255],
        content_type=(file.content_type or "")[:100],
        file=file,  # saved to storage in chunks, never read whole
    )
    task = tasks.import_contacts.using(
        owner=request.user, summary=f"Import of {upload.filename}"
    ).enqueue(upload.pk)
    return redirect("task-detail", task.id)


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
