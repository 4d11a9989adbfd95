from django.urls import include, path

urlpatterns = [
    path("jobs/", include("jobs.urls")),
    path("jobs/ops/", include("jobs.ops_urls")),
]
