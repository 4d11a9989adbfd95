from django.conf import settings
from django.db import migrations, models

# The starts of a rate key in its window (jobs_ratewindow, one row per key), counted by the
# database as the claim sets each task running: in the claim's statement and transaction, so a
# claim killed midway counts nothing, and what commits is counted. A window never moves back (a
# claim whose clock is behind keeps counting in the later window). Same trigger on both
# databases; PostgreSQL also gets the claim's room function.
COUNT_POSTGRESQL = """
CREATE OR REPLACE FUNCTION jobs_rate_count() RETURNS trigger AS $$
BEGIN
    INSERT INTO jobs_ratewindow (key, window_start, period, rate_limit, started)
    VALUES (
        NEW.rate_key,
        floor(extract(epoch FROM NEW.started_at) / NEW.rate_period)::bigint * NEW.rate_period,
        NEW.rate_period, NEW.rate_limit, 1
    )
    ON CONFLICT (key) DO UPDATE SET
        started = CASE WHEN jobs_ratewindow.period = excluded.period
            AND jobs_ratewindow.window_start >= excluded.window_start
            THEN jobs_ratewindow.started + 1 ELSE 1 END,
        window_start = CASE WHEN jobs_ratewindow.period = excluded.period
            THEN greatest(jobs_ratewindow.window_start, excluded.window_start)
            ELSE excluded.window_start END,
        period = excluded.period,
        rate_limit = excluded.rate_limit;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER jobs_task_rate_count
    AFTER UPDATE OF status ON jobs_task
    FOR EACH ROW WHEN (NEW.status = 'running' AND OLD.status <> 'running'
        AND NEW.rate_key IS NOT NULL)
    EXECUTE FUNCTION jobs_rate_count();

-- The room a claim has left under a rate key, decided under a lock of the key for the claim's
-- transaction (another claim skips the key meanwhile, as jobs_claim_room does for concurrency
-- keys). The window is read after the lock is taken, in a fresh snapshot (VOLATILE): it sees
-- every claim committed before.
CREATE OR REPLACE FUNCTION jobs_rate_room(
    rate_key text, rate_limit integer, rate_period integer, claim_now timestamptz
) RETURNS integer AS $$
DECLARE
    counted integer;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1785689427, hashtext(rate_key)) THEN
        RETURN 0;
    END IF;
    SELECT w.started INTO counted FROM jobs_ratewindow AS w
        WHERE w.key = rate_key AND w.period = rate_period
        AND w.window_start >= floor(extract(epoch FROM claim_now) / rate_period)::bigint
            * rate_period;
    RETURN greatest(0, rate_limit - coalesce(counted, 0));
END
$$ LANGUAGE plpgsql VOLATILE;
"""

DROP_POSTGRESQL = """
DROP TRIGGER IF EXISTS jobs_task_rate_count ON jobs_task;
DROP FUNCTION IF EXISTS jobs_rate_count();
DROP FUNCTION IF EXISTS jobs_rate_room(text, integer, integer, timestamptz);
"""

COUNT_SQLITE = """
CREATE TRIGGER jobs_task_rate_count
    AFTER UPDATE OF status ON jobs_task
    FOR EACH ROW WHEN NEW.status = 'running' AND OLD.status <> 'running'
        AND NEW.rate_key IS NOT NULL
BEGIN
    INSERT INTO jobs_ratewindow (key, window_start, period, rate_limit, started)
    VALUES (
        NEW.rate_key,
        (CAST(strftime('%s', NEW.started_at) AS INTEGER) / NEW.rate_period) * NEW.rate_period,
        NEW.rate_period, NEW.rate_limit, 1
    )
    ON CONFLICT (key) DO UPDATE SET
        started = CASE WHEN jobs_ratewindow.period = excluded.period
            AND jobs_ratewindow.window_start >= excluded.window_start
            THEN jobs_ratewindow.started + 1 ELSE 1 END,
        window_start = CASE WHEN jobs_ratewindow.period = excluded.period
            THEN max(jobs_ratewindow.window_start, excluded.window_start)
            ELSE excluded.window_start END,
        period = excluded.period,
        rate_limit = excluded.rate_limit;
END;
"""

DROP_SQLITE = "DROP TRIGGER IF EXISTS jobs_task_rate_count;"


def run_sql(by_vendor):
    def operation(apps, schema_editor):
        sql = by_vendor.get(schema_editor.connection.vendor)
        if sql:
            # No parameters: "%s" is strftime's, not a placeholder.
            schema_editor.execute(sql, params=None)

    return operation


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0018_task_rollups"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="RateWindow",
            fields=[
                ("key", models.CharField(max_length=200, primary_key=True, serialize=False)),
                ("window_start", models.BigIntegerField()),
                ("period", models.PositiveIntegerField()),
                ("rate_limit", models.PositiveIntegerField()),
                ("started", models.PositiveIntegerField()),
            ],
        ),
        migrations.RemoveIndex(
            model_name="task",
            name="jobs_task_claimable_idx",
        ),
        migrations.RemoveIndex(
            model_name="task",
            name="jobs_task_queue_claimable_idx",
        ),
        migrations.AddField(
            model_name="task",
            name="rate_key",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddField(
            model_name="task",
            name="rate_limit",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="task",
            name="rate_period",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(
                    ("concurrency_key__isnull", True),
                    ("rate_key__isnull", True),
                    ("status__in", ["pending", "retrying"]),
                ),
                fields=["-priority", "run_after", "created_at", "id"],
                name="jobs_task_claimable_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(
                    ("concurrency_key__isnull", True),
                    ("rate_key__isnull", True),
                    ("status__in", ["pending", "retrying"]),
                ),
                fields=["queue", "-priority", "run_after", "created_at", "id"],
                name="jobs_task_queue_claimable_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(
                    ("rate_key__isnull", False), ("status__in", ["pending", "retrying"])
                ),
                fields=["rate_key", "-priority", "run_after", "created_at", "id"],
                name="jobs_task_rate_claimable_idx",
            ),
        ),
        migrations.AddConstraint(
            model_name="task",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("rate_key__isnull", True),
                    models.Q(
                        ("rate_limit__gte", 1),
                        ("rate_limit__isnull", False),
                        ("rate_period__gte", 1),
                        ("rate_period__isnull", False),
                    ),
                    _connector="OR",
                ),
                name="jobs_task_rate_complete",
            ),
        ),
        migrations.RunPython(
            run_sql({"postgresql": COUNT_POSTGRESQL, "sqlite": COUNT_SQLITE}),
            run_sql({"postgresql": DROP_POSTGRESQL, "sqlite": DROP_SQLITE}),
        ),
    ]
