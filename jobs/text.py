"""Text every database stores: what a string cannot hold, and the two ways to make it storable.

PostgreSQL refuses NUL in text and in JSON, and neither database can encode a lone surrogate
(``"\\ud800"``) as UTF-8. What enters a record is treated by what it is for:

- values a task computes with (arguments, results, queue names) are refused, with the reason
  (``jobs.tasks.payload``), so nothing is changed behind the caller's back;
- display text (a summary, a progress message, a user message) is mended: ``clean_text``;
- what a developer reads to debug (an exception's message, its traceback) is escaped, so it
  still says what was there: ``storable_text``.
"""

import re

# What a string cannot hold: NUL, and every surrogate code point.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def clean_text(text, limit: int | None = None) -> str:
    """Return ``text`` as display text every database stores: for summaries and messages.

    Display text is shown, not computed with, so it is mended rather than refused (a file name
    with a stray byte must not make an upload fail): NUL and surrogates become U+FFFD, and text
    over ``limit`` characters is cut, ending with "…".
    """
    text = str(text)
    if UNSTORABLE.search(text):
        text = UNSTORABLE.sub("\ufffd", text)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def storable_text(text: str) -> str:
    """``text`` made storable by PostgreSQL and SQLite alike, escaped rather than cut.

    NUL becomes the four characters ``\\x00`` and a lone surrogate its Python escape
    (``\\ud800``), so the text still says what was there.
    """
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
