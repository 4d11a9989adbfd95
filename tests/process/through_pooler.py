"""What a web process does, run through PgBouncer: ``python -m tests.process.through_pooler STEP``.

tests/process/test_pgbouncer.py runs it in a process of its own whose DATABASE_URL reaches the
test database through PgBouncer in transaction mode. Each step prints one JSON line of what it
made or saw, which the test checks against the database over its direct connection.

- ``enqueue``: one at a time, many at once, with an idempotency key (twice), a unique key
  (twice), inside a transaction that commits and one that rolls back;
- ``admin``: the admin's task list, a task page, the dashboard and the errors page, then its
  retry and cancel actions, through Django's test client as a superuser.
"""

import json
import os
import re
import sys

import django


def enqueue() -> dict:
    from django.db import transaction

    from tests.testapp import tasks

    made: dict = {"adds": [str(tasks.add.enqueue(i, i).id) for i in range(20)]}
    made["many"] = [str(i) for i in tasks.add.enqueue_many([(i, 100) for i in range(30)])]
    keyed = tasks.add.using(idempotency_key="pooled-key")
    made["keyed"] = [str(keyed.enqueue(1, 1).id), str(keyed.enqueue(1, 1).id)]
    unique = tasks.add.using(unique_key="pooled-unique", unique_while="waiting")
    made["unique"] = [str(unique.enqueue(2, 2).id), str(unique.enqueue(2, 2).id)]
    made["permanent"] = str(tasks.bad_file.enqueue().id)
    made["retried"] = str(tasks.fail_until_attempt.enqueue("pooled-retry", 2).id)
    with transaction.atomic():
        made["committed"] = str(tasks.add.enqueue(3, 4).id)
    try:
        with transaction.atomic():
            made["rolled_back"] = str(tasks.add.enqueue(5, 6).id)
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    return made


def admin() -> dict:
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from jobs.models import Task
    from jobs.states import Status
    from tests.testapp import tasks

    user, _ = get_user_model().objects.get_or_create(
        username="pooled-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    failed = Task.objects.filter(status=Status.FAILED).first()
    waiting = tasks.add.using(delay=3600).enqueue(7, 8).record
    pages = {
        "list": reverse("admin:jobs_task_changelist"),
        "failed list": reverse("admin:jobs_task_changelist") + "?status__exact=failed",
        "task page": reverse("admin:jobs_task_change", args=[failed.pk]),
        "dashboard": reverse("admin:jobs_task_dashboard"),
        "errors": reverse("admin:jobs_task_errors"),
    }
    seen = {name: client.get(url).status_code for name, url in pages.items()}
    changelist = reverse("admin:jobs_task_changelist")
    retried = client.post(
        changelist, {"action": "retry_tasks", "_selected_action": [str(failed.pk)]}, follow=True
    )
    cancelled = client.post(
        changelist, {"action": "cancel_tasks", "_selected_action": [str(waiting.pk)]}, follow=True
    )
    return {
        "pages": seen,
        "retry": [retried.status_code, str(failed.pk)],
        "cancel": [cancelled.status_code, str(waiting.pk)],
        "messages": messages(retried) + messages(cancelled),
    }


def messages(response) -> list[str]:
    """The admin's messages on a page (its message list), as text."""
    html = response.content.decode()
    found = re.search(r'<ul class="messagelist">(.*?)</ul>', html, re.S)
    return re.findall(r"<li[^>]*>(.*?)</li>", found.group(1), re.S) if found else []


STEPS = {"enqueue": enqueue, "admin": admin}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    django.setup()
    from django.conf import settings

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    print(json.dumps(STEPS[sys.argv[1]]()))


if __name__ == "__main__":
    main()
