"""Admin input that no database can take: refused as Django refuses a bad filter, never a 500.

PostgreSQL rejects a NUL character in any string parameter (``DataError``), and a selected id
that is not a primary key makes the action's ``pk__in`` lookup raise ``ValidationError``; both
used to end as a 500 page. Over-long strings need no care in lookups (a comparison never fails),
only where they are written (the pause form checks the column's length).
"""

from django.contrib import messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.views.main import ERROR_FLAG
from django.core.exceptions import ValidationError
from django.http import HttpResponseRedirect

NUL = "\x00"


def has_nul(data) -> bool:
    """Whether any key or value of the QueryDict ``data`` holds a NUL character."""
    return any(NUL in key or any(NUL in value for value in values) for key, values in data.lists())


class HostileInputAdmin:
    """Mix into a ModelAdmin: changelists, detail pages and actions survive any input."""

    def changelist_view(self, request, extra_context=None):
        if has_nul(request.GET) or has_nul(request.POST):
            # What Django answers for a filter it cannot apply (IncorrectLookupParameters).
            return HttpResponseRedirect(f"{request.path}?{ERROR_FLAG}=1")
        return super().changelist_view(request, extra_context)

    def get_object(self, request, object_id, from_field=None):
        if NUL in str(object_id):
            return None  # the "does not exist" redirect, as for any unknown id
        return super().get_object(request, object_id, from_field)

    def response_action(self, request, queryset, *args, **kwargs):
        # *args, **kwargs: Django 6.1 added ``action_location``; pass on whatever this Django has.
        pk_field = self.model._meta.pk
        try:
            for value in request.POST.getlist(ACTION_CHECKBOX_NAME):
                pk_field.to_python(value)
        except ValidationError:
            self.message_user(
                request,
                "The selection holds ids that are not ids: nothing was done.",
                messages.ERROR,
            )
            return HttpResponseRedirect(request.get_full_path())
        return super().response_action(request, queryset, *args, **kwargs)
