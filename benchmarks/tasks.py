"""The tasks the worker benchmark runs: one that does nothing, one that sleeps 50 ms."""

import time

from jobs import task


@task(queue="bench", max_attempts=1)
def noop(n=0):
    return None


@task(queue="bench", max_attempts=1)
def sleep50(n=0):
    time.sleep(0.05)
