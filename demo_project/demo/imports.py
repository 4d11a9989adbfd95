"""Reading an uploaded contacts CSV: the file-type check and row validation (no database)."""

import csv
import io

from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from jobs import PermanentError

UNSUPPORTED = "Unsupported file format: please upload a CSV"
# The first bytes of formats people upload by mistake; a CSV never starts like these.
BINARY_SIGNATURES = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"%PDF", b"PK\x03\x04", b"\xd0\xcf\x11")


def decode_csv(filename: str, data: bytes) -> str:
    """Return the text of an uploaded CSV; raise PermanentError for anything else."""
    detail = f"filename={filename!r} first_bytes={bytes(data[:8])!r}"
    if not filename.lower().endswith(".csv") or bytes(data[:4]).startswith(BINARY_SIGNATURES):
        raise PermanentError(UNSUPPORTED, detail=detail)
    try:
        return bytes(data).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PermanentError(
            "This CSV is not UTF-8 text: please export it as “CSV UTF-8” and upload it again.",
            detail=detail,
        ) from None


def parse_contacts(text: str) -> dict:
    """Validate every row; return ``{"rows": [[line, email, name]], "errors": [...], "total"}``.

    Broken rows are reported by line number and reason and left out; they never stop the
    import. Line numbers are those a spreadsheet shows (the header is line 1).
    """
    reader = csv.reader(io.StringIO(text))
    header = [column.strip().lower() for column in next(reader, [])]
    if "email" not in header:
        raise PermanentError(
            "The CSV needs a header row with an “email” column (and optionally “name”)."
        )
    email_at = header.index("email")
    name_at = header.index("name") if "name" in header else None
    rows, errors, seen = [], [], {}
    total = 0
    for record in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in record):
            continue  # blank lines are not rows
        total += 1
        if len(record) != len(header):
            errors.append(
                {"line": line, "reason": f"expected {len(header)} columns, found {len(record)}"}
            )
            continue
        email = record[email_at].strip().lower()
        name = record[name_at].strip()[:200] if name_at is not None else ""
        try:
            validate_email(email)
        except ValidationError:
            reason = "no e-mail address" if not email else f"“{email}” is not an e-mail address"
            errors.append({"line": line, "reason": reason})
            continue
        if email in seen:
            errors.append({"line": line, "reason": f"duplicate of line {seen[email]}"})
            continue
        seen[email] = line
        rows.append([line, email, name])
    return {"rows": rows, "errors": errors, "total": total}
