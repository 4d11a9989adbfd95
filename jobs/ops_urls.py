"""URLs of the operators' endpoints; include under a prefix, e.g. ``path("jobs/ops/", ...)``."""

from django.urls import path

from jobs.web import ops_views

app_name = "jobs_ops"

urlpatterns = [
    path("health", ops_views.health_view, name="health"),
    path("metrics", ops_views.metrics_view, name="metrics"),
]
