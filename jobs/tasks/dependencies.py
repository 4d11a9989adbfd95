"""What ``depends_on`` takes: tasks, their ids, or Django results; normalised to ids.

Free of jobs' models (``jobs.tasks.definition`` imports it before the app registry is ready).
"""

import uuid

ON_DEPENDENCY_FAILURE = ("cancel", "run")
# More would make one enqueue a long transaction of locks; a fan-in that wide is a batch's job.
MAX_DEPENDENCIES = 1000


def dependency_ids(depends_on) -> tuple[uuid.UUID, ...]:
    """The ids of ``depends_on`` (a task row, an id, a Django ``TaskResult``, or an iterable of
    them), in order, each once; TypeError or ValueError for anything else."""
    if depends_on is None:
        return ()
    if isinstance(depends_on, str | uuid.UUID) or hasattr(depends_on, "pk"):
        depends_on = [depends_on]
    try:
        items = list(depends_on)
    except TypeError:
        raise TypeError(
            f"depends_on must be tasks, their ids or results, not {depends_on!r:.80}."
        ) from None
    ids: list[uuid.UUID] = []
    for item in items:
        task_id = _id_of(item)
        if task_id not in ids:
            ids.append(task_id)
    if len(ids) > MAX_DEPENDENCIES:
        raise ValueError(
            f"A task may depend on at most {MAX_DEPENDENCIES} tasks, not {len(ids)}: "
            "enqueue them as a batch (jobs.batch) with a callback instead."
        )
    return tuple(ids)


def _id_of(item) -> uuid.UUID:
    if isinstance(item, uuid.UUID):
        return item
    value = getattr(item, "pk", None)  # a task row
    if value is None and not isinstance(item, str):
        value = getattr(item, "id", None)  # a Django TaskResult
    if value is None:
        value = item
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str) and not isinstance(value, bool):
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise ValueError(f"depends_on: {item!r:.80} is no task, task id or task result.")
