"""How one cell of a table reads: missing, a number, a boolean, or text.

A CSV file holds text, and pandas types a column (numbers, booleans, text) when it
reads the whole file. keras_attn streams files in chunks, so it reads each cell the
way pandas types its column, by these rules, and a DataFrame's typed values (2.0,
True) come out the same: the vocabulary, the training stream, `predict` and the
request builders see one value for one cell.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "FALSE_SPELLINGS",
    "NA_SPELLINGS",
    "NUMBER",
    "TRUE_SPELLINGS",
    "category_text",
    "is_missing",
    "number_text",
    "read_number",
]

#: The cells `pandas.read_csv` reads as missing by default (its `na_values`); the
#: file reader (`keras_attn.features.reader`) reads them so. A DataFrame's text is
#: taken as it is: there only None, NaN and "" are missing.
NA_SPELLINGS = frozenset(
    {
        "",
        "#N/A",
        "#N/A N/A",
        "#NA",
        "-1.#IND",
        "-1.#QNAN",
        "-NaN",
        "-nan",
        "1.#IND",
        "1.#QNAN",
        "<NA>",
        "N/A",
        "NA",
        "NULL",
        "NaN",
        "None",
        "n/a",
        "nan",
        "null",
    }
)
#: The cells pandas reads as booleans (a column of only these is a bool column).
TRUE_SPELLINGS = frozenset({"True", "TRUE", "true"})
FALSE_SPELLINGS = frozenset({"False", "FALSE", "false"})

#: What pandas' parser reads as a number: a sign, digits with an optional point, an
#: exponent, or an infinity; spaces around it. Not "1,5", "0x10" or "1_000" (which
#: Python's float() would take).
NUMBER = re.compile(
    r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?)\s*",
    re.IGNORECASE,
)
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")


def is_missing(value) -> bool:
    """None, NaN (float or NumPy), pandas' NA, or the empty string."""
    if value is None:
        return True
    if isinstance(value, str):
        return value == ""
    try:
        return bool(value != value)  # NaN, pd.NA and NaT are unequal to themselves
    except (TypeError, ValueError):
        return False


def read_number(value) -> float | int | None:
    """A cell as a number, as pandas types it; None when it is not one.

    Text in `TRUE_SPELLINGS` / `FALSE_SPELLINGS` and booleans read as 1 / 0, numeric
    text as its value (integers exactly), numbers as themselves.

    Example:

    >>> read_number(" 02 "), read_number("2.50"), read_number("TRUE"), read_number("a")
    (2, 2.5, 1, None)
    """
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return int(bool(value))
    if isinstance(value, str):
        if value in TRUE_SPELLINGS or value in FALSE_SPELLINGS:
            return int(value in TRUE_SPELLINGS)
        if _INTEGER.fullmatch(value):
            return int(value)
        if NUMBER.fullmatch(value):
            return float(value)
        return None
    if isinstance(value, bytes):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if number.is_integer() and not isinstance(value, float):
        return int(value)  # an integer type (int, np.int64): kept exact
    return number


def number_text(value: float | int) -> str:
    """A number as a category: whole numbers without a point ("2" for 2.0, 2 and
    "02"), others by Python's shortest repr ("2.5"), infinities as "inf"/"-inf".

    Example:

    >>> number_text(2.0), number_text(-0.0), number_text(2.5), number_text(1e20)
    ('2', '0', '2.5', '100000000000000000000')
    """
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if float(value).is_integer():
        return str(int(value))
    return str(value)  # the shortest repr of its own type (0.1 for float32's 0.1)


def category_text(value) -> str | None:
    """A label cell as a class name; None when it is missing.

    Text is stripped; numbers (typed, or text pandas reads as a number) are
    `number_text` ("3" for 3, 3.0 and "3.0"); booleans and their spellings are
    "True" / "False".

    Example:

    >>> [category_text(v) for v in (3, 3.0, " 3.0 ", "pos ", True, "", None)]
    ['3', '3', '3', 'pos', 'True', None, None]
    """
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if isinstance(value, str):
        value = value.strip()
    if is_missing(value):
        return None
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return str(bool(value))
    if isinstance(value, str):
        if value in TRUE_SPELLINGS or value in FALSE_SPELLINGS:
            return str(value in TRUE_SPELLINGS)
        number = read_number(value)
        return value if number is None else number_text(number)
    number = read_number(value)
    return str(value) if number is None else number_text(number)
