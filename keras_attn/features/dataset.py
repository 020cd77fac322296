"""pandas DataFrames and CSV files -> `tf.data` of (raw feature dict, label dict).

Raw strings reach `fit` through `tf.data` in both Keras generations (Keras 3 refuses
NumPy object arrays), so this is the one input path of the CTR models.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from keras_attn._cells import category_text, read_number
from keras_attn._validation import check_int, check_positive_int
from keras_attn.backend import tf
from keras_attn.features.reader import (
    CSVFiles,
    csv_files,
    iter_csv_frames,
    read_header,
)
from keras_attn.features.specs import check_columns, features_to_json, numeric_values

__all__ = [
    "check_label_classes",
    "count_batches",
    "count_rows",
    "frame_tensors",
    "label_columns",
    "to_dataset",
]


@dataclasses.dataclass(frozen=True)
class _Label:
    key: str  # the output (task) name
    column: str
    positive: tuple | None  # the values that mean 1, or None: numbers
    kind: str  # "binary" or "regression"


def _labels(labels) -> list[_Label]:
    if isinstance(labels, str):
        labels = [labels]
    out = []
    for item in labels or ():
        if isinstance(item, str):
            out.append(_Label(item, item, None, "binary"))
            continue
        positive = getattr(item, "positive", None)
        if positive is not None and not isinstance(positive, (list, tuple)):
            positive = [positive]
        out.append(
            _Label(
                item.name,
                getattr(item, "label", None) or item.name,
                None if positive is None else tuple(positive),
                getattr(item, "kind", "binary"),
            )
        )
    return out


def label_columns(labels) -> list[tuple[str, str, list | None]]:
    """`(output key, column, positive values or None)` for each label.

    A label is a column name (its values are read as numbers) or an object with
    `name`, `label` and `positive` attributes, like `keras_attn.models.Task`: the
    output key is `name`, the column `label`, and with `positive` set a row is 1 where
    the column equals one of the positive values and 0 elsewhere (both read as
    class names: stripped, "1.0" as "1", "true" as "True").
    """
    return [
        (x.key, x.column, None if x.positive is None else list(x.positive))
        for x in _labels(labels)
    ]


def _seen(counts: Counter, limit: int = 10) -> str:
    items = sorted(counts.items(), key=lambda vc: (-vc[1], str(vc[0])))
    shown = [f"{str(v).strip()!r} ({c})" for v, c in items[:limit]]
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(shown) + more


def _check_label_counts(counts: Counter, missing: list, label: _Label) -> None:
    """The checks of one training label column, from its values' counts.

    `counts` maps each distinct cell to its rows (missing cells left out),
    `missing` names the first rows whose label is missing.
    """
    column = label.column
    if missing:
        raise ValueError(
            f"Label column {column!r} has missing values, at {', '.join(missing)}: "
            "give every row a label, or leave those rows out"
        )
    if label.positive is not None:
        wanted = {category_text(p) for p in label.positive}
        hits = [v for v in counts if category_text(v) in wanted]
        if not hits:
            raise ValueError(
                f"Label column {column!r} holds no value equal to the task's "
                f"`positive` ({sorted(wanted)}). Values seen: {_seen(counts)}"
            )
        if len(hits) == len(counts):
            raise ValueError(
                f"Label column {column!r} holds only one class (every value is the "
                f"task's `positive`, {sorted(wanted)}), so a model would learn a "
                f"constant. Values seen: {_seen(counts)}"
            )
        return
    numbers = {v: read_number(v) for v in counts}
    text = [v for v, n in numbers.items() if n is None]
    if text:
        raise ValueError(
            f"Label column {column!r} is not numeric (e.g. {text[0]!r}): give its "
            "task `positive=` (the value(s) that mean 1; on the command line "
            f"--positive {column}=VALUE). Values seen: {_seen(counts)}"
        )
    if label.kind != "binary":
        return
    outside = sorted({n for n in numbers.values() if n not in (0, 1)})
    if outside:
        raise ValueError(
            f"Label column {column!r} of a binary task must hold 0 and 1 (or "
            f"booleans); it holds {outside[:5]}. Give the task `positive=` (the "
            f"value(s) that mean 1; on the command line --positive {column}=VALUE). "
            f"Values seen: {_seen(counts)}"
        )
    if len(set(numbers.values())) < 2:
        raise ValueError(
            f"Label column {column!r} holds only one class, so a model would learn "
            f"a constant. Values seen: {_seen(counts)}"
        )


def check_label_classes(series: pd.Series, column: str, positive, kind="binary"):
    """A training label column must hold both classes, and no missing value.

    With `positive`, some but not all rows equal a positive value; without, the
    values are numbers, and for a binary task 0 and 1 (booleans too) with both
    present. Raises naming the column, the rows of missing labels, and the values
    seen (with their counts).
    """
    if positive is not None and not isinstance(positive, (list, tuple)):
        positive = [positive]
    label = _Label(column, column, None if positive is None else tuple(positive), kind)
    gaps = series.isna() | (series.astype(str).str.strip() == "")
    missing = [f"row {r!r}" for r in series.index[gaps.to_numpy()][:5]]
    _check_label_counts(Counter(series[~gaps].tolist()), missing, label)


def _label_values(series: pd.Series, label: _Label) -> np.ndarray:
    if label.positive is not None:
        wanted = {category_text(p) for p in label.positive}
        codes, uniques = pd.factorize(series.to_numpy(dtype=object))
        hit = np.array([category_text(v) in wanted for v in uniques] + [False])
        return hit[codes].astype("float32")[:, None]
    try:
        values = numeric_values(series, label.column)
    except ValueError as error:
        raise ValueError(
            f"Label column {label.column!r} is not numeric: give its task "
            f"`positive=` (the value(s) that mean 1). {error}"
        ) from None
    if np.isnan(values).any():
        rows = series.index[np.isnan(values)][:5].tolist()
        source = series.attrs.get("source")
        where = f"lines {rows} of CSV file {source!r}" if source else f"rows {rows}"
        raise ValueError(f"Label column {label.column!r} has missing values ({where})")
    return values[:, None]


def frame_tensors(
    df: pd.DataFrame, features, labels=(), preprocessor=None, check_labels=True
):
    """A DataFrame's columns as the tensors `to_dataset` batches: the raw feature
    columns (or, with a `preprocessor`, its outputs for all the rows) and the
    labels.

    Args:
        df: the rows.
        features: the feature specs (each reads its column with `values`).
        labels: label column names or tasks (see `label_columns`).
        preprocessor: optional Keras model from the raw feature dict to encoded
            inputs (the first part of `keras_attn.models.split_ctr_model`).
        check_labels: bool. The checks of `check_label_classes` on each label
            column. Defaults to True.

    Returns:
        `(features dict, {label key: (rows, 1) float32})` of tensors.
    """
    labels = _labels(labels)
    return _frame_tensors(df, list(features), labels, preprocessor, check_labels)


def _frame_tensors(df, features, labels, preprocessor, check_labels):
    x, y = _frame_arrays(df, features, labels, check_labels)
    x = tf.nest.map_structure(tf.constant, x)
    if preprocessor is not None:
        x = _encode(preprocessor, x, len(df))
    return x, tf.nest.map_structure(tf.constant, y)


def _frame_arrays(df: pd.DataFrame, features, labels, check_labels=False):
    check_columns(
        df.columns,
        [f.source for f in features] + [x.column for x in labels],
        "The DataFrame",
    )
    if check_labels:
        for x in labels:
            check_label_classes(df[x.column], x.column, x.positive, x.kind)
    x = {f.name: f.values(df[f.source]) for f in features}
    y = {lab.key: _label_values(df[lab.column], lab) for lab in labels}
    return x, y


@dataclasses.dataclass
class _CSVPass:
    rows: int
    values: dict  # {label column: Counter of its cells}
    missing: dict  # {label column: ["line N of 'file'", ...]}, the first ones


_PASSES: dict = {}


def _csv_pass(files: CSVFiles, features, labels: list[_Label]) -> _CSVPass:
    """One pass over CSV files before training: every record counted and converted
    by the specs (a bad cell fails here, naming file, line and column), the label
    columns' values counted. Kept while the files are unchanged (size, time), so
    the checks and the count of one fit read the files once."""
    stats = tuple(
        (Path(p).stat().st_size, Path(p).stat().st_mtime_ns) for p in files.paths
    )
    key = (files, stats, features_to_json(features), tuple(labels))
    if key in _PASSES:
        return _PASSES[key]
    columns = [f.source for f in features] + [x.column for x in labels]
    columns = columns or read_header(files)[:1]
    result = _CSVPass(0, {x.column: Counter() for x in labels}, {})
    result.missing = {x.column: [] for x in labels}
    for frame in iter_csv_frames(files, columns):
        result.rows += len(frame)
        for f in features:
            f.values(frame[f.source])
        for x in labels:
            cells = frame[x.column]
            result.values[x.column].update(cells.dropna().tolist())
            gaps = cells.index[cells.isna().to_numpy()]
            room = 5 - len(result.missing[x.column])
            source = frame.attrs["source"]
            result.missing[x.column] += [f"line {g} of {source!r}" for g in gaps[:room]]
    # Two kept: a fit reads its training and its validation files.
    while len(_PASSES) >= 2:
        del _PASSES[next(iter(_PASSES))]
    _PASSES[key] = result
    return result


def count_rows(data, labels=(), features=()) -> int:
    """Rows of a DataFrame, or records of CSV files.

    CSV files are read once with `features` and the columns of `labels`, a pass
    that `to_dataset`'s checks of the same files then reuse.
    """
    if isinstance(data, pd.DataFrame):
        return len(data)
    return _csv_pass(csv_files(data), list(features), _labels(labels)).rows


def count_batches(data, batch_size: int, labels=(), features=()) -> int:
    """Full batches of `batch_size` in `data` (a DataFrame, or CSV files counted
    as `count_rows` does); a fit of none is an error: Keras 3 would run epochs of
    zero steps and return the untrained model.

    Raises:
        ValueError: fewer rows than `batch_size`, naming both.
    """
    rows = count_rows(data, labels, features)
    if rows < batch_size:
        raise ValueError(
            "`data` must hold at least one full batch of `batch_size` rows. "
            f"Received: {rows} rows, batch_size={batch_size}"
        )
    return rows // batch_size


def _check_csv(files: CSVFiles, features, labels: list[_Label], check_labels) -> int:
    """Every record of the files, before any batch: at least one, each cell read
    by its spec, and (`check_labels`) the label checks of `check_label_classes`.
    Returns the number of records."""
    result = _csv_pass(files, features, labels if check_labels else [])
    if not result.rows:
        raise ValueError(
            f"`data` must have at least one row. Received: CSV file(s) {files.paths} "
            "with a header and no records"
        )
    if check_labels:
        for x in labels:
            _check_label_counts(result.values[x.column], result.missing[x.column], x)
    return result.rows


def to_dataset(
    data: pd.DataFrame | str | Path | Sequence[str | Path] | CSVFiles,
    features,
    labels=(),
    batch_size: int = 256,
    shuffle: bool = False,
    seed: int | None = None,
    num_epochs: int | None = 1,
    shuffle_buffer: int = 100_000,
    drop_remainder: bool = False,
    preprocessor=None,
    check_labels: bool = True,
    start_epoch: int = 0,
) -> tf.data.Dataset:
    """A `tf.data.Dataset` of `(raw features, labels)` batches for a CTR model.

    From a DataFrame, the columns are converted once (categories to strings, missing
    to "", numbers to float32 with NaN for missing; the model imputes them). CSV
    files (with a header row) are streamed in chunks by `keras_attn.features.reader`,
    so they need not fit in memory, and each chunk is converted by the same specs:
    a cell reads as in the DataFrame `pandas.read_csv` gives for the file (see
    `CategoricalFeature.read_as`). A bad cell met in the stream is an error naming
    the file, the line and the column.

    Args:
        data: a DataFrame, or one or more CSV paths, or `CSVFiles` (to give the
            files' encoding).
        features: the feature specs (only their columns are read).
        labels: label column names, or tasks with `name`, `label` and `positive`
            (see `label_columns`). Empty gives batches of features alone.
        batch_size: int. Defaults to 256.
        shuffle: bool. Shuffle rows each epoch. Defaults to False.
        seed: int. Shuffle seed.
        num_epochs: int. Repeat the data this many times (None: forever).
            Defaults to 1.
        shuffle_buffer: int. CSV rows shuffled together (a DataFrame is shuffled
            whole). Defaults to 100,000.
        drop_remainder: bool. Drop the last, smaller batch (of each pass over CSV
            files). Defaults to False.
        preprocessor: optional Keras model from raw feature dicts to encoded inputs
            (the first part of `keras_attn.models.split_ctr_model`). A DataFrame is
            then encoded once, up front, and the batches hold the encoded values
            (ids, standardized numbers); CSV batches are encoded as they stream.
        check_labels: bool. Every label column must hold both classes and no
            missing value, and a binary task's numbers must be 0 and 1 (see
            `check_label_classes`). False for evaluating a slice of one class.
            CSV files are read once before any batch, every cell by its spec, so
            a bad cell fails here (with `check_labels`, a bad label too).
            Defaults to True.
        start_epoch: int. CSV files: the first pass produced. The order of pass
            `e` depends only on `(seed, e)`, so a fit resumed at epoch `e` sees the
            batches an uninterrupted one saw. Defaults to 0.

    Returns:
        Batches `({feature: (batch,)}, {task: (batch, 1) float32})`, or feature dicts
        when there are no labels; with a `preprocessor`, its outputs in place of the
        raw features.

    Example:

    >>> import pandas as pd
    >>> from keras_attn.features import CategoricalFeature, NumericFeature
    >>> df = pd.DataFrame({"c": ["a", "b"], "x": [1.0, None], "y": [0, 1]})
    >>> specs = [CategoricalFeature("c", ["a"]), NumericFeature("x", 1.0, 1.0)]
    >>> x, y = next(iter(to_dataset(df, specs, ["y"], batch_size=2)))
    >>> x["c"].numpy().tolist(), y["y"].numpy().tolist()
    ([b'a', b'b'], [[0.0], [1.0]])
    """
    check_positive_int("batch_size", batch_size)
    check_positive_int("shuffle_buffer", shuffle_buffer)
    check_int("start_epoch", start_epoch, minimum=0)
    features = list(features)
    labels = _labels(labels)
    if isinstance(data, pd.DataFrame):
        if not len(data):
            raise ValueError(
                "`data` must have at least one row. Received: an empty DataFrame "
                f"with columns {list(data.columns)}"
            )
        x, y = _frame_tensors(data, features, labels, preprocessor, check_labels)
        tensors = (x, y) if labels else x
        # Shuffle and batch row indices, then gather whole batches: one vectorized
        # gather per column instead of per-row work across dozens of columns.
        ds = tf.data.Dataset.range(len(data))
        if shuffle:
            ds = ds.shuffle(len(data), seed=seed, reshuffle_each_iteration=True)
        if num_epochs != 1:
            ds = ds.repeat(num_epochs)
        ds = ds.batch(batch_size, drop_remainder=drop_remainder)
        ds = ds.map(
            lambda i: tf.nest.map_structure(lambda t: tf.gather(t, i), tensors),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        return ds.prefetch(tf.data.AUTOTUNE)
    files = csv_files(data)
    rows = _check_csv(files, features, labels, check_labels)
    ds = _csv_dataset(
        files,
        features,
        labels,
        batch_size,
        shuffle,
        seed,
        num_epochs,
        shuffle_buffer,
        drop_remainder,
        start_epoch,
    )
    if num_epochs is not None:
        # Known from the pass before: Keras (tf_keras with several steps per
        # execution) needs the length of an evaluation's input.
        per_pass = rows // batch_size if drop_remainder else -(-rows // batch_size)
        ds = ds.apply(tf.data.experimental.assert_cardinality(per_pass * num_epochs))
    if preprocessor is None:
        return ds

    def encode(*batch):
        return (preprocessor(batch[0]), *batch[1:]) if labels else preprocessor(batch)

    return ds.map(encode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
        tf.data.AUTOTUNE
    )


def _encode(preprocessor, x, n, chunk=262_144):
    """The preprocessor's outputs for whole columns, computed in chunks of rows.

    Each call of the preprocessor model costs a pass over its few dozen layers:
    on the census rows (56,000) chunks of 16,384 took 0.20-0.47 s against
    0.09-0.12 s in one call; the chunks bound the memory of larger frames."""
    parts = []
    for start in range(0, n, chunk):
        rows = tf.nest.map_structure(lambda t, s=start: t[s : s + chunk], x)
        parts.append(preprocessor(rows, training=False))
    if not parts:
        return preprocessor(x, training=False)
    return tf.nest.map_structure(lambda *p: tf.concat(p, axis=0), *parts)


def _raw_spec(feature) -> tf.TensorSpec:
    if feature.kind == "numeric":
        return tf.TensorSpec([None], tf.float32)
    if feature.kind == "categorical" and feature.dtype == "int64":
        return tf.TensorSpec([None], tf.int64)
    return tf.TensorSpec([None], tf.string)


def _csv_dataset(
    files, features, labels, batch_size, shuffle, seed, num_epochs, buffer, drop, start
):
    columns = [f.source for f in features] + [x.column for x in labels]
    check_columns(read_header(files), columns, f"CSV file {files.paths[0]!r}")
    if seed is None:
        seed = int(np.random.default_rng().integers(2**31))
    x_spec = {f.name: _raw_spec(f) for f in features}
    y_spec = {x.key: tf.TensorSpec([None, 1], tf.float32) for x in labels}
    signature = (x_spec, y_spec) if labels else x_spec

    def batches(epoch):
        # The rows of a pass, in chunks of `buffer` records each shuffled by
        # (seed, epoch, chunk): the order depends on the epoch only.
        epoch = int(epoch)
        carry = None
        frames = iter_csv_frames(files, columns, chunksize=buffer)
        for number, frame in enumerate(frames):
            arrays = _frame_arrays(frame, features, labels)
            if shuffle:
                order = np.random.default_rng([seed, epoch, number]).permutation(
                    len(frame)
                )
                arrays = tf.nest.map_structure(lambda a, o=order: a[o], arrays)
            if carry is not None:
                arrays = tf.nest.map_structure(
                    lambda a, b: np.concatenate([a, b]), carry, arrays
                )
            n = _rows(arrays)
            full = n - n % batch_size
            for i in range(0, full, batch_size):
                yield _element(arrays, i, i + batch_size, labels)
            carry = tf.nest.map_structure(lambda a, f=full: a[f:], arrays)
        if carry is not None and not drop and _rows(carry):
            yield _element(carry, 0, _rows(carry), labels)

    last = None if num_epochs is None else start + num_epochs
    epochs = tf.data.Dataset.range(start, last if last is not None else 2**62)
    ds = epochs.flat_map(
        lambda e: tf.data.Dataset.from_generator(
            batches, args=(e,), output_signature=signature
        )
    )
    return ds.prefetch(tf.data.AUTOTUNE)


def _rows(arrays) -> int:
    return len(tf.nest.flatten(arrays)[0])


def _element(arrays, start, stop, labels):
    x, y = tf.nest.map_structure(lambda a: a[start:stop], arrays)
    return (x, y) if labels else x
