from django.apps import AppConfig, apps


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported for their side effects: the system checks they register.
        from jobs import checks  # noqa: F401
        from jobs.maintenance import periodic, pruning  # noqa: F401
        from jobs.metrics import counters
        from jobs.web import health  # noqa: F401

        counters.connect()
        # The admin is optional: a project without django.contrib.admin (an API, a worker-only
        # service) must still start, and admin.site cannot even be touched there.
        if apps.is_installed("django.contrib.admin"):
            from jobs.admin import schedules as admin_schedules  # noqa: F401
