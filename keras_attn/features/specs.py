"""Feature specs of a CTR model: categorical, numeric and sequence features.

A spec says how one raw column becomes model input, and holds what was learned from
data (a vocabulary, a mean and a standard deviation), so the same spec builds the
preprocessing layers inside the model and serializes to JSON next to it.
`infer_features` proposes specs from a pandas DataFrame; `fit_features` learns the
statistics of declared specs from a DataFrame or from CSV files read in chunks.
"""

from __future__ import annotations

import dataclasses
import json
import keyword
import math
import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from keras_attn._cells import (
    FALSE_SPELLINGS,
    NUMBER,
    TRUE_SPELLINGS,
    is_missing,
    number_text,
    read_number,
)
from keras_attn._validation import (
    check_bool,
    check_choice,
    check_finite,
    check_positive_int,
)
from keras_attn.features.reader import CSVFiles, iter_csv_frames

__all__ = [
    "INPUT_NAME",
    "CategoricalFeature",
    "Feature",
    "NumericFeature",
    "SequenceFeature",
    "features_from_json",
    "features_to_json",
    "fit_features",
    "infer_features",
    "input_name",
    "is_input_name",
    "load_features",
    "save_features",
]

_CATEGORICAL_DTYPES = ("string", "int64")

#: How a string categorical feature reads a text cell (`CategoricalFeature.read_as`).
READ_AS = ("text", "number", "boolean")

#: A numeric value whose magnitude, after the log transform (if any) or after
#: standardization, exceeds this counts as non-finite, like inf: the square of a
#: larger float32 overflows (float32 max is 3.4e38), which turns variances, L2 terms
#: and Adam's second moments into inf and then NaN.
NON_FINITE_LIMIT = 1e19

#: What a numeric feature does with a non-finite value (inf, -inf, or beyond
#: `NON_FINITE_LIMIT`): "missing" imputes it as a missing value, "error" rejects it.
NON_FINITE_MODES = ("missing", "error")


#: A name a serving signature can carry (a SavedModel argument): a letter first,
#: then letters, digits, "_", "." or "-"; not a Python keyword ("class").
INPUT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]*")


def is_input_name(name) -> bool:
    return (
        isinstance(name, str)
        and INPUT_NAME.fullmatch(name) is not None
        and not keyword.iskeyword(name)
    )


def input_name(column: str, taken=()) -> str:
    """A serving input name for a column: the column itself when it can be one,
    else its ASCII letters (accents dropped) with runs of other characters as "_",
    a letter first ("Annual Income" -> "Annual_Income", "âge" -> "age", "城市" ->
    "f_" and a hash of it), unique among `taken`.

    Example:

    >>> input_name("Annual Income"), input_name("class"), input_name("a b", ["a_b"])
    ('Annual_Income', 'class_', 'a_b_2')
    """
    name = column
    if not is_input_name(name):
        ascii_text = unicodedata.normalize("NFKD", str(column))
        ascii_text = ascii_text.encode("ascii", "ignore").decode("ascii")
        name = re.sub(r"[^A-Za-z0-9_.\-]+", "_", ascii_text).strip("_")
        if not name:  # nothing ASCII: a stable name from the column's bytes
            name = f"{zlib.crc32(str(column).encode('utf-8')):08x}"
        if not name[0].isalpha():
            name = f"f_{name}"
        if keyword.iskeyword(name):
            name += "_"
    base, n = name, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


def _check_name(spec):
    where = f"{spec.kind} feature"
    if not is_input_name(spec.name):
        raise ValueError(
            f"`name` of a {where} names the model's serving input and must start "
            "with a letter and hold only letters, digits, '_', '.' and '-' (not a "
            f"Python keyword). Received: name={spec.name!r}; give the column as "
            f"`column=` and a name such as {input_name(spec.name)!r} (infer_features "
            "does this)"
        )
    if spec.column is not None and (
        not isinstance(spec.column, str) or not spec.column
    ):
        raise ValueError(
            f"`column` of {where} {spec.name!r} must be a non-empty string or None. "
            f"Received: column={spec.column!r}"
        )


