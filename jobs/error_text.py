"""Text about a task's exception that every database stores, whatever the exception does.

``jobs.transitions.ErrorRecord`` describes a failed attempt with these: none of them raises,
whatever a task's exception does when it is printed or formatted.
"""

import traceback as _traceback


def storable_text(text: str) -> str:
    """``text`` made storable by PostgreSQL and SQLite alike, escaped rather than cut.

    PostgreSQL refuses NUL in text and in JSON, and neither database can encode a lone
    surrogate (``"\\ud800"``) as UTF-8: NUL becomes the four characters ``\\x00`` and a lone
    surrogate its Python escape (``\\ud800``), so the text still says what was there.
    """
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def printed(value, what: str) -> str:
    """``str(value)``, or a note naming its class when printing it raises or gives no text."""
    try:
        text = str(value)
        if isinstance(text, str):
            return str.__str__(text)  # a plain str, whatever subclass __str__ returned
    except BaseException:  # a task's object may raise anything when printed
        pass
    return f"<{what} of type {qualified_name(type(value))}: str() failed>"


def qualified_name(cls: type) -> str:
    try:
        return f"{cls.__module__}.{cls.__qualname__}"
    except BaseException:  # a metaclass may make these attributes raise
        return object.__repr__(cls)


def formatted_traceback(exc: BaseException) -> str:
    """The traceback as Python prints it; the frames alone if formatting the exception fails
    (``traceback`` itself raises on, for instance, an ``__notes__`` that is not a list)."""
    try:
        return "".join(_traceback.format_exception(exc))
    except BaseException:
        pass
    try:
        frames = "".join(_traceback.format_tb(exc.__traceback__))
    except BaseException:
        frames = ""
    name = qualified_name(type(exc))
    return f"Traceback (most recent call last):\n{frames}{name}: <formatting failed>\n"
