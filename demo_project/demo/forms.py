from django import forms
from django.core.validators import validate_email

from demo_project.demo import imports
from jobs.text import clean_text

# The import streams the file, so size costs time, not memory; the cap keeps the demo's disk sane.
MAX_UPLOAD_BYTES = 50 * 1024 * 1024
# Files one upload may hold: one batch, one e-mail; more is a job for several uploads.
MAX_FILES = 20


class PrimeForm(forms.Form):
    limit = forms.IntegerField(min_value=2, max_value=5_000_000, initial=200_000)


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True  # <input type=file multiple>: request.FILES.getlist


class MultipleFileField(forms.FileField):
    """A file field that takes one file or several, and cleans them into a list.

    Each file is checked on its own (Django's checks, then ``check``); every bad one is named
    in the errors, so a person knows which file of the twenty to fix.
    """

    widget = MultipleFileInput

    def __init__(self, *args, max_files: int, check=None, **kwargs):
        self.max_files = max_files
        self.check = check
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        files = [f for f in (data if isinstance(data, (list, tuple)) else [data]) if f]
        if not files:
            return [super().clean(None, initial)]  # "This field is required." when required
        if len(files) > self.max_files:
            raise forms.ValidationError(
                f"Up to {self.max_files} files at a time, please ({len(files)} chosen)."
            )
        cleaned, errors = [], []
        for file in files:
            try:
                file = super().clean(file, initial)
                cleaned.append(self.check(file) if self.check else file)
            except forms.ValidationError as error:
                errors.extend(f"{display_name(file)}: {message}" for message in error.messages)
        if errors:
            raise forms.ValidationError(errors)
        return cleaned


def display_name(file) -> str:
    """The uploaded file's name as a message may quote it: storable, and not a screenful."""
    return f"“{clean_text(getattr(file, 'name', '') or 'unnamed file', 80)}”"


def check_contacts_file(upload):
    """Refuse what can be told at once (size, name, first bytes), before a task is made; the
    import task tells the rest (encoding, header, each row)."""
    if upload.size > MAX_UPLOAD_BYTES:
        raise forms.ValidationError("Files up to 50 MB, please.")
    head = upload.read(8)
    upload.seek(0)
    if not imports.looks_like_csv(upload.name, head):
        raise forms.ValidationError(f"{imports.UNSUPPORTED}.")
    return upload


class UploadForm(forms.Form):
    # One file is one import task; several are one batch of them (views.start_import).
    file = MultipleFileField(
        label=f"Contacts files (CSV with email and name columns; up to {MAX_FILES} at once)",
        widget=MultipleFileInput(attrs={"accept": ".csv,text/csv"}),
        max_files=MAX_FILES,
        check=check_contacts_file,
    )


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
