"""Durations and moments as people read them: one formatter for admin, dashboard and status.

The owner's page shows the same words as the server renders: the JSON status carries
``eta_text`` from ``remaining_text``, so progress.js never formats a duration itself.
"""

from datetime import UTC, datetime

from django.utils import timezone


def seconds_text(seconds: float | None) -> str:
    """Format a duration for people: "850 ms", "4.2 s", "42 s", "4 min 10 s", "3 h 5 min", "2 d"."""
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        # A measured time (a float) keeps a decimal below 10 s; a count of seconds (an int,
        # such as a rounded estimate) has none to show.
        if seconds < 10 and not isinstance(seconds, int):
            return f"{seconds:.1f} s"
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def moment_text(at, *, milliseconds: bool = False) -> str:
    """Format a moment for people, in the active time zone (``TIME_ZONE`` unless a view
    activated another): "2026-12-01 14:05:30 CET", "…:30.125 CET" with ``milliseconds``.

    The one format of every moment the admin shows; "—" for None. An ISO 8601 text (an error
    entry's ``at``) is read first; one that is no moment is shown as it is.
    """
    if at is None:
        return "—"
    if isinstance(at, str):
        try:
            at = datetime.fromisoformat(at)
        except ValueError:
            return at
    if timezone.is_naive(at):
        at = timezone.make_aware(at, UTC)
    local = timezone.localtime(at)
    shown = f"{local:%Y-%m-%d %H:%M:%S}"
    if milliseconds:
        shown += f".{local.microsecond // 1000:03d}"
    return f"{shown} {local.tzname() or ''}".rstrip()


def waiting_text(at) -> str:
    """Say until when a task waits (snoozed, or enqueued with a delay): the status view's and
    the admin's words."""
    return f"Waiting until {moment_text(at)}"


def remaining_text(seconds: float | None) -> str:
    """Say roughly how long is left: "About 40 s left.", "About 2 min left." ("" if unknown):
    a sentence of its own, never run into the progress message.

    Rounded to whole seconds below a minute (at least 1) and to whole minutes above: an estimate
    is no more precise than that, and the line should not flicker at every poll.
    """
    if seconds is None:
        return ""
    rough = max(1, round(seconds)) if seconds < 60 else round(seconds / 60) * 60
    return f"About {seconds_text(rough)} left."
