"""The form of a schedule added in the admin: every value checked where it enters.

A schedule is refused here, with a message on its field, rather than at its first slot: a cron
expression cronsim cannot parse or that never fires, a task that does not exist or that a
schedule cannot run (a Django task of another backend), a queue or priority the task's backend
refuses, and arguments the task record could not store (``jobs.tasks.payload``, the check of
every enqueue: NUL, surrogates, NaN, huge, too deep). Two operators editing one schedule: the
second to save is refused (``Schedule.version``), rather than writing over the first.
"""

import json

from cronsim import CronSimError
from django import forms
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from jobs.conf import jobs_settings
from jobs.exceptions import PayloadError, UnknownTaskError
from jobs.maintenance import periodic, schedulable
from jobs.models import Schedule
from jobs.tasks.payload import encode_payload

# What an operator types in: what the schedule runs, when, and with which arguments.
FIELDS = [
    "name",
    "task",
    "cron",
    "interval_seconds",
    "time_zone",
    "args",
    "kwargs",
    "queue",
    "priority",
    "enabled",
]
CHANGED_MEANWHILE = (
    "This schedule was changed by someone else since you opened it. Reload the page to see "
    "their change, then make yours again."
)


class ScheduleForm(forms.ModelForm):
    """Add or change a schedule that lives in the admin (``Schedule.source`` "admin")."""

    args = forms.CharField(
        required=False,
        initial="[]",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='The positional arguments, a JSON list: [1, "two"].',
    )
    kwargs = forms.CharField(
        required=False,
        initial="{}",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='The keyword arguments, a JSON object: {"limit": 100}.',
    )
    # The version the form was opened at; saved only if it is still the row's.
    version = forms.IntegerField(widget=forms.HiddenInput, required=False, min_value=0)

    class Meta:
        model = Schedule
        fields = [*FIELDS, "version"]
        help_texts = {
            "cron": "Five fields (minute hour day month weekday), read in the time zone below: "
            "*/15 * * * * is every quarter of an hour. Or leave it empty and give an interval.",
            "interval_seconds": "Seconds between runs, counted from the Unix epoch; "
            "instead of a cron expression.",
            "task": "The task's dotted path, as its rows carry it: myapp.tasks.send_digest.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A name is the primary key: an unsaved row's pk is "", not None.
        if not self.instance._state.adding:
            self.initial["args"] = json.dumps(self.instance.args, ensure_ascii=False)
            self.initial["kwargs"] = json.dumps(self.instance.kwargs, ensure_ascii=False)
            self.initial["version"] = self.instance.version
        else:
            self.initial.setdefault("time_zone", timezone.get_default_timezone_name())

    def clean_name(self):
        name = self.cleaned_data["name"]
        if self.instance._state.adding and name in _declared_names():
            raise forms.ValidationError(
                "A schedule of settings or code has this name: choose another."
            )
        return name

    def clean_args(self):
        return _json_field(self.cleaned_data.get("args") or "[]", list, "a JSON list")

    def clean_kwargs(self):
        return _json_field(self.cleaned_data.get("kwargs") or "{}", dict, "a JSON object")

    def clean_task(self):
        name = self.cleaned_data["task"]
        try:
            schedulable.resolve(name)
        except UnknownTaskError as exc:
            raise forms.ValidationError(str(exc)) from None
        except ImproperlyConfigured as exc:
            raise forms.ValidationError(str(exc)) from None
        return name

    def clean(self):
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        if not self.instance._state.adding:
            current = Schedule.objects.filter(pk=self.instance.pk).values_list("version", flat=True)
            if data.get("version") != current.first():
                raise forms.ValidationError(CHANGED_MEANWHILE)
        try:
            spec = periodic.PeriodicTask(
                name=data["name"] if self.instance._state.adding else self.instance.pk,
                task=data["task"],
                cron=data.get("cron") or "",
                every=data.get("interval_seconds"),
                args=tuple(data["args"]),
                kwargs=data["kwargs"],
                queue=data.get("queue") or None,
                priority=data.get("priority"),
                time_zone=data.get("time_zone") or "",
            )
            schedulable.bound(
                schedulable.resolve(spec.task), queue=spec.queue, priority=spec.priority
            )
        except (ImproperlyConfigured, UnknownTaskError) as exc:
            raise forms.ValidationError(str(exc)) from None
        try:
            encode_payload(data["args"], data["kwargs"])
        except PayloadError as exc:
            raise forms.ValidationError(f"The arguments cannot be stored: {exc}") from None
        try:
            data["next_run_at"] = spec.next_slot(timezone.now())
        except (CronSimError, StopIteration):
            raise forms.ValidationError(
                f"The cron expression {spec.cron!r} never fires: no such date comes."
            ) from None
        self.spec = spec
        return data


def _json_field(text: str, kind: type, what: str):
    # Bounded before parsing: the payload could not hold more, and json.loads of megabytes of
    # brackets is slow before it fails.
    limit = jobs_settings.MAX_PAYLOAD_BYTES
    if len(text) > limit:
        raise forms.ValidationError(
            f"{len(text):,} characters, over the limit of {limit:,} (JOBS_MAX_PAYLOAD_BYTES)."
        )
    try:
        value = json.loads(text)
    except RecursionError:
        raise forms.ValidationError("Not valid JSON: nested too deep.") from None
    except ValueError as exc:
        raise forms.ValidationError(f"Not valid JSON: {exc}.") from None
    if not isinstance(value, kind):
        raise forms.ValidationError(f"Give {what}, not {type(value).__name__}.")
    return value


def _declared_names() -> set[str]:
    try:
        return set(periodic.declared())
    except ImproperlyConfigured:  # JOBS_SCHEDULES broken: its system check says so
        return set()
