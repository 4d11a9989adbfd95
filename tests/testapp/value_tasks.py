"""Tasks returning and reporting values a database cannot store as they are (tests/hostile)."""

from jobs import task


@task(max_attempts=3)
def return_value(kind):
    """Return a value computed here (a payload could not carry it): ``kind`` says which."""
    return {
        "nul": "a\x00b",
        "surrogate": "\ud800",
        "huge_int": 10**5000,
        "deep": _nested(5000),
        "fine": "a\u00e9\U0001f600b",
    }[kind]


def _nested(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


@task(takes_context=True)
def report(context, message):
    """Report progress with a message made of ``message`` and a NUL, then succeed."""
    context.progress(1, 2, message + "\x00")
    return context.step("only", lambda: "done")
