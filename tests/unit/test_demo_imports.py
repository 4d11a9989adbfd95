"""The demo's contacts import reads its file: rows by line, refused columns, types and encodings."""

import io

import pytest

from demo_project.demo import imports
from jobs import PermanentError

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)


def test_broken_rows_are_reported_by_line_and_reason_and_left_out():
    text = (
        "Email,Name\n"
        "ada@example.com,Ada\n"
        "not-an-address,Bob\n"
        "\n"
        ",Nobody\n"
        "carol@example.com,Carol,extra\n"
        "dan@example.com,Dan\n"
    )
    rows = list(imports.read_rows(text))
    assert rows == [
        imports.Row(2, "ada@example.com", "Ada"),
        imports.Row(3, error="“not-an-address” is not an e-mail address"),
        imports.Row(5, error="no e-mail address"),
        imports.Row(6, error="expected 2 columns, found 3"),
        imports.Row(7, "dan@example.com", "Dan"),
    ]  # the blank line is not a row


def test_a_csv_without_an_email_column_is_refused_with_a_clear_message():
    with pytest.raises(PermanentError) as caught:
        list(imports.read_rows("name,phone\nAda,123\n"))
    assert "“email” column" in caught.value.user_message


@pytest.mark.parametrize(
    ("filename", "data"),
    [("photo.png", PNG), ("contacts.csv", PNG), ("contacts.xlsx", b"PK\x03\x04rest")],
)
def test_files_that_are_not_csv_are_unsupported(filename, data):
    with pytest.raises(PermanentError) as caught:
        imports.open_csv(filename, io.BytesIO(data))
    assert caught.value.user_message == "Unsupported file format: please upload a CSV"


def test_a_csv_that_is_not_utf8_says_how_to_fix_it():
    data = "email\nzoë@example.com\n".encode("latin-1")
    with pytest.raises(PermanentError) as caught:
        list(imports.read_rows(imports.open_csv("contacts.csv", io.BytesIO(data))))
    assert "not UTF-8" in caught.value.user_message
    assert "CSV UTF-8" in caught.value.user_message
