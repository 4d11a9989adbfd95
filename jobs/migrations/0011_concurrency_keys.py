from django.conf import settings
from django.db import migrations, models

# PostgreSQL: the room a claim has left under a concurrency key, decided under a lock of the
# key for the claim's transaction (another claim skips the key meanwhile, as SKIP LOCKED skips
# rows). The count runs after the lock is taken, in a fresh snapshot (a VOLATILE function's
# statements each take one, under READ COMMITTED): it sees every claim committed before, which
# a snapshot taken at the claim statement's start would miss. jobs.sql.postgresql calls it.
ROOM_FUNCTION = """
CREATE OR REPLACE FUNCTION jobs_claim_room(claim_key text, claim_limit integer)
RETURNS integer AS $$
DECLARE
    running integer;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1785689426, hashtext(claim_key)) THEN
        RETURN 0;
    END IF;
    SELECT count(*) INTO running FROM jobs_task
        WHERE concurrency_key = claim_key AND status = 'running';
    RETURN greatest(0, claim_limit - running);
END
$$ LANGUAGE plpgsql VOLATILE;
"""


def run_on_postgresql(sql):
    def operation(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return operation


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0010_claim_in_enqueue_order"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="concurrency_key",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddField(
            model_name="task",
            name="concurrency_limit",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(
                    ("concurrency_key__isnull", False), ("status__in", ["pending", "retrying"])
                ),
                fields=["concurrency_key", "-priority", "run_after", "created_at", "id"],
                name="jobs_task_key_claimable_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("concurrency_key__isnull", False), ("status", "running")),
                fields=["concurrency_key"],
                name="jobs_task_key_running_idx",
            ),
        ),
        migrations.RemoveIndex(model_name="task", name="jobs_task_claimable_idx"),
        migrations.RemoveIndex(model_name="task", name="jobs_task_queue_claimable_idx"),
        # The claim indexes leave keyed rows to the key's index (jobs.sql.common.claim_pick).
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(
                    ("concurrency_key__isnull", True), ("status__in", ["pending", "retrying"])
                ),
                fields=["-priority", "run_after", "created_at", "id"],
                name="jobs_task_claimable_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(
                    ("concurrency_key__isnull", True), ("status__in", ["pending", "retrying"])
                ),
                fields=["queue", "-priority", "run_after", "created_at", "id"],
                name="jobs_task_queue_claimable_idx",
            ),
        ),
        migrations.RunPython(
            run_on_postgresql(ROOM_FUNCTION),
            run_on_postgresql("DROP FUNCTION IF EXISTS jobs_claim_room(text, integer);"),
        ),
    ]
