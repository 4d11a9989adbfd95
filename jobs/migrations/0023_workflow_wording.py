from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0022_worker_session"),
    ]

    operations = [
        migrations.AddField(
            model_name="workflow",
            name="noun",
            field=models.CharField(blank=True, default="", help_text='"file"', max_length=40),
        ),
        migrations.AddField(
            model_name="workflow",
            name="noun_plural",
            field=models.CharField(blank=True, default="", help_text='"files"', max_length=40),
        ),
        migrations.AddField(
            model_name="workflow",
            name="verb",
            field=models.CharField(default="done", help_text='"imported"', max_length=40),
        ),
    ]
