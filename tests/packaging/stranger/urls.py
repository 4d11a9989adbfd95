"""URLs of the stranger's project: the admin when installed, and jobs' status view."""

from django.apps import apps
from django.urls import include, path

urlpatterns = [path("jobs/", include("jobs.urls"))]

if apps.is_installed("django.contrib.admin"):
    from django.contrib import admin

    urlpatterns.append(path("admin/", admin.site.urls))
