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


_SCALARS = frozenset({str, int, bool, type(None)})
# One encoder for every payload: json.dumps(..., separators=...) builds a new one per call.
compact_json = json.JSONEncoder(separators=(",", ":")).encode


def is_flat(args, kwargs) -> bool:
    """Whether every argument is a str, int, bool or None (and every key a str): JSON as is."""
    return all(type(arg) in _SCALARS for arg in args) and all(
        type(key) is str and type(value) in _SCALARS for key, value in kwargs.items()
    )


def encode_payload(args, kwargs, path: str = "", *, limit: int | None = None) -> tuple[dict, str]:
    """Return the stored payload for ``args``/``kwargs`` and its JSON text; refuse bad input.

    Non-JSON values are refused naming their path (prefixed by ``path``, e.g. ``calls[3] ``),
    and so is a payload over ``limit`` bytes (``JOBS_MAX_PAYLOAD_BYTES`` by default).
    """
    args = list(args)
    kwargs = dict(kwargs)
    # Flat arguments of plain types, the common case, are valid JSON as they are and immutable:
    # no walk through the values, and copying the list and the dict is a deep enough copy.
    flat = is_flat(args, kwargs)
    if not flat:
        validate_json(args, f"{path}args")
        validate_json(kwargs, f"{path}kwargs")
    payload = {"args": args, "kwargs": kwargs}
    # ASCII only (the default), so the length of the text is its size in bytes.
    text = compact_json(payload)
    limit = jobs_settings.MAX_PAYLOAD_BYTES if limit is None else limit
    if len(text) > limit:
        raise PayloadError(
            f"The payload{' of ' + path.strip() if path else ''} is {len(text):,} bytes, over "
            f"the limit of {limit:,} "
            "(JOBS_MAX_PAYLOAD_BYTES). Store large data elsewhere and pass its id."
        )
    if not flat:
        # Decode the text just written, so the caller's later mutations never reach the
        # record, and tuples become lists, as they will be once stored.
        payload = json.loads(text)
    return payload, text


def build_payload(args, kwargs) -> dict:
    """Return the stored payload for ``args``/``kwargs``, refusing non-JSON or oversize input."""
    return encode_payload(args, kwargs)[0]
