"""Tasks that misbehave on purpose, for the hostile suite (tests/hostile/).

Each does one thing a careless or hostile task author could: raise what is not an
``Exception``, raise an exception that cannot be printed, exit, fork, start processes, hang.
"""

import multiprocessing
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from jobs import task
from tests.testapp.models import SideEffect


class Unprintable(Exception):
    """An exception whose ``str()`` and ``repr()`` raise."""

    def __str__(self):
        raise RuntimeError("str() of this exception raises")

    def __repr__(self):
        raise RuntimeError("repr() of this exception raises")


class NotAnException(BaseException):
    """A ``BaseException`` that is neither SystemExit nor KeyboardInterrupt."""


@task(max_attempts=3)
def raises_system_exit(code):
    raise SystemExit(code)


@task(max_attempts=3)
def raises_keyboard_interrupt():
    raise KeyboardInterrupt("pressed by the task itself")


@task(max_attempts=3)
def raises_generator_exit():
    raise GeneratorExit


@task(max_attempts=3)
def raises_base_exception():
    raise NotAnException("not an Exception at all")


@task(max_attempts=3, transient=(NotAnException,))
def raises_declared_transient_base_exception():
    raise NotAnException("declared transient by the task")


@task(max_attempts=3)
def raises_unprintable():
    raise Unprintable("hidden")


@task(max_attempts=3)
def raises_unstorable_text():
    raise ValueError("nul:\x00 lone surrogate:\ud800 end")


@task(max_attempts=1)
def exits(code):
    os._exit(code)


def square(number):
    return number * number


@task(timeout=30)
def uses_multiprocessing_pool(numbers):
    with multiprocessing.get_context("fork").Pool(2) as pool:
        return pool.map(square, numbers)


@task(timeout=30)
def uses_process_pool_executor(numbers):
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(2, mp_context=context) as executor:
        return list(executor.map(square, numbers))


@task(timeout=30)
def uses_subprocess():
    done = subprocess.run(
        [sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True, check=True
    )
    return int(done.stdout)


def _record_effect(key):
    SideEffect.objects.create(key=key)


@task(timeout=30)
def uses_the_database_in_a_process(key):
    """A process the task starts writes through the ORM; the task's own connection must not
    be broken by it (they shared it through the fork)."""
    process = multiprocessing.get_context("fork").Process(target=_record_effect, args=(key,))
    process.start()
    process.join()
    return [process.exitcode, SideEffect.objects.filter(key=key).count()]


@task(timeout=10)
def forks_and_returns_in_both(fail_in_copy):
    """``os.fork()`` and return (or raise) in both processes; the copy's outcome is ignored."""
    pid = os.fork()
    if pid == 0:
        if fail_in_copy:
            raise RuntimeError("raised in the forked copy")
        return "returned by the forked copy"
    _, status = os.waitpid(pid, 0)
    return {"returned_by": "the child", "copy_exit_code": os.waitstatus_to_exitcode(status)}


def _hold_a_subprocess(key, seconds):
    """Start a process that would run for an hour, say its pid, and wait ``seconds``."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    SideEffect.objects.create(key=f"{key}:{sleeper.pid}")
    time.sleep(seconds)
    sleeper.kill()
    sleeper.wait()


@task(max_attempts=1, timeout=1)
def hangs_with_a_subprocess(key):
    _hold_a_subprocess(key, 3600)


@task(max_attempts=3, takes_context=True)
def holds_a_subprocess_on_first_attempt(context, key, seconds):
    if context.attempt == 1:
        _hold_a_subprocess(key, seconds)
    return context.attempt


@task(max_attempts=3)
def runs_a_subprocess_then_effect(key, seconds):
    """A task whose own program must survive a signal sent to the worker's process group."""
    subprocess.run(["sleep", str(seconds)], check=True)
    SideEffect.objects.create(key=key)
    return key


@task(takes_context=True, max_attempts=3)
def logs_its_runs(context, path, first_attempt_seconds):
    """Log each run in ``path`` with whether an earlier run's process is still alive (it must
    not be: a task never runs twice at the same time), then sleep on the first attempt only.
    No database access: it runs through a database outage."""
    earlier = []
    if os.path.exists(path):
        with open(path) as log:
            earlier = [int(line.split()[1]) for line in log if line.startswith("start")]
    alive = [pid for pid in earlier if _alive(pid)]
    with open(path, "a") as log:
        log.write(f"start {os.getpid()} attempt={context.attempt} alive={alive}\n")
    if context.attempt == 1:
        time.sleep(first_attempt_seconds)
    with open(path, "a") as log:
        log.write(f"end {os.getpid()}\n")
    return context.attempt


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (dead, not yet reaped by its supervisor) counts as dead.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
