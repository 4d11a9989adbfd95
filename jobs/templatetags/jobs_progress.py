"""Template tags for the owner's page: a progress bar that keeps itself up to date.

{% load jobs_progress %}
{% task_progress task %}        the bar, the status line and the retry / cancel buttons
{% workflow_progress workflow %} a chain's or a batch's bar: "7 of 10 done, 1 failed"; its
                                buttons retry the failed members or cancel it as a whole
{% task_progress_assets %}      once per page: the stylesheet and the polling script
"""

from django import template

from jobs.humanize import remaining_text
from jobs.web.views import describe
from jobs.web.workflow_views import describe_workflow

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


@register.inclusion_tag("jobs/progress.html", takes_context=True)
def workflow_progress(context, workflow, label=""):
    """Render ``workflow``'s progress as of now, in the task bar's markup; the same script
    polls its status view (``jobs.web.workflow_views``) for the rest."""
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    return {
        "status": describe_workflow(workflow, user),
        "label": label or workflow.summary or str(workflow.get_kind_display()),
        "csrf_token": context.get("csrf_token"),
        "next_url": request.get_full_path() if request is not None else "",
    }


@register.inclusion_tag("jobs/assets.html")
def task_progress_assets():
    """Render the stylesheet and script tags the progress bars need, once per page."""
    return {}


register.filter("remaining_text", remaining_text)
