from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported for their side effects: system checks, and the schedules' admin.
        from jobs import admin_schedules, checks, counters, health, periodic, pruning  # noqa: F401

        counters.connect()