class _Spec:
    """What the three spec kinds share."""

    @property
    def source(self) -> str:
        """The data column the values come from: `column`, or `name`."""
        return self.column or self.name


@dataclasses.dataclass
class CategoricalFeature(_Spec):
    """A categorical column, by vocabulary (learned from data) or by hashing.

    By vocabulary, id `i < num_oov_buckets` is an out-of-vocabulary bucket (unseen or
    missing values hash into these) and known values take ids after them. With
    `hash_buckets=N`, every value hashes into `[0, N)` and no vocabulary is kept.

    Args:
        name: str. The model's input name; the data's column unless `column` is
            given.
        vocabulary: list of values, most frequent first; None until fitted.
        num_oov_buckets: int. Buckets for values outside the vocabulary. Defaults
            to 1.
        hash_buckets: int. Hash into this many buckets instead of a vocabulary.
        dtype: str. "string" or "int64", the raw values' type. Defaults to
            "string".
        min_frequency: int. Values seen fewer times go to the OOV buckets.
            Defaults to 1.
        max_tokens: int. Keep at most this many values. Defaults to no limit.
        read_as: str. How a text cell reads (dtype "string"), as pandas types the
            column it learned from: "number" (a column of numbers: "2.0", "02" and
            2.0 are all "2"), "boolean" ("true", "TRUE" and True are all "True")
            or "text" (as written). None (the default) decides when fitting: from
            a DataFrame by its column's type, from CSV files as `pandas.read_csv`
            would type the column. Typed values (2.0, True) always read as
            numbers and booleans.
        column: str. The data's column, when its name cannot name a serving
            input (spaces, accents; see `input_name`). Defaults to `name`.

    Example:

    >>> import pandas as pd
    >>> spec = CategoricalFeature("city").fit(pd.Series(["a", "b", "a"]))
    >>> spec.vocabulary, spec.vocabulary_size, spec.read_as
    (['a', 'b'], 3, 'text')
    >>> flag = CategoricalFeature("flag").fit(pd.Series([True, False]))
    >>> flag.values(pd.Series(["true", "FALSE", None])).tolist()
    ['True', 'False', '']
    """

    name: str
    vocabulary: list | None = None
    num_oov_buckets: int = 1
    hash_buckets: int | None = None
    dtype: str = "string"
    min_frequency: int = 1
    max_tokens: int | None = None
    read_as: str | None = None
    column: str | None = None
    kind: str = dataclasses.field(default="categorical", init=False)

    def __post_init__(self):
        _check_name(self)
        where = f"categorical feature {self.name!r}"
        check_choice("dtype", self.dtype, _CATEGORICAL_DTYPES, where=where)
        check_positive_int("num_oov_buckets", self.num_oov_buckets, where=where)
        check_positive_int("min_frequency", self.min_frequency, where=where)
        check_positive_int("hash_buckets", self.hash_buckets, True, where=where)
        check_positive_int("max_tokens", self.max_tokens, True, where=where)
        if self.read_as is not None:
            check_choice("read_as", self.read_as, READ_AS, where=where)
        if self.hash_buckets is not None and self.vocabulary is not None:
            raise ValueError(
                f"Categorical feature {self.name!r} takes `hash_buckets` or "
                f"`vocabulary`, not both. Received: hash_buckets={self.hash_buckets}, "
                f"vocabulary of {len(self.vocabulary)} values"
            )
        if self.vocabulary is not None:
            self.vocabulary = [self._cast(v) for v in self.vocabulary]

    def _cast(self, value):
        return int(value) if self.dtype == "int64" else str(value)

    @property
    def fitted(self) -> bool:
        return self.hash_buckets is not None or self.vocabulary is not None

    @property
    def vocabulary_size(self) -> int:
        """Number of ids the lookup produces (OOV buckets included)."""
        if self.hash_buckets is not None:
            return self.hash_buckets
        if self.vocabulary is None:
            raise ValueError(
                f"Categorical feature {self.name!r} has no vocabulary yet: call "
                "`fit_features` (or `.fit`) on data first"
            )
        return self.num_oov_buckets + len(self.vocabulary)

    def values(self, series: pd.Series) -> np.ndarray:
        """The column as the model's raw input: str (missing -> "") or int64."""
        return categorical_values(series, self.name, self.dtype, self.read_as)

    def fit(self, series: pd.Series | Counter) -> CategoricalFeature:
        """Learns the vocabulary from a column (or a Counter of the values as
        `values` gives them); returns self."""
        if self.read_as is None and self.dtype == "string":
            if isinstance(series, Counter):
                raise ValueError(
                    f"Categorical feature {self.name!r}: set `read_as` before fitting "
                    "from counts (the counted values are already read)"
                )
            self.read_as = frame_read_as(series)
        if self.hash_buckets is not None:
            return self
        counts = series if isinstance(series, Counter) else _count(self.values(series))
        self.vocabulary = _vocabulary(counts, self.min_frequency, self.max_tokens, self)
        return self


