"""The one reading of CSV files: header, chunks of text, and the checks on the way.

Every path that reads a CSV file (the feature statistics, the training stream,
`predict`, the text loaders of the command line) reads it here, so each sees the
same value for the same cell. A file is UTF-8 (with or without the byte-order mark
Excel writes) unless `CSVFiles(encoding=...)` says otherwise, has a header row of
distinct names, and every record has one field per name; cells come out as text,
with pandas' missing-value spellings (`keras_attn._cells.NA_SPELLINGS`: "", "NA",
"null", ...) as NaN. Which text is a number or a boolean is decided per column by the
feature specs (`keras_attn.features.specs`), as pandas types a column.

A frame's index is the line number of each record in its file, and
`frame.attrs["source"]` the file, so an error about a cell names file, line and
column.
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import gzip
import io
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from keras_attn._cells import FALSE_SPELLINGS, NA_SPELLINGS, NUMBER, TRUE_SPELLINGS

__all__ = [
    "CSVFiles",
    "csv_files",
    "decode_error",
    "iter_csv_frames",
    "open_text",
    "read_csv_head",
    "read_header",
]

# A field of a few MB is real data (a long document); csv's default limit is 128 KB.
csv.field_size_limit(2**31 - 1)


@dataclasses.dataclass(frozen=True)
class CSVFiles:
    """One or more CSV files with a header row, and their text encoding.

    Pass it wherever CSV paths are taken (`to_dataset`, `fit_features`,
    `fit_ctr_model`) to read files that are not UTF-8.

    Args:
        paths: a path or a list of paths (`.gz` files are read through gzip).
        encoding: str. The files' encoding (a name Python's `codecs` knows).
            Defaults to "utf-8", which also reads a file that starts with the
            UTF-8 byte-order mark.

    Example:

    >>> CSVFiles("train.csv", encoding="latin-1").paths
    ('train.csv',)
    """

    paths: tuple
    encoding: str = "utf-8"

    def __post_init__(self):
        paths = self.paths
        if isinstance(paths, (str, Path)):
            paths = [paths]
        paths = tuple(str(p) for p in paths)
        if not paths:
            raise ValueError("`paths` must name at least one CSV file. Received: []")
        object.__setattr__(self, "paths", paths)
        try:
            codecs.lookup(self.encoding)
        except (LookupError, TypeError):
            raise ValueError(
                "`encoding` must be a text encoding Python knows (e.g. 'utf-8', "
                f"'latin-1', 'cp1252'). Received: encoding={self.encoding!r}"
            ) from None

    def check_exist(self) -> None:
        for p in self.paths:
            if not Path(p).is_file():
                raise ValueError(f"CSV file {p!r} does not exist")


def csv_files(data) -> CSVFiles:
    """`data` (a path, a list of paths, or `CSVFiles`) as `CSVFiles`, checked to
    exist."""
    files = data if isinstance(data, CSVFiles) else CSVFiles(data)
    files.check_exist()
    return files


def open_text(path, encoding: str = "utf-8"):
    """`(text handle, the file's binary handle)` of a data file (CSV, JSON lines;
    gzip when it ends in .gz), the second for the position read. UTF-8 (the
    default) also reads a file that starts with a byte-order mark; a byte that
    does not decode raises `UnicodeDecodeError` (`decode_error` says it)."""
    # "utf-8-sig" reads UTF-8 and drops a leading byte-order mark (Excel's "CSV
    # UTF-8"); a BOM would otherwise stick to the first column's name.
    if codecs.lookup(encoding).name == "utf-8":
        encoding = "utf-8-sig"
    path = str(path)
    raw = open(path, "rb")
    gzipped = path.lower().endswith(".gz")
    stream = gzip.GzipFile(fileobj=raw) if gzipped else raw
    return io.TextIOWrapper(stream, encoding=encoding, newline=""), raw


class _Records:
    """The records of one file after its header, with their line numbers."""

    def __init__(self, path: str, encoding: str):
        self.path, self.encoding = path, encoding
        self.handle, self.raw = open_text(path, encoding)
        self.reader = csv.reader(self.handle)
        self.line = 0  # the last line read
        header = self._next()
        if header is None:
            self.close()
            raise ValueError(f"CSV file {path!r} is empty: it needs a header row")
        self.header = _header_names(header, path)

    def _next(self):
        try:
            while True:
                row = next(self.reader)
                start, self.line = self.line + 1, self.reader.line_num
                if row:  # blank lines are skipped, as pandas skips them
                    self.start = start
                    return row
        except StopIteration:
            return None
        except UnicodeDecodeError as error:
            raise decode_error(self.path, self.encoding, self.line + 1, error) from None
        except csv.Error as error:
            raise ValueError(
                f"CSV file {self.path!r}, line {self.reader.line_num}: {error}"
            ) from None
        except (OSError, EOFError, zlib.error) as error:
            # A .gz file that is not gzip, or was cut short (a half-written file).
            raise ValueError(
                f"CSV file {self.path!r} cannot be read after line {self.line}: "
                f"{error} (a truncated or corrupt file?)"
            ) from None

    def chunks(self, columns: Sequence[int], size: int):
        """`(lines, {column index: list of cells})` of up to `size` records."""
        width = len(self.header)
        while True:
            lines, rows = [], []
            while len(rows) < size:
                row = self._next()
                if row is None:
                    break
                if len(row) != width:
                    raise ValueError(
                        f"CSV file {self.path!r}, line {self.start}: {len(row)} "
                        f"field(s) where the header has {width} "
                        f"({', '.join(self.header)}). A field holding the separator "
                        "or a line break must be quoted"
                    )
                lines.append(self.start)
                rows.append(row)
            if not rows:
                return
            yield lines, {i: [r[i] for r in rows] for i in columns}
            if len(rows) < size:
                return

    def close(self):
        self.handle.close()
        self.raw.close()


def decode_error(path, encoding, line, error) -> ValueError:
    """The error for a `UnicodeDecodeError` of `open_text`'s handle: the file,
    the line (None: unknown), the byte, and how to give the encoding."""
    byte = error.object[error.start : error.start + 1]
    where = f"line {line} (or near it) holds" if line is not None else "holds"
    return ValueError(
        f"File {str(path)!r} is not {encoding} text: {where} "
        f"the byte {byte!r} ({error.reason}). Give the file's encoding: "
        "`--encoding latin-1` (or cp1252, ...) on the command line, "
        "`CSVFiles(path, encoding=...)` in Python"
    )


def _header_names(header: list[str], path: str) -> list[str]:
    # An empty name gets pandas' spelling, "Unnamed: i" (a saved DataFrame index).
    names = [name or f"Unnamed: {i}" for i, name in enumerate(header)]
    twice = sorted(n for n, c in Counter(names).items() if c > 1)
    if twice:
        raise ValueError(
            f"CSV file {path!r} names the column(s) {twice} more than once in its "
            "header: rename them so each column has its own name"
        )
    return names


def read_header(files: CSVFiles) -> list[str]:
    """The column names of the first file; every other file must have the same."""
    files = csv_files(files)
    headers = []
    for path in files.paths:
        records = _Records(path, files.encoding)
        records.close()
        headers.append(records.header)
    for path, header in zip(files.paths[1:], headers[1:]):
        if header != headers[0]:
            raise ValueError(
                f"CSV file {path!r} has the columns {header}, but "
                f"{files.paths[0]!r} has {headers[0]}: the files of one data set "
                "must have the same header"
            )
    return headers[0]


def _check_columns(header, columns, path) -> list[int]:
    missing = [c for c in columns if c not in header]
    if missing:
        raise ValueError(
            f"CSV file {path!r} lacks column(s) {missing}. Columns present: {header}"
        )
    return [header.index(c) for c in columns]


def _frame(lines, cells, header, indices, path, text_columns) -> pd.DataFrame:
    frame = pd.DataFrame(
        {header[i]: np.array(cells[i], dtype=object) for i in indices},
        index=pd.Index(lines, name="line"),
    )
    # pandas' missing-value spellings are missing, as `pandas.read_csv` reads them;
    # in a column of documents only an empty cell is.
    for name in frame.columns:
        column = frame[name]
        gone = column == "" if name in text_columns else column.isin(NA_SPELLINGS)
        frame[name] = column.where(~gone, np.nan)
    frame.attrs["source"] = path
    return frame


def iter_csv_frames(
    data, columns: Sequence[str], chunksize: int = 100_000, text_columns=()
) -> Iterator[pd.DataFrame]:
    """The files' records in frames of up to `chunksize` rows, as text.

    Args:
        data: CSV path(s) or `CSVFiles`.
        columns: the columns to keep (each file must have them).
        chunksize: int. Rows a frame. Defaults to 100,000.
        text_columns: columns of free text (documents), where only an empty
            cell is missing: a review that reads "NA" stays one.

    Yields:
        DataFrames of `columns` (object dtype: str, NaN for missing), indexed by
        line number, with `attrs["source"]` the file and `attrs["position"]` the
        bytes of it read so far.
    """
    files = csv_files(data)
    columns = list(dict.fromkeys(columns))
    for path in files.paths:
        records = _Records(path, files.encoding)
        try:
            indices = _check_columns(records.header, columns, path)
            for lines, cells in records.chunks(indices, chunksize):
                frame = _frame(
                    lines, cells, records.header, indices, path, set(text_columns)
                )
                frame.attrs["position"] = records.raw.tell()  # bytes of the file read
                yield frame
        finally:
            records.close()


def _typed(column: pd.Series) -> pd.Series:
    """A text column typed as `pandas.read_csv` types a column: all booleans ->
    bool (object with NaN when some are missing), all numbers -> int64 (float64
    with missing ones, or with a point or an exponent), else text."""
    cells = column.dropna()
    if not len(cells):
        return column.astype("float64")  # pandas: an empty column is float
    if cells.isin(TRUE_SPELLINGS | FALSE_SPELLINGS).all():
        values = column.map(lambda v: v in TRUE_SPELLINGS if isinstance(v, str) else v)
        return values.astype(bool) if len(cells) == len(column) else values
    if all(NUMBER.fullmatch(v) for v in cells):
        return pd.to_numeric(column)
    return column


def read_csv_head(data, nrows: int) -> pd.DataFrame:
    """The first `nrows` records of the first file, typed as `pandas.read_csv`
    types them (what `infer_features` reads).

    The cells are this module's (the same text, missing cells, errors) and each
    column takes the type pandas would give it: booleans, numbers or text.
    """
    files = csv_files(data)
    frames = iter_csv_frames(
        CSVFiles(files.paths[:1], files.encoding), read_header(files), nrows
    )
    frame = next(frames, None)
    frames.close()
    if frame is None:
        raise ValueError(
            f"CSV file {files.paths[0]!r} has a header and no records: nothing to "
            "learn the features from"
        )
    typed = pd.DataFrame(
        {c: _typed(frame[c]) for c in frame.columns}, index=frame.index
    )
    typed.attrs = dict(frame.attrs)
    return typed
