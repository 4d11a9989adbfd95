"""Argument types shared by the jobs commands: bad input is refused where it enters, plainly."""

import argparse


def number(kind=float, *, at_least=None, above=None):
    """Return an argparse ``type`` parsing ``kind`` (int or float) with a lower bound."""
    what = "a whole number" if kind is int else "a number"

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if at_least is not None and value < at_least:
            raise argparse.ArgumentTypeError(f"must be at least {at_least}, got {value}")
        if above is not None and not value > above:
            raise argparse.ArgumentTypeError(f"must be more than {above}, got {value}")
        return value

    return parse


positive_int = number(int, at_least=1)
positive_seconds = number(float, above=0)
non_negative_seconds = number(float, at_least=0)
