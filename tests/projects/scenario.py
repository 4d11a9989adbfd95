"""Steps of the install tests, run in a minimal project's own process.

``python -m tests.projects.scenario STEP [ARGUMENTS]`` prints one JSON line for the test to read.
"""

import json
import sys
import uuid

import django


def enqueue():
    from tests.projects import tasks

    ours = tasks.add.enqueue(2, 3).record
    theirs = tasks.multiply.enqueue(6, 7)
    return {"ours": str(ours.pk), "django": theirs.id}


def outcome(ours, django_id):
    from django.test import Client

    from jobs.models import Task
    from tests.projects import tasks

    row = Task.objects.get(pk=ours)
    result = tasks.multiply.get_result(django_id)
    client = Client(raise_request_exception=False)
    # Nobody is logged in (and in the bare project nothing could log anyone in): no task shows.
    seen = client.get(f"/jobs/tasks/{ours}/")
    acted = client.post(f"/jobs/tasks/{uuid.uuid4()}/action/", {"action": "cancel"})
    health = client.get("/jobs/ops/health")
    return {
        "ours": [row.status, row.result],
        "django": [str(result.status), result.return_value],
        "status_view": [seen.status_code, seen.json()],
        "action_view": [acted.status_code, acted.json()],
        "health": health.status_code,
    }


if __name__ == "__main__":
    django.setup()
    step, *arguments = sys.argv[1:]
    print(json.dumps({"enqueue": enqueue, "outcome": outcome}[step](*arguments)))
