"""Same-host proof of death from /proc: parsing, hostile values, missing entries.

The readings of real processes (killed, zombie, alive) are in tests/process/test_liveness_pids.py.
"""

import os

import pytest

from jobs.worker import liveness


def test_a_reused_pid_is_dead():
    # Our own pid, recorded with another start time: the pid now belongs to someone else.
    start = liveness.own_start_time()
    assert start
    assert not liveness.looks_dead(os.getpid(), start)
    assert liveness.looks_dead(os.getpid(), start + 1)


@pytest.mark.parametrize(
    ("pid", "start"),
    [
        (0, 5),
        (-1, 5),
        (-os.getpid(), 5),
        (True, 5),
        ("123", 5),
        (None, 5),
        (1, 0),
        (1, -3),
        (1, None),
        (1, "5"),
        (1, True),
    ],
)
def test_hostile_values_prove_nothing(pid, start):
    assert not liveness.looks_dead(pid, start)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "123 (x) S",
        "123 (x" + " 1" * 30,
        "123 (x) SS" + " 1" * 30,
        "123 (x) S" + " 1" * 18 + " -5 1 1",
    ],
)
def test_malformed_stat_is_refused(text):
    assert liveness.parse_stat(text) is None


def test_stat_with_a_hostile_command_name():
    rest = " ".join(["S"] + [str(n) for n in range(4, 30)])
    stat = liveness.parse_stat(f"77 (a) b ) S 9 (evil)) {rest}")
    assert stat == liveness.ProcStat(state="S", start_time=22)


def test_missing_proc_entries(tmp_path):
    # A /proc without boot id or namespace: nothing can be judged.
    assert liveness.read_boot_id(tmp_path) is None
    assert liveness.read_pid_namespace(tmp_path) is None
    assert liveness.this_host(tmp_path) is None
    assert not liveness.may_judge("b", 1, None)
    # A pid directory without stat (unreadable): alive, since we cannot tell.
    (tmp_path / "42").mkdir()
    assert not liveness.looks_dead(42, 9, tmp_path)
    # No directory at all: gone.
    assert liveness.looks_dead(43, 9, tmp_path)


def test_only_our_boot_and_namespace_are_judged():
    here = liveness.this_host()
    assert here is not None
    assert liveness.may_judge(here.boot_id, here.pid_namespace, here)
    assert not liveness.may_judge("another-boot", here.pid_namespace, here)
    assert not liveness.may_judge(here.boot_id, here.pid_namespace + 1, here)
    assert not liveness.may_judge(None, None, here)
    assert not liveness.may_judge(here.boot_id, str(here.pid_namespace), here)
