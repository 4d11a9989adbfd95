"""Validation of what goes into a task record: JSON only, and not too much of it."""

import json
import math

from jobs.conf import jobs_settings
from jobs.exceptions import PayloadError


def _describe(value) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__module__}.{type(value).__qualname__} {text}".removeprefix("builtins.")


def _check(value, path: str):
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PayloadError(f"{path} is {value!r}, which JSON cannot represent.")
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise PayloadError(
                    f"{path} has the key {key!r} ({type(key).__name__}); JSON object keys must "
                    "be strings."
                )
            _check(item, f"{path}[{key!r}]")
        return
    raise PayloadError(
        f"{path} is {_describe(value)}, which is not JSON. Pass only str, int, float, bool, "
        "None, lists and dicts (an id instead of a model instance, an ISO string instead of a "
        "datetime)."
    )


def validate_json(value, path: str = "value"):
    """Raise PayloadError naming the first part of ``value`` that JSON cannot hold."""
    _check(value, path)


def build_payload(args, kwargs) -> dict:
    """Return the stored payload for ``args``/``kwargs``, refusing non-JSON or oversize input."""
    args = list(args)
    kwargs = dict(kwargs)
    validate_json(args, "args")
    validate_json(kwargs, "kwargs")
    payload = {"args": args, "kwargs": kwargs}
    size = len(json.dumps(payload, separators=(",", ":")).encode())
    limit = jobs_settings.MAX_PAYLOAD_BYTES
    if size > limit:
        raise PayloadError(
            f"The payload is {size:,} bytes, over the limit of {limit:,} "
            "(JOBS_MAX_PAYLOAD_BYTES). Store large data elsewhere and pass its id."
        )
    # Round-trip so the caller's later mutations never reach the record, and tuples become lists.
    return json.loads(json.dumps(payload))
