"""The demo product's data: organisations, their contacts, uploads, invitations, reports."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class Organisation(models.Model):
    name = models.CharField(max_length=200)

    def __str__(self):
        return self.name


class Membership(models.Model):
    """Which organisation a user works for (one each, in this demo)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership"
    )
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE)

    def __str__(self):
        return f"{self.user} @ {self.organisation}"


class Contact(models.Model):
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE)
    email = models.EmailField()
    name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Which upload, at which line, created the contact: an import tells a row repeating an
    # earlier line of its own file ("duplicate of line 2") from a contact already present,
    # without holding every address of the file in memory.
    upload = models.ForeignKey(
        "Upload", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    line = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["email"]
        # What makes a re-run of an import harmless: one contact per address and organisation.
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "email"], name="demo_contact_unique_email"
            )
        ]

    def __str__(self):
        return self.email


class Upload(models.Model):
    """A file a user uploaded for import, in the default storage (MEDIA_ROOT in the demo).

    A file, not a database column, so the import reads it row by row; workers on several hosts
    need storage they share (a network volume, or an object store such as S3).
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE)
    filename = models.CharField(max_length=255)  # as the user named it
    content_type = models.CharField(max_length=100, blank=True)
    file = models.FileField(upload_to="uploads/")
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return self.filename


class Invitation(models.Model):
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE)
    email = models.EmailField()
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    sent_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-sent_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "email"], name="demo_invitation_unique_email"
            )
        ]

    def __str__(self):
        return self.email


class Report(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    filename = models.CharField(max_length=255)
    file = models.FileField(upload_to="reports/")
    # The task that built it: the cleanup keeps the files of tasks not finished yet.
    task_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return self.filename


class Notification(models.Model):
    """A message for a user's next page, left by the task-finished hook (see signals.py)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    text = models.CharField(max_length=500)
    succeeded = models.BooleanField(default=True)
    cancelled = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    shown_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self):
        return self.text


def organisation_for(user) -> Organisation:
    """Return the user's organisation, giving a user without one an organisation of their own."""
    membership = Membership.objects.filter(user=user).select_related("organisation").first()
    if membership is not None:
        return membership.organisation
    organisation = Organisation.objects.create(name=f"{user.get_username()}'s organisation")
    Membership.objects.create(user=user, organisation=organisation)
    return organisation
