"""Tasks that enqueue tasks, for jobs.testing's drain and immediate mode."""

from jobs import task


@task
def count_down(n):
    """Enqueue ``count_down(n - 1)`` until 0: a chain of ``n + 1`` tasks."""
    if n > 0:
        count_down.enqueue(n - 1)
    return n


@task
def enqueue_forever():
    """Enqueue itself again, for ever."""
    enqueue_forever.enqueue()


@task
def fan_out(n):
    """Enqueue ``n`` additions at once."""
    from tests.testapp.tasks import add

    add.enqueue_many([(i, i) for i in range(n)])
    return n
