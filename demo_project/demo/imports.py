"""Reading an uploaded contacts CSV row by row: the file-type check and row validation.

Nothing here holds the whole file: the file is read through a text stream, and rows come out
one at a time, so an import's memory does not grow with the file. Repeated addresses are found
by the import itself, against the contacts it created (see tasks.py).
"""

import codecs
import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from jobs import PermanentError
from jobs.text import clean_text

UNSUPPORTED = "Unsupported file format: please upload a CSV"
NOT_UTF8 = "This CSV is not UTF-8 text: please export it as “CSV UTF-8” and upload it again."
# The first bytes of formats people upload by mistake; a CSV never starts like these.
BINARY_SIGNATURES = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"%PDF", b"PK\x03\x04", b"\xd0\xcf\x11")


@dataclass(frozen=True)
class Row:
    """One record of the file: a contact to import, or the reason it cannot be."""

    line: int  # as a spreadsheet numbers it: the header is line 1
    email: str = ""
    name: str = ""
    error: str = ""


def looks_like_csv(filename: str, head: bytes) -> bool:
    """Whether a file named ``filename`` whose first bytes are ``head`` may be a CSV: the upload
    form refuses the others before a task is made, and the task checks again (a file may have
    been stored by other means)."""
    return filename.lower().endswith(".csv") and not bytes(head[:4]).startswith(BINARY_SIGNATURES)


def open_csv(filename: str, binary) -> io.TextIOBase:
    """Return the text of an uploaded CSV as a stream; raise PermanentError for anything else."""
    head = binary.read(8)
    if not looks_like_csv(filename, head):
        detail = f"filename={filename!r} first_bytes={bytes(head)!r}"
        raise PermanentError(UNSUPPORTED, detail=detail)
    binary.seek(0)
    return codecs.getreader("utf-8-sig")(binary, errors="strict")


def read_rows(text) -> Iterator[Row]:
    """Yield every record of the CSV ``text`` (a stream or lines), validated on its own.

    Broken rows are yielded with their line number and reason; they never stop the import.
    Blank lines are not rows.
    """
    reader = csv.reader(_decoded(text))
    header = [column.strip().lower() for column in next(reader, [])]
    if "email" not in header:
        raise PermanentError(
            "The CSV needs a header row with an “email” column (and optionally “name”)."
        )
    email_at = header.index("email")
    name_at = header.index("name") if "name" in header else None
    for record in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in record):
            continue
        if len(record) != len(header):
            yield Row(line, error=f"expected {len(header)} columns, found {len(record)}")
            continue
        email = record[email_at].strip().lower()
        # Display text: a NUL or a lone surrogate in a cell is mended, not stored (jobs.text).
        name = clean_text(record[name_at].strip())[:200] if name_at is not None else ""
        try:
            validate_email(email)
        except ValidationError:
            shown = clean_text(email, 80)
            reason = "no e-mail address" if not email else f"“{shown}” is not an e-mail address"
            yield Row(line, error=reason)
            continue
        yield Row(line, email=email, name=name)


def _decoded(text):
    """Yield the lines of ``text``, turning a decoding error into the user's message."""
    lines = io.StringIO(text) if isinstance(text, str) else text
    try:
        yield from lines
    except UnicodeDecodeError:
        raise PermanentError(NOT_UTF8) from None
