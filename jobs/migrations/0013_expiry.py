# Expiry (``Task.expires_at``: a waiting task not started by then never starts) and the count
# of snoozes (``jobs.Snooze``; JOBS_MAX_SNOOZES bounds it). The index serves maintenance's
# cancellation of expired waiting tasks; partial, so rows without a deadline cost it nothing.

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0012_unique_scopes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="expires_at",
            field=models.DateTimeField(
                blank=True, help_text="Never started after this.", null=True
            ),
        ),
        migrations.AddField(
            model_name="task",
            name="snoozes",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(
                    ("expires_at__isnull", False), ("status__in", ["pending", "retrying"])
                ),
                fields=["expires_at"],
                name="jobs_task_waiting_expiry_idx",
            ),
        ),
    ]
