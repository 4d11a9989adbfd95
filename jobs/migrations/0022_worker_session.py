from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0021_workflows"),
    ]

    operations = [
        migrations.AddField(
            model_name="worker",
            name="children",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="worker",
            name="session_key",
            field=models.BigIntegerField(blank=True, null=True),
        ),
    ]
