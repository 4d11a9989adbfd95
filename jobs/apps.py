from django.apps import AppConfig, apps


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Here, not at the top: these import models, which wait for the app registry.
        from jobs import checks, fleet_checks  # noqa: F401  (app registry) register the checks
        from jobs.metrics import counters  # app registry: counters count through model signals

        counters.connect()
        # The admin is optional: a project without django.contrib.admin (an API, a worker-only
        # service) must still start, and admin.site cannot even be touched there.
        if apps.is_installed("django.contrib.admin"):
            from jobs.admin import schedules as admin_schedules  # noqa: F401  (optional)
            from jobs.admin import workers as admin_workers  # noqa: F401  (optional)
