"""What the commands share about their arguments: number types for argparse,
`UsageError` and `argument`, which names the argument in what goes wrong with its
input, and `message`, an error as one line."""

from __future__ import annotations

import argparse
import re
from contextlib import contextmanager

__all__ = [
    "UsageError",
    "argument",
    "fraction",
    "message",
    "non_negative",
    "number_type",
    "positive",
    "positive_float",
    "rate",
]


def number_type(kind, test, expected):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not test(value):
            raise argparse.ArgumentTypeError(f"must be {expected}, got {text!r}")
        return value

    parse.__name__ = expected  # argparse names the type in its messages
    return parse


positive = number_type(int, lambda v: v >= 1, "a positive integer")
non_negative = number_type(int, lambda v: v >= 0, "a non-negative integer")
positive_float = number_type(
    float, lambda v: 0 < v < float("inf"), "a positive finite number"
)
rate = number_type(float, lambda v: 0 <= v < 1, "a rate in [0, 1)")
fraction = number_type(float, lambda v: 0 < v < 1, "a fraction in (0, 1)")


class UsageError(ValueError):
    """What a command says about one of its arguments (one line, exit status 2)."""


@contextmanager
def argument(flag: str, value=None):
    """Errors about the input inside the block name `flag` (and its value)."""
    try:
        yield
    except UsageError:
        raise
    except (ValueError, OSError) as error:
        shown = f" {value}" if value is not None else ""
        raise UsageError(f"{flag}{shown}: {message(error)}") from error


def message(error: BaseException) -> str:
    """The error's message on one line; a data pipeline's error (TensorFlow wraps
    what a generator raised, with its traceback) as the original message."""
    text = getattr(error, "message", None) or str(error)
    if (
        isinstance(error, OSError)
        and error.filename
        and not isinstance(error, UsageError)
    ):
        text = f"{error.strerror or text}: {error.filename!r}"
    found = re.search(r"\b(?:ValueError|OSError|UnicodeDecodeError): (.+)", text)
    if found and not isinstance(error, ValueError):
        text = found.group(1)
    return " ".join(text.split())
