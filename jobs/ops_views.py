"""Endpoints for operators' tools: a health probe and the Prometheus metrics.

``health`` is open, as probes send no credentials: to them it answers with its status code and
``{"status": ...}`` only; staff and holders of the bearer token also get the reasons (queue names
and ages are the operator's business, not the public's). ``metrics`` is for staff, or for a
scraper that sends ``Authorization: Bearer <token>`` matching ``JOBS_METRICS_TOKEN``.

Both answer 503 with a JSON body while the database is down, whoever asks: the token is checked
before the session (which lives in the database), and a user that cannot be loaded counts as
anonymous, so a probe or a scraper never gets a 500 page instead of "unavailable".
"""

import hmac

from django.db import DatabaseError
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST

from jobs import exporter, health
from jobs.conf import jobs_settings

DATABASE_DOWN = {"status": "unknown", "reason": "UNKNOWN: database unreachable", "problems": []}


@never_cache
@require_safe
def health_view(request):
    """Answer 200 when healthy, 503 when not (or when the database is down); reasons to staff."""
    try:
        verdict = health.check()
    except DatabaseError:
        body, status = DATABASE_DOWN, 503
    else:
        body, status = verdict.as_dict(), 200 if verdict.ok else 503
    if not is_operator(request):  # None (could not tell) shows no more than False
        body = {"status": body["status"]}
    return JsonResponse(body, status=status)


def is_operator(request) -> bool | None:
    """Whether the request carries the metrics bearer token or comes from staff.

    ``None`` when the database is down and the answer depended on it (a session's user).
    """
    if bearer_token_matches(request):
        return True  # no database needed: the token is in the settings
    try:
        # Loading the user reads the session and the user tables.
        user = getattr(request, "user", None)
        return user is not None and user.is_active and user.is_staff
    except DatabaseError:
        return None


def bearer_token_matches(request) -> bool:
    """Whether the request carries ``JOBS_METRICS_TOKEN`` as a bearer token."""
    expected = jobs_settings.METRICS_TOKEN
    if not expected:
        return False
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        return False
    # Constant time, so the token cannot be guessed a character at a time.
    return hmac.compare_digest(token.strip().encode(), str(expected).encode())


@never_cache
@require_safe
def metrics_view(request):
    """Return the metrics to staff or to a holder of the bearer token; 401 to others."""
    operator = is_operator(request)
    if operator is None:
        return JsonResponse(DATABASE_DOWN, status=503)
    if not operator:
        response = HttpResponse("Staff login or a bearer token is required.\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="jobs metrics"'
        return response
    try:
        text = exporter.render()
    except DatabaseError:
        return JsonResponse(DATABASE_DOWN, status=503)
    return HttpResponse(text, content_type=CONTENT_TYPE_LATEST)
