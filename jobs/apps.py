from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from jobs import (  # noqa: F401  (registers system checks and the schedules' admin)
            admin_schedules,
            checks,
            periodic,
            pruning,
        )
