from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("jobs/ops/", include("jobs.ops_urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("jobs/", include("jobs.urls")),
    path("", include("demo_project.demo.urls")),
]
