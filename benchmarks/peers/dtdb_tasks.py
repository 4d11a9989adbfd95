"""django-tasks-db's tasks (Django's ``@task``, the django_tasks backport on Django 5.2)."""

import time

from django_tasks import task

from benchmarks.peers.stamps import write_stamp


@task(queue_name="bench")
def noop(n=0):
    return None


@task(queue_name="bench")
def stamp(n=0):
    write_stamp(n, time.time())
