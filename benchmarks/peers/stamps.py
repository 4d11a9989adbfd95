"""Pickup stamps: the task body's first line writes ``time.time()`` to a file, one line a task.

Only the standard library: every peer's virtualenv imports it. The enqueuing process writes
its own ``time.time()`` just before the enqueue call; the pickup is the difference, both on the
same machine's clock.
"""

import os

STAMP_FILE = "PEERS_STAMP_FILE"


def write_stamp(n: int, at: float) -> None:
    """Append ``n at`` to the stamp file (one ``write`` of a short line: appends never mix)."""
    fd = os.open(os.environ[STAMP_FILE], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{n} {at!r}\n".encode())
    finally:
        os.close(fd)


def read_stamps(path: str) -> dict[int, float]:
    stamps: dict[int, float] = {}
    if not os.path.exists(path):
        return stamps
    with open(path) as lines:
        for line in lines:
            n, at = line.split()
            stamps.setdefault(int(n), float(at))
    return stamps
