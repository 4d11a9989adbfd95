"""On PostgreSQL, NOTIFY idle workers when a task becomes claimable (see jobs/notify.py)."""

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION jobs_task_notify_ready() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('jobs_task_ready', NEW.queue);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER jobs_task_notify_insert
    AFTER INSERT ON jobs_task
    FOR EACH ROW WHEN (NEW.status IN ('pending', 'retrying'))
    EXECUTE FUNCTION jobs_task_notify_ready();

CREATE TRIGGER jobs_task_notify_requeue
    AFTER UPDATE OF status ON jobs_task
    FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status <> 'pending')
    EXECUTE FUNCTION jobs_task_notify_ready();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS jobs_task_notify_requeue ON jobs_task;
DROP TRIGGER IF EXISTS jobs_task_notify_insert ON jobs_task;
DROP FUNCTION IF EXISTS jobs_task_notify_ready();
"""


def run_on_postgresql(sql):
    def operation(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return operation


class Migration(migrations.Migration):
    dependencies = [("jobs", "0002_worker")]

    operations = [migrations.RunPython(run_on_postgresql(FORWARD), run_on_postgresql(BACKWARD))]
