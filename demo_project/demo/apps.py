from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "demo_project.demo"
    label = "demo"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from demo_project.demo.notifications import notify_owner
        from jobs.signals import task_finished

        task_finished.connect(notify_owner, dispatch_uid="demo-notify-owner")
