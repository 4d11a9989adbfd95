"""The dashboard's first line: is the system healthy, and if not, what is worst and what to do.

It words the verdict of ``jobs.web.health.check``, the judgement ``jobs_health`` and the health
endpoint give, and judges nothing itself: a probe and the banner cannot disagree. Problems come
in the verdict's order, worst first; paused queues are said apart, as an operator's choice and
not a fault.
"""

from django.core.exceptions import ImproperlyConfigured

from jobs.humanize import moment_text, seconds_text
from jobs.web import health


def banner(*, now=None) -> dict:
    """Return the banner: ``level`` ("ok" or "critical"), ``headline``, ``more`` and ``paused``.

    Every value is plain text (the page escapes it, the live updates set it as text).
    """
    try:
        verdict = health.check(now=now)
    except ImproperlyConfigured as exc:  # broken JOBS_HEALTH_* settings: the checks say which
        return {
            "level": "critical",
            "headline": f"The health check cannot judge: {exc}",
            "more": [],
            "paused": [],
        }
    paused = [_paused_text(pause) for pause in verdict.paused]
    if verdict.ok:
        return {"level": "ok", "headline": _healthy_text(verdict), "more": [], "paused": paused}
    worst, *rest = verdict.problems
    return {
        "level": "critical",
        "headline": _problem_text(worst),
        "more": [_problem_text(problem) for problem in rest],
        "paused": paused,
    }


def _problem_text(problem: health.Problem) -> str:
    return f"{problem.headline}: {problem.advice}."


def _healthy_text(verdict: health.Health) -> str:
    queues = (
        f"{verdict.queues} queue{'' if verdict.queues == 1 else 's'} within limits"
        if verdict.queues
        else "no tasks queued"
    )
    # Healthy means a worker beat lately: the verdict has its age.
    beat = seconds_text(max(1, round(verdict.heartbeat_age or 0)))
    return f"Healthy: {queues}, last worker heartbeat {beat} ago."


def _paused_text(pause: health.Paused) -> str:
    by = f" by {pause.paused_by}" if pause.paused_by else ""
    return (
        f"Queue {pause.queue} is paused (since {moment_text(pause.paused_at)}{by}): "
        "its tasks wait until it is resumed."
    )