def _count(values: np.ndarray) -> Counter:
    if values.dtype.kind in "OUS":
        values = values[values != ""]  # missing strings go to the OOV buckets
    uniques, counts = np.unique(values, return_counts=True)
    return Counter(dict(zip(uniques.tolist(), counts.tolist())))


def _vocabulary(counts, min_frequency, max_tokens, spec):
    # Most frequent first, ties by value, so the same data gives the same ids.
    items = sorted(
        ((v, c) for v, c in counts.items() if c >= min_frequency),
        key=lambda vc: (-vc[1], str(vc[0])),
    )
    if max_tokens is not None:
        items = items[:max_tokens]
    return [spec._cast(v) for v, _ in items]


@dataclasses.dataclass
class NumericFeature(_Spec):
    """A numeric column, standardized with statistics learned from data.

    Inside the model a missing value (NaN) is replaced by `mean` before
    standardization, so it becomes 0 and never propagates; with `missing_indicator`
    an extra 0/1 field tells the model the value was missing.

    A non-finite value (inf, -inf, or one whose magnitude after the log transform or
    after standardization exceeds `NON_FINITE_LIMIT` = 1e19, e.g. 1e30) is treated
    as missing by default (`non_finite="missing"`: imputed, with the indicator set),
    in training and in the exported model alike, and the fitted mean and std ignore
    it. With `non_finite="error"` such a value is a `ValueError` naming the column
    when a DataFrame is read, and an `InvalidArgumentError` naming it inside the
    model (e.g. a serving request).

    Args:
        name: str. The model's input name; the data's column unless `column` is
            given.
        mean: float. Learned by fitting; None until then.
        std: float. Learned by fitting (1.0 for a constant column).
        missing_indicator: bool. Add an is-missing field. None (the default) decides
            when fitting: True when the data had missing values. An indicator that was
            always 0 in training would learn nothing.
        log: bool. Standardize `sign(x) * log1p(|x|)` instead of `x`, for heavy
            tails such as money amounts. Defaults to False.
        non_finite: str. "missing" or "error", see above. Defaults to "missing".
        column: str. The data's column, when its name cannot name a serving
            input. Defaults to `name`.

    Example:

    >>> import pandas as pd
    >>> spec = NumericFeature("age").fit(pd.Series([20.0, 40.0, None]))
    >>> spec.mean, spec.std, spec.missing_indicator
    (30.0, 10.0, True)
    """

    name: str
    mean: float | None = None
    std: float | None = None
    missing_indicator: bool | None = None
    log: bool = False
    non_finite: str = "missing"
    column: str | None = None
    kind: str = dataclasses.field(default="numeric", init=False)

    def __post_init__(self):
        _check_name(self)
        where = f"numeric feature {self.name!r}"
        self.mean = check_finite("mean", _py(self.mean), allow_none=True, where=where)
        self.std = check_finite(
            "std",
            _py(self.std),
            minimum=0,
            exclusive_minimum=True,
            allow_none=True,
            where=where,
        )
        if self.missing_indicator is not None:
            self.missing_indicator = check_bool(
                "missing_indicator", self.missing_indicator, where=where
            )
        self.log = check_bool("log", self.log, where=where)
        check_choice("non_finite", self.non_finite, NON_FINITE_MODES, where=where)

    @property
    def fitted(self) -> bool:
        return self.mean is not None and self.std is not None

    @property
    def num_fields(self) -> int:
        return 2 if self.missing_indicator else 1

    def values(self, series: pd.Series) -> np.ndarray:
        """The column as float32, missing values as NaN (non-finite ones raise
        with `non_finite="error"`; the model imputes them otherwise)."""
        x = numeric_values(series, self.name)
        if self.non_finite == "error":
            with np.errstate(invalid="ignore", over="ignore"):
                bad = ~np.isnan(x) & ~self.finite(x)
            if bad.any():
                row = series.index[int(np.argmax(bad))]
                raise ValueError(
                    f"Numeric feature {self.name!r} (non_finite='error') got the "
                    f"non-finite value {float(x[bad][0])!r} in row {row!r} of column "
                    f"{self.name!r}; clean the column or use non_finite='missing'"
                )
        return x

    def finite(self, x: np.ndarray) -> np.ndarray:
        """Where `x` counts as a real value: not NaN, not inf, and its transform
        (and standardized value, once fitted) within `NON_FINITE_LIMIT`."""
        x = np.asarray(x, "float64")
        with np.errstate(invalid="ignore", over="ignore"):
            t = self.transform(x)
            ok = np.abs(t) <= NON_FINITE_LIMIT
            if self.fitted:
                ok &= np.abs((t - self.mean) / self.std) <= NON_FINITE_LIMIT
        return ok

    def fit(self, series: pd.Series | tuple) -> NumericFeature:
        """Learns mean/std from a column (or `(count, sum, sum_sq, n_missing)`);
        missing and non-finite values are left out of the statistics."""
        if isinstance(series, tuple):
            n, total, total_sq, missing = series
        else:
            n, total, total_sq, missing = self.moments(self.values(series))
        if n == 0:
            raise ValueError(
                f"Numeric feature {self.name!r} has no non-missing value to learn "
                "its mean and std from"
            )
        mean = total / n
        var = max(total_sq / n - mean * mean, 0.0)
        self.mean = float(mean)
        self.std = float(math.sqrt(var)) if var > 1e-12 else 1.0
        if self.missing_indicator is None:
            self.missing_indicator = bool(missing)
        return self

    def moments(self, x: np.ndarray) -> tuple:
        """`(count, sum, sum_sq, n_missing)` of the real values of `t(x)`."""
        x = np.asarray(x, "float64")
        with np.errstate(invalid="ignore", over="ignore"):
            t = self.transform(x)
            real = t[np.abs(t) <= NON_FINITE_LIMIT]
        return (
            real.size,
            float(real.sum()),
            float(np.square(real).sum()),
            int(x.size - real.size),
        )

    def transform(self, x: np.ndarray) -> np.ndarray:
        return np.sign(x) * np.log1p(np.abs(x)) if self.log else x


