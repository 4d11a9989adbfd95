"""URLs of the task status view and the owner's actions: ``path("jobs/", include("jobs.urls"))``."""

from django.urls import path

from jobs.web import views, workflow_views

app_name = "jobs"

urlpatterns = [
    # str, not uuid: a malformed id reaches the view and gets the same JSON 404 as a foreign one.
    path("tasks/<str:task_id>/", views.task_status, name="task-status"),
    path("tasks/<str:task_id>/action/", views.task_action, name="task-action"),
    # A chain's or a batch's status and actions, under the same rules (jobs.web.workflow_views).
    path("workflows/<str:workflow_id>/", workflow_views.workflow_status, name="workflow-status"),
    path(
        "workflows/<str:workflow_id>/action/",
        workflow_views.workflow_action,
        name="workflow-action",
    ),
]
