"""Endpoints for operators' tools: a health probe and the Prometheus metrics.

``health`` is open, as probes send no credentials: to them it answers with its status code and
``{"status": ...}`` only; holders of ``jobs.view_task`` (superusers included) and of the bearer
token also get the reasons (queue names and ages are the operator's business, not the public's).
``metrics`` is for the same readers, or for a scraper that sends ``Authorization: Bearer
<token>`` matching ``JOBS_METRICS_TOKEN``. ``is_staff`` alone grants nothing, as everywhere in
jobs: it opens the admin's door, not what is behind it.

Both answer 503 with a JSON body while the database is down, whoever asks: the token is checked
before the session (which lives in the database), and a user that cannot be loaded, or whose
permissions cannot be read, gets "unavailable", never a 500 page.
"""

import enum
import hmac

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST

from jobs.conf import jobs_settings
from jobs.metrics import exporter
from jobs.web import health

DATABASE_DOWN = {"status": "unknown", "reason": "UNKNOWN: database unreachable", "problems": []}
# What lets a session read the operators' endpoints (the admin's dashboard needs the same).
READ_PERMISSION = "jobs.view_task"


class Access(enum.Enum):
    GRANTED = "granted"  # the bearer token, or a user holding READ_PERMISSION
    NO_CREDENTIALS = "no credentials"  # nobody logged in, no (right) token: 401
    NOT_PERMITTED = "not permitted"  # logged in without READ_PERMISSION: 403
    UNKNOWN = "unknown"  # the database is down and the answer depended on it: 503


@never_cache
@require_safe
def health_view(request):
    """Answer 200 when healthy, 503 when not (or when the database is down); reasons to readers."""
    try:
        verdict = health.check()
    except DatabaseError:
        body, status = DATABASE_DOWN, 503
    except ImproperlyConfigured as exc:  # broken JOBS_HEALTH_* settings: no verdict
        body = {"status": "unknown", "reason": f"UNKNOWN: check failed: {exc}", "problems": []}
        status = 503
    else:
        body, status = verdict.as_dict(), 200 if verdict.ok else 503
    if access(request) is not Access.GRANTED:  # UNKNOWN shows no more than a refusal
        body = {"status": body["status"]}
    return JsonResponse(body, status=status)


def access(request) -> Access:
    """Whether the request may read the operators' endpoints (see ``Access``)."""
    if bearer_token_matches(request):
        return Access.GRANTED  # no database needed: the token is in the settings
    try:
        # Loading the user reads the session and the user tables, has_perm the permissions.
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return Access.NO_CREDENTIALS
        return Access.GRANTED if user.has_perm(READ_PERMISSION) else Access.NOT_PERMITTED
    except DatabaseError:
        return Access.UNKNOWN


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
    """Return the metrics to holders of ``jobs.view_task`` or of the bearer token."""
    allowed = access(request)
    if allowed is Access.UNKNOWN:
        return JsonResponse(DATABASE_DOWN, status=503)
    if allowed is Access.NO_CREDENTIALS:
        response = HttpResponse("A login or a bearer token is required.\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="jobs metrics"'
        return response
    if allowed is Access.NOT_PERMITTED:
        # Logged in, but the account lacks the permission: logging in again would not help.
        return HttpResponse(f"The {READ_PERMISSION} permission is required.\n", status=403)
    try:
        text = exporter.render()
    except DatabaseError:
        return JsonResponse(DATABASE_DOWN, status=503)
    return HttpResponse(text, content_type=CONTENT_TYPE_LATEST)