def _py(value):
    # A NumPy scalar (np.float32(1.0)) is a number too.
    return value.item() if isinstance(value, np.generic) else value


@dataclasses.dataclass
class SequenceFeature(_Spec):
    """A behaviour history of ids that shares the table of a categorical feature.

    The raw value is one string of ids joined by `separator` (oldest first), or a
    list of ids in a DataFrame. Inside the model the history is cut to its last
    `max_len` ids and padded; the padding is masked. The ids are looked up in the
    vocabulary of the categorical feature `shares`, and embedded with its table, so
    DIN compares each past item with the candidate item.

    Args:
        name: str. The model's input name; the data's column unless `column` is
            given.
        shares: str. Name of the categorical feature whose vocabulary and embedding
            table the ids use (the candidate of DIN's attention).
        max_len: int. Length after truncation and padding. Defaults to 50.
        separator: str. Between the ids of the raw string. Defaults to "|".
        column: str. The data's column, when its name cannot name a serving
            input. Defaults to `name`.

    Example:

    >>> SequenceFeature("hist_item", shares="item", max_len=20).max_len
    20
    """

    name: str
    shares: str = ""
    max_len: int = 50
    separator: str = "|"
    column: str | None = None
    kind: str = dataclasses.field(default="sequence", init=False)

    def __post_init__(self):
        _check_name(self)
        where = f"sequence feature {self.name!r}"
        if not isinstance(self.shares, str) or not self.shares:
            raise ValueError(
                f"`shares` of sequence feature {self.name!r} must name a categorical "
                f"feature. Received: shares={self.shares!r}"
            )
        check_positive_int("max_len", self.max_len, where=where)
        if not isinstance(self.separator, str) or len(self.separator) != 1:
            raise ValueError(
                f"`separator` of sequence feature {self.name!r} must be one "
                f"character. Received: separator={self.separator!r}"
            )

    fitted = True

    def values(self, series: pd.Series) -> np.ndarray:
        """The column as separator-joined strings (lists are joined)."""
        return sequence_values(series, self.name, self.separator)


