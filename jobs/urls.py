"""URLs of the task status view and the owner's actions: ``path("jobs/", include("jobs.urls"))``."""

from django.urls import path

from jobs.web import views

app_name = "jobs"

urlpatterns = [
    # str, not uuid: a malformed id reaches the view and gets the same JSON 404 as a foreign one.
    path("tasks/<str:task_id>/", views.task_status, name="task-status"),
    path("tasks/<str:task_id>/action/", views.task_action, name="task-action"),
]
