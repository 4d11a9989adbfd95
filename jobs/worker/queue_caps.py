"""Per-queue caps of one worker (``runworker --queues imports:2,emails:8``): how much room each
capped queue has left, from the tasks of it the worker holds.

A task claimed is ``running`` to the database until its outcome is written, and the worker runs
what it holds: so a queue never runs more than its cap at once here if the worker never holds
more than its cap of it, whether its tasks wait for a child, run one to a child, or run several
to a child together (async tasks). A task leaves the count as soon as the pool lets go of it:
reported (its success may still wait to be written, but it no longer runs), lost, or handed
back. The claim gives each capped queue at most its room (``jobs.worker.claiming``), so a queue
at its cap is passed over while the others are claimed as usual.
"""

import uuid
from collections import Counter
from collections.abc import Iterable

from jobs.worker.wire import Claimed


def cap_problem(caps: dict[str, int], queues, concurrency: int) -> str | None:
    """What is wrong with ``caps`` for a worker of ``queues`` and ``concurrency``, or None."""
    for queue, cap in caps.items():
        if queue not in queues:
            return f"the queue {queue!r} has a cap but is not among the worker's queues"
        if isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= concurrency:
            return (
                f"the cap of the queue {queue!r} must be a whole number from 1 to the worker's "
                f"concurrency ({concurrency}), got {cap!r}"
            )
    return None


class QueueCaps:
    """The caps of one worker's queues, and which capped tasks it holds (by task id)."""

    def __init__(self, caps: dict[str, int]):
        self.caps = dict(caps)
        self._held: dict[uuid.UUID, str] = {}  # capped tasks claimed and maybe still held
        self._turn = 0  # which group of queues a claim serves first (see ``order``)

    def __bool__(self) -> bool:
        return bool(self.caps)

    def note(self, claimed: Iterable[Claimed]):
        """Count the tasks of capped queues among ``claimed`` as held."""
        for task in claimed:
            if task.queue in self.caps:
                self._held[task.id] = task.queue

    def rooms(self, holding: Iterable[Claimed]) -> dict[str, int]:
        """How many more tasks each capped queue may have claimed, given ``holding`` (every
        task the worker holds now: ``jobs.worker.pool.ChildPool.in_hand``)."""
        held = {task.id for task in holding}
        self._held = {task_id: q for task_id, q in self._held.items() if task_id in held}
        counts = Counter(self._held.values())
        return {queue: max(0, cap - counts[queue]) for queue, cap in self.caps.items()}

    def held(self) -> dict[str, int]:
        """How many tasks of each capped queue were held at the last ``rooms``."""
        counts = Counter(self._held.values())
        return {queue: counts[queue] for queue in self.caps}

    def groups(self, queues, holding: Iterable[Claimed]) -> list[tuple[list[str], int | None]]:
        """What the next claim takes: each capped queue alone with its room, then the worker's
        other ``queues`` together with no room of their own (None: as many as wanted).

        Turned by one more each call: each group goes first in turn, so that when the tasks
        wanted are fewer than the rooms, no queue is always served last.
        """
        rooms = self.rooms(holding)
        groups: list[tuple[list[str], int | None]] = [([q], room) for q, room in rooms.items()]
        others = [queue for queue in queues if queue not in self.caps]
        if others:
            groups.append((others, None))
        self._turn = (self._turn + 1) % len(groups)
        return groups[self._turn :] + groups[: self._turn]