Feature = CategoricalFeature | NumericFeature | SequenceFeature
_KINDS = {
    "categorical": CategoricalFeature,
    "numeric": NumericFeature,
    "sequence": SequenceFeature,
}


# ---------------------------------------------------------------- column conversion


class CellError(ValueError):
    """A cell that a feature cannot read, with where it is.

    `row` is the row's index label: in a frame of `keras_attn.features.reader`, the
    line of its file (`frame.attrs["source"]`), and the message names both.
    """

    def __init__(self, problem: str, column: str, row, value, source=None):
        self.problem, self.column, self.row, self.value = problem, column, row, value
        self.source = source
        if source is not None:
            where = f"CSV file {source!r}, line {row}, column {column!r}"
        else:
            where = f"row {row!r} of column {column!r}"
        super().__init__(f"{problem}. Received: {value!r} ({where})")


def _fail_at(series: pd.Series, bad: np.ndarray, problem: str, column: str):
    first = int(np.argmax(bad))
    raise CellError(
        problem,
        column,
        series.index[first],
        series.iloc[first],
        source=series.attrs.get("source"),
    )


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def frame_read_as(series: pd.Series) -> str:
    """`CategoricalFeature.read_as` for a column: by its type (bool -> "boolean",
    numbers -> "number"), and for text as `pandas.read_csv` would type a column of
    that text (a text frame of `keras_attn.features.reader` is all text)."""
    if pd.api.types.is_bool_dtype(series):
        return "boolean"
    if pd.api.types.is_numeric_dtype(series):
        return "number"
    values = [v for v in pd.unique(series.to_numpy(dtype=object)) if not is_missing(v)]
    if not values:
        return "text"
    text = [v for v in values if isinstance(v, str)]
    if len(text) < len(values):  # typed values: the column is what they are
        if all(_is_bool(v) for v in values):
            return "boolean"
        if all(read_number(v) is not None and not _is_bool(v) for v in values):
            return "number"
        return "text"
    if not series.attrs.get("source"):
        return "text"  # a DataFrame's text is text
    return _text_read_as(text)


def _text_read_as(text: list[str]) -> str:
    """How pandas types a column of these (non-missing) text cells."""
    if not text:
        return "text"
    if all(v in TRUE_SPELLINGS or v in FALSE_SPELLINGS for v in text):
        return "boolean"
    if all(NUMBER.fullmatch(v) for v in text):
        return "number"
    return "text"


