from django import forms
from django.core.validators import validate_email

from demo_project.demo import imports

# The import streams the file, so size costs time, not memory; the cap keeps the demo's disk sane.
MAX_UPLOAD_BYTES = 50 * 1024 * 1024


class PrimeForm(forms.Form):
    limit = forms.IntegerField(min_value=2, max_value=5_000_000, initial=200_000)


class UploadForm(forms.Form):
    # What can be told at once (size, name, first bytes) is refused here, before a task is
    # made; the import task tells the rest (encoding, header, each row).
    file = forms.FileField(
        label="Contacts file (CSV with email and name columns)",
        widget=forms.ClearableFileInput(attrs={"accept": ".csv,text/csv"}),
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError("Files up to 50 MB, please.")
        head = upload.read(8)
        upload.seek(0)
        if not imports.looks_like_csv(upload.name, head):
            raise forms.ValidationError(f"{imports.UNSUPPORTED}.")
        return upload


class InviteForm(forms.Form):
    emails = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One address per line (or separated by commas).",
    )

    def clean_emails(self):
        raw = self.cleaned_data["emails"].replace(",", "\n").split()
        emails = list(dict.fromkeys(e.strip().lower() for e in raw if e.strip()))
        for email in emails:
            try:
                validate_email(email)
            except forms.ValidationError:
                raise forms.ValidationError(f"“{email}” is not an e-mail address.") from None
        if not emails:
            raise forms.ValidationError("Enter at least one address.")
        if len(emails) > 200:
            raise forms.ValidationError("Up to 200 addresses at a time, please.")
        return emails


class ReportForm(forms.Form):
    sections = forms.IntegerField(min_value=1, max_value=120, initial=20, widget=forms.HiddenInput)
