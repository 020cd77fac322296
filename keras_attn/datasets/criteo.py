"""Criteo display-ads CTR data in the raw Kaggle format, with AutoInt's transform.

The raw format (Kaggle Display Advertising Challenge, `train.txt`): one example a
line, 40 tab-separated fields, no header: the 0/1 label, 13 integer features
`I1..I13` and 26 hashed categorical features `C1..C26`; an empty field is a
missing value, and a line may lack its trailing empty fields.

`load_criteo` turns each integer feature into a category as the AutoInt paper does
for Criteo (Song et al., CIKM 2019, section 6.1.1, after the Criteo challenge's
winning solution): a value `x > 2` becomes `floor(ln(x) ** 2)`, a value `x <= 2`
stays itself (0, 1, 2, or a negative value such as -1), and a missing value stays
missing. Every feature is then categorical, so AutoInt's interacting layers see all
39 fields. Criteo's data is for research use: keras_attn does not ship it.
"""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pandas as pd

from keras_attn._validation import check_positive_int
from keras_attn.features.specs import CategoricalFeature, fit_features

__all__ = [
    "CRITEO_CATEGORICAL",
    "CRITEO_COLUMNS",
    "CRITEO_INTEGER",
    "criteo_features",
    "criteo_integer_bucket",
    "load_criteo",
]

#: The integer features, in file order.
CRITEO_INTEGER = tuple(f"I{i}" for i in range(1, 14))
#: The hashed categorical features, in file order.
CRITEO_CATEGORICAL = tuple(f"C{i}" for i in range(1, 27))
#: All 40 columns of the raw format.
CRITEO_COLUMNS = ("label", *CRITEO_INTEGER, *CRITEO_CATEGORICAL)


def criteo_integer_bucket(value: str) -> str:
    """AutoInt's category of one raw integer field: `floor(ln(x)**2)` for x > 2.

    Args:
        value: str. The raw field ("" when missing).

    Returns:
        The category as a string: "" for a missing value, the value itself for
        `x <= 2`, else `str(floor(ln(x) ** 2))`.

    Example:

    >>> [criteo_integer_bucket(v) for v in ["", "-1", "2", "3", "100"]]
    ['', '-1', '2', '1', '21']
    """
    value = value.strip()
    if not value:
        return ""
    try:
        x = float(value)
    except ValueError:
        raise ValueError(
            f"An integer field of Criteo must be a number or empty. Received: {value!r}"
        ) from None
    if not math.isfinite(x) or x != int(x):
        raise ValueError(
            f"An integer field of Criteo must be a whole number. Received: {value!r}"
        )
    if x > 2:
        return str(math.floor(math.log(x) ** 2))
    return str(int(x))


def _read_lines(path: Path, nrows: int | None) -> list[list[str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if nrows is not None and len(rows) >= nrows:
                break
            line = line.rstrip("\r\n")
            if not line:
                continue
            fields = line.split("\t")
            if len(fields) > len(CRITEO_COLUMNS):
                raise ValueError(
                    f"Line {number} of {str(path)!r} has {len(fields)} tab-separated "
                    f"fields; the raw Criteo format has at most {len(CRITEO_COLUMNS)}"
                )
            # Short lines lack their trailing empty (missing) fields.
            fields += [""] * (len(CRITEO_COLUMNS) - len(fields))
            if fields[0] not in ("0", "1"):
                raise ValueError(
                    f"Line {number} of {str(path)!r} must start with the label 0 or "
                    f"1. Received: {fields[0]!r}"
                )
            rows.append(fields)
    return rows


def load_criteo(path: str | Path, nrows: int | None = None) -> pd.DataFrame:
    """Reads raw Criteo lines into a DataFrame of categories and a 0/1 label.

    Args:
        path: a raw Criteo file (tab-separated, no header; gzip allowed).
        nrows: int. Read at most this many examples. Defaults to all.

    Returns:
        A DataFrame with `label` (int64) and the 39 feature columns as strings:
        `I1..I13` bucketed by `criteo_integer_bucket`, `C1..C26` as in the file,
        "" for a missing value (a categorical spec sends it to its OOV bucket).

    Example:

    >>> df = load_criteo("../shared/data/criteo/criteo_8k.tsv.gz")  # doctest: +SKIP
    >>> specs = criteo_features(df)  # doctest: +SKIP
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(
            f"`path` must be an existing raw Criteo file. Received: path={str(path)!r}"
        )
    check_positive_int("nrows", nrows, allow_none=True)
    rows = _read_lines(path, nrows)
    table = np.asarray(rows, dtype=object).reshape(-1, len(CRITEO_COLUMNS))
    df = pd.DataFrame(table, columns=list(CRITEO_COLUMNS))
    df["label"] = df["label"].astype("int64")
    for column in CRITEO_INTEGER:
        df[column] = [criteo_integer_bucket(v) for v in df[column]]
    return df


def criteo_features(train: pd.DataFrame, min_frequency: int = 1) -> list:
    """Categorical specs for the 39 Criteo features, fitted on `train`.

    Args:
        train: the training rows from `load_criteo`.
        min_frequency: int. Values seen fewer times in `train` go to the OOV bucket
            (with the missing values and the values unseen in training). Defaults
            to 1.

    Returns:
        A list of 39 fitted `CategoricalFeature`s, `I1..I13` then `C1..C26`.
    """
    specs = [
        CategoricalFeature(c, min_frequency=min_frequency)
        for c in (*CRITEO_INTEGER, *CRITEO_CATEGORICAL)
    ]
    return fit_features(specs, train)
