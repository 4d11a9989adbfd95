"""Admin input that no database can take: refused as Django refuses a bad filter, never a 500.

PostgreSQL rejects a NUL character in any string parameter (``DataError``), and a selected id
that is not a primary key makes the action's ``pk__in`` lookup raise ``ValidationError``; both
used to end as a 500 page. Over-long strings need no care in lookups (a comparison never fails),
only where they are written (the pause form checks the column's length). Searches are the
exception: SQLite refuses a LIKE pattern over 50,000 bytes ("LIKE or GLOB pattern too complex")
and every word adds conditions to the query, so a search is cut to ``MAX_SEARCH_CHARACTERS``
and ``MAX_SEARCH_TERMS``, with a notice.
"""

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.views.main import ERROR_FLAG
from django.core.exceptions import ValidationError
from django.http import HttpResponseRedirect
from django.utils.text import smart_split

NUL = "\x00"
MAX_SEARCH_CHARACTERS = 200
MAX_SEARCH_TERMS = 10


def has_nul(data) -> bool:
    """Whether any key or value of the QueryDict ``data`` holds a NUL character."""
    return any(NUL in key or any(NUL in value for value in values) for key, values in data.lists())


if TYPE_CHECKING:  # what it is mixed into, so mypy knows what super() and self hold
    from django.contrib.admin import ModelAdmin

    _MixedInto = ModelAdmin[Any]
else:
    _MixedInto = object


class HostileInputAdmin(_MixedInto):
    """Mix into a ModelAdmin: changelists, detail pages and actions survive any input."""

    def bounded_search_term(self, request, search_term: str) -> str:
        """Return ``search_term`` cut to the search limits; say so on the page if it was cut."""
        term = search_term[:MAX_SEARCH_CHARACTERS]
        terms = list(smart_split(term))
        if len(terms) > MAX_SEARCH_TERMS:
            term = " ".join(terms[:MAX_SEARCH_TERMS])
        if term != search_term:
            self.message_user(
                request,
                f"The search was cut to its first {MAX_SEARCH_CHARACTERS} characters and "
                f"{MAX_SEARCH_TERMS} words: {term!r}.",
                messages.WARNING,
                fail_silently=True,  # the messages app is optional
            )
        return term

    def get_search_results(self, request, queryset, search_term):
        term = self.bounded_search_term(request, search_term)
        return super().get_search_results(request, queryset, term)

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
