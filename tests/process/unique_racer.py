"""One process of tests/process/test_unique_races.py: wait for the go, enqueue one key, report.

Run as ``python -m tests.process.unique_racer FOLDER NUMBER OPTIONS_JSON`` with the test's
environment (DJANGO_SETTINGS_MODULE, DATABASE_URL): it writes ``ready-NUMBER`` in FOLDER, waits
for ``go`` there, enqueues ``ROUNDS`` times, and prints ``id created`` per enqueue.
"""

import json
import sys
import time
from pathlib import Path

ROUNDS = 5


def main(folder: str, number: str, options: str):
    import django

    django.setup()
    from django.db import connection

    from tests.testapp import tasks

    connection.ensure_connection()  # connected before the go, so that the enqueues race
    folder_path = Path(folder)
    (folder_path / f"ready-{number}").touch()
    deadline = time.monotonic() + 60
    while not (folder_path / "go").exists():
        if time.monotonic() > deadline:
            raise SystemExit("no go within 60 s")
        time.sleep(0.001)
    task = tasks.add.using(**json.loads(options))
    for round_ in range(ROUNDS):
        record = task.enqueue(int(number), round_).record
        print(record.pk, record.created, flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
