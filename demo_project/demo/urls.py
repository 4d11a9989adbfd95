from django.urls import path

from demo_project.demo import views

urlpatterns = [
    path("", views.home, name="home"),
    path("imports/", views.start_import, name="start-import"),
    path("imports/<str:workflow_id>/", views.import_batch, name="import-batch"),
    path("invitations/", views.start_invites, name="start-invites"),
    path("reports/", views.start_report, name="start-report"),
    path("primes/", views.start_primes, name="start-primes"),
    path("tasks/", views.task_list, name="task-list"),
    path("tasks/<str:task_id>/", views.task_detail, name="task-detail"),
    path("reports/<int:report_id>/download/", views.report_download, name="report-download"),
]