def _category(value, read_as) -> str:
    """One cell as a string category (see `CategoricalFeature.read_as`)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if is_missing(value):
        return ""
    if _is_bool(value):
        return str(bool(value))
    if not isinstance(value, str):
        number = read_number(value)
        return str(value) if number is None else number_text(number)
    if read_as == "number" and NUMBER.fullmatch(value):
        return number_text(read_number(value))
    if read_as == "boolean" and (value in TRUE_SPELLINGS or value in FALSE_SPELLINGS):
        return str(value in TRUE_SPELLINGS)
    return value


def categorical_values(
    series: pd.Series, name: str, dtype: str, read_as: str | None = None
) -> np.ndarray:
    """A column as raw categorical input: str with "" for missing, or int64."""
    if dtype == "int64":
        x = _numbers(series, name, f"Categorical feature {name!r} (dtype 'int64')")
        bad = np.isnan(x) | (x % 1 != 0)
        if bad.any():
            _fail_at(
                series,
                bad,
                f"Categorical feature {name!r} has dtype 'int64' and needs an "
                "integer in every row (declare it with dtype='string' to send "
                "missing values to the OOV bucket)",
                name,
            )
        return _integers(series, x)
    # One reading per distinct value: a column holds few of them.
    codes, uniques = pd.factorize(series.to_numpy(dtype=object), use_na_sentinel=True)
    table = np.array([_category(v, read_as) for v in uniques] + [""], dtype=object)
    return table[codes]


def _integers(series: pd.Series, x: np.ndarray) -> np.ndarray:
    if pd.api.types.is_integer_dtype(series) or pd.api.types.is_bool_dtype(series):
        return series.to_numpy().astype("int64")
    exact = pd.to_numeric(series, errors="coerce")  # int64 when every cell is
    if pd.api.types.is_integer_dtype(exact):
        return exact.to_numpy().astype("int64")
    return x.astype("int64")


def _numbers(series: pd.Series, name: str, what: str) -> np.ndarray:
    """A column as float64: numbers and numeric text (as pandas' parser reads
    them), the boolean spellings as 1 / 0, NaN for missing; other text raises
    naming the cell."""
    if pd.api.types.is_bool_dtype(series):
        return series.to_numpy().astype("float64")
    if pd.api.types.is_numeric_dtype(series):
        return series.to_numpy(dtype="float64", na_value=np.nan)
    cells = series.astype(object)
    out = pd.to_numeric(cells, errors="coerce").to_numpy(dtype="float64", copy=True)
    out[cells.isin(TRUE_SPELLINGS).to_numpy()] = 1.0  # as pandas types booleans
    out[cells.isin(FALSE_SPELLINGS).to_numpy()] = 0.0
    missing = (cells.isna() | (cells == "")).to_numpy()
    # Text pandas' parser reads as NaN ("nan") is no value either.
    try:
        spelled = cells.str.strip().str.lower()  # NaN where a cell is not text
        missing = missing | spelled.isin(["nan", "-nan", "+nan"]).to_numpy()
    except AttributeError:  # no text at all
        pass
    bad = np.isnan(out) & ~missing
    if bad.any():
        _fail_at(series, bad, f"{what} needs numbers", name)
    return out


def numeric_values(series: pd.Series, name: str) -> np.ndarray:
    """A column as float32 with NaN for missing; text that is no number raises
    naming the cell."""
    return _numbers(series, name, f"Numeric feature {name!r}").astype("float32")


def sequence_values(series: pd.Series, name: str, separator: str) -> np.ndarray:
    def join(v):
        if isinstance(v, str):
            return v
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return ""
        if isinstance(v, (list, tuple, np.ndarray)):
            return separator.join(str(x) for x in v)
        raise ValueError(
            f"Sequence feature {name!r} takes a {separator!r}-joined string or a list "
            f"of ids per row. Received: {v!r} ({type(v).__name__})"
        )

    return np.array([join(v) for v in series], dtype=object)


def check_columns(columns: Iterable[str], needed: Iterable[str], where: str) -> None:
    """Raises naming each missing column and the columns present."""
    columns = list(columns)
    missing = [c for c in needed if c not in columns]
    if missing:
        raise ValueError(
            f"{where} lacks column(s) {missing}. Columns present: {columns}"
        )


# ------------------------------------------------------------------ infer and fit


def infer_features(
    df: pd.DataFrame,
    labels: Sequence[str] = (),
    exclude: Sequence[str] = (),
    categorical: Sequence[str] = (),
    numeric: Sequence[str] = (),
    overrides: dict | None = None,
    max_integer_categories: int = 20,
    hash_threshold: int = 10_000,
    num_oov_buckets: int = 1,
) -> list[Feature]:
    """Proposes fitted feature specs for every column of `df` except the labels.

    A column whose name cannot name a serving input ("Annual Income") gets a spec
    named by `input_name` ("Annual_Income") with `column` set, so the model's input
    and the export's signature carry that name while the data keep theirs.

    Strings, booleans and pandas categoricals become `CategoricalFeature`s by
    vocabulary, or by hashing into twice their cardinality when they have more than
    `hash_threshold` distinct values; integers with at most
    `max_integer_categories` distinct values become categorical (int64), other
    numbers `NumericFeature`s (with a missing indicator when they have NaN).

    Args:
        df: the training DataFrame.
        labels: label columns, left out.
        exclude: other columns to leave out (ids, sampling weights).
        categorical: columns forced to be categorical.
        numeric: columns forced to be numeric.
        overrides: `{column: spec}` used as given (fitted here if not yet fitted).
        max_integer_categories: integer columns with at most this many values are
            categorical. Defaults to 20.
        hash_threshold: categorical columns with more distinct values are hashed.
            Defaults to 10,000.
        num_oov_buckets: OOV buckets of each vocabulary. Defaults to 1.

    Returns:
        A list of fitted specs, in column order.

    Example:

    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [31.5, 40.0], "city": ["a", "b"], "y": [0, 1]})
    >>> [f.kind for f in infer_features(df, labels=["y"])]
    ['numeric', 'categorical']
    """
    if not isinstance(df, pd.DataFrame):
        raise ValueError(
            f"`df` must be a pandas DataFrame. Received: {type(df).__name__}"
        )
    overrides = dict(overrides or {})
    named = [*labels, *exclude, *categorical, *numeric, *overrides]
    check_columns(df.columns, named, "The DataFrame")
    both = set(categorical) & set(numeric)
    if both:
        raise ValueError(
            f"Columns {sorted(both)} are in both `categorical` and `numeric`"
        )
    features = []
    # Task outputs are named after label columns; columns that can name an input
    # keep their names.
    taken = set(labels) | {c for c in df.columns if is_input_name(c)}
    for column in df.columns:
        if column in labels or column in exclude:
            continue
        series = df[column]
        # A column whose name cannot name a serving input gets one that can; the
        # spec keeps the column (and the export's feature file with it).
        name = column if is_input_name(column) else input_name(column, taken)
        taken.add(name)
        named = {} if name == column else {"column": column}
        if column in overrides:
            spec = overrides[column]
        elif column in numeric:
            spec = NumericFeature(name, **named)
        elif column in categorical or _looks_categorical(
            series, max_integer_categories
        ):
            integer = pd.api.types.is_integer_dtype(series)
            cardinality = series.nunique(dropna=True)
            spec = CategoricalFeature(
                name,
                **named,
                dtype="int64" if integer else "string",
                num_oov_buckets=num_oov_buckets,
                hash_buckets=2 * cardinality if cardinality > hash_threshold else None,
            )
        else:
            spec = NumericFeature(name, **named)
        if _needs_fit(spec):
            spec.fit(series)
        features.append(spec)
    return features


def _looks_categorical(series: pd.Series, max_integer_categories: int) -> bool:
    if pd.api.types.is_bool_dtype(series):
        return True
    if pd.api.types.is_integer_dtype(series):
        return series.nunique(dropna=True) <= max_integer_categories
    return not pd.api.types.is_numeric_dtype(series)


def fit_features(
    features: Sequence[Feature],
    data: pd.DataFrame | str | Path | Sequence[str | Path] | CSVFiles,
    chunksize: int = 100_000,
) -> list[Feature]:
    """Learns every unfitted spec's statistics from a DataFrame or CSV files.

    CSV files (paths, or `CSVFiles` for another encoding) are read in chunks of
    `chunksize` rows by `keras_attn.features.reader`, so they need not fit in
    memory; their cells read as `pandas.read_csv` would read the whole file.
    Returns the specs (fitted in place).

    Example:

    >>> import pandas as pd
    >>> specs = fit_features(
    ...     [NumericFeature("x"), CategoricalFeature("c")],
    ...     pd.DataFrame({"x": [1.0, 3.0], "c": ["u", "v"]}),
    ... )
    >>> specs[0].mean, specs[1].vocabulary
    (2.0, ['u', 'v'])
    """
    features = list(features)
    todo = [f for f in features if _needs_fit(f)]
    if not todo:
        return features
    if isinstance(data, pd.DataFrame):
        check_columns(data.columns, [f.source for f in todo], "The DataFrame")
        for f in todo:
            f.fit(data[f.source])
        return features
    # A string column's cells are counted as text: how they read (numbers,
    # booleans) is decided from the whole column, as pandas types it.
    text = {f.name: Counter() for f in todo if _reads_text(f)}
    counts = {f.name: Counter() for f in todo if f.kind == "categorical"}
    moments = {f.name: [0, 0.0, 0.0, 0] for f in todo if f.kind == "numeric"}
    for chunk in iter_csv_frames(data, [f.source for f in todo], chunksize):
        for f in todo:
            if f.name in text:
                text[f.name].update(chunk[f.source].dropna().tolist())
            elif f.kind == "categorical":
                counts[f.name].update(_count(f.values(chunk[f.source])))
            else:
                m = moments[f.name]
                for i, part in enumerate(f.moments(f.values(chunk[f.source]))):
                    m[i] += part
    for f in todo:
        if f.name in text:
            if f.read_as is None:
                f.read_as = _text_read_as(list(text[f.name]))
            for value, n in text[f.name].items():
                counts[f.name][_category(value, f.read_as)] += n
            counts[f.name].pop("", None)  # missing goes to the OOV buckets
        f.fit(counts[f.name] if f.kind == "categorical" else tuple(moments[f.name]))
    return features


def _needs_fit(spec) -> bool:
    return not spec.fitted or _reads_text(spec) and spec.read_as is None


def _reads_text(spec) -> bool:
    return spec.kind == "categorical" and spec.dtype == "string"


# ---------------------------------------------------------------------- JSON


def features_to_json(features: Sequence[Feature]) -> str:
    """The spec set as JSON text (`features_from_json` reads it back)."""
    items = []
    for f in features:
        d = dataclasses.asdict(f)
        items.append({"kind": d.pop("kind"), **d})
    return json.dumps({"features": items}, indent=1)


def features_from_json(text: str) -> list[Feature]:
    """The spec set from `features_to_json`'s text.

    Example:

    >>> specs = [NumericFeature("x", mean=0.0, std=2.0)]
    >>> features_from_json(features_to_json(specs)) == specs
    True
    """
    data = json.loads(text)
    features = []
    for item in data["features"]:
        item = dict(item)
        kind = item.pop("kind", None)
        if kind not in _KINDS:
            raise ValueError(
                f"Unknown feature kind {kind!r}: expected one of {sorted(_KINDS)}"
            )
        features.append(_KINDS[kind](**item))
    return features


def save_features(features: Sequence[Feature], path: str | Path) -> None:
    Path(path).write_text(features_to_json(features))


def load_features(path: str | Path) -> list[Feature]:
    return features_from_json(Path(path).read_text())
