"""Template tags for the owner's page: a progress bar that keeps itself up to date.

{% load jobs_progress %}
{% task_progress task %}        the bar, the status line and the retry / cancel buttons
{% task_progress_assets %}      once per page: the stylesheet and the polling script
"""

from django import template

from jobs.humanize import remaining_text
from jobs.web.views import describe

register = template.Library()


@register.inclusion_tag("jobs/progress.html", takes_context=True)
def task_progress(context, task, label=""):
    """Render ``task``'s progress as of now; the script then polls for the rest."""
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    status = describe(task, user)
    return {
        "task": task,
        "status": status,
        "label": label or task.summary or task.name,
        "csrf_token": context.get("csrf_token"),
        "next_url": request.get_full_path() if request is not None else "",
    }


@register.inclusion_tag("jobs/assets.html")
def task_progress_assets():
    """Render the stylesheet and script tags the progress bars need, once per page."""
    return {}


register.filter("remaining_text", remaining_text)
