"""pandas DataFrames and CSV files -> `tf.data` of (raw feature dict, label dict).

Raw strings reach `fit` through `tf.data` in both Keras generations (Keras 3 refuses
NumPy object arrays), so this is the one input path of the CTR models.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from keras_attn._validation import check_positive_int
from keras_attn.backend import tf
from keras_attn.features.specs import (
    check_columns,
    csv_paths,
    iter_csv_chunks,
    numeric_values,
)

__all__ = ["check_label_classes", "label_columns", "to_dataset"]


def label_columns(labels) -> list[tuple[str, str, list | None]]:
    """`(output key, column, positive values or None)` for each label.

    A label is a column name (its values are read as numbers) or an object with
    `name`, `label` and `positive` attributes, like `keras_attn.models.Task`: the
    output key is `name`, the column `label`, and with `positive` set a row is 1 where
    the column (stripped) equals one of the positive values and 0 elsewhere.
    """
    if isinstance(labels, str):
        labels = [labels]
    out = []
    for item in labels or ():
        if isinstance(item, str):
            out.append((item, item, None))
            continue
        positive = getattr(item, "positive", None)
        if positive is not None and not isinstance(positive, (list, tuple)):
            positive = [positive]
        out.append((item.name, getattr(item, "label", None) or item.name, positive))
    return out


def _seen(series: pd.Series, limit: int = 10) -> str:
    values = series.astype(str).str.strip().value_counts()
    shown = [f"{v!r} ({c})" for v, c in values.iloc[:limit].items()]
    more = f" and {len(values) - limit} more" if len(values) > limit else ""
    return ", ".join(shown) + more


def check_label_classes(series: pd.Series, column: str, positive) -> None:
    """A training label column must hold both classes: with `positive`, some but
    not all rows equal to a positive value; without, at least two distinct values.
    Raises naming the column and the values seen (with their counts)."""
    y = _label_values(series, column, positive)
    if positive is not None and not y.any():
        raise ValueError(
            f"Label column {column!r} holds no value equal to the task's `positive` "
            f"({[str(p) for p in positive]}). Values seen: {_seen(series)}"
        )
    if len(y) and np.unique(y).size < 2:
        raise ValueError(
            f"Label column {column!r} holds only one class, so a model would learn "
            f"a constant. Values seen: {_seen(series)}"
        )


def _label_values(series: pd.Series, column: str, positive) -> np.ndarray:
    if positive is not None:
        text = series.astype(str).str.strip()
        wanted = {str(p).strip() for p in positive}
        return text.isin(wanted).to_numpy().astype("float32")[:, None]
    try:
        values = numeric_values(series, column)
    except ValueError as error:
        raise ValueError(
            f"Label column {column!r} is not numeric: give its task `positive=` (the "
            f"value(s) that mean 1). {error}"
        ) from None
    if np.isnan(values).any():
        raise ValueError(f"Label column {column!r} has missing values")
    return values[:, None]


def _frame_arrays(df: pd.DataFrame, features, labels, check_labels=False):
    check_columns(
        df.columns,
        [f.name for f in features] + [c for _, c, _ in labels],
        "The DataFrame",
    )
    if check_labels:
        for _, col, pos in labels:
            check_label_classes(df[col], col, pos)
    x = {f.name: f.values(df[f.name]) for f in features}
    y = {key: _label_values(df[col], col, pos) for key, col, pos in labels}
    return x, y


def to_dataset(
    data: pd.DataFrame | str | Path | Sequence[str | Path],
    features,
    labels=(),
    batch_size: int = 256,
    shuffle: bool = False,
    seed: int | None = None,
    num_epochs: int = 1,
    shuffle_buffer: int = 100_000,
    drop_remainder: bool = False,
    preprocessor=None,
    check_labels: bool = True,
) -> tf.data.Dataset:
    """A `tf.data.Dataset` of `(raw features, labels)` batches for a CTR model.

    From a DataFrame, the columns are converted once (categories to strings, missing
    to "", numbers to float32 with NaN for missing; the model imputes them). From CSV
    paths (with a header row), the files are streamed with
    `tf.data.experimental.make_csv_dataset`, so they need not fit in memory; the first
    rows are checked with pandas so that a wrong column type fails early and clearly.

    Args:
        data: a DataFrame, or one or more CSV paths.
        features: the feature specs (only their columns are read).
        labels: label column names, or tasks with `name`, `label` and `positive`
            (see `label_columns`). Empty gives batches of features alone.
        batch_size: int. Defaults to 256.
        shuffle: bool. Shuffle rows each epoch. Defaults to False.
        seed: int. Shuffle seed.
        num_epochs: int. Repeat the data this many times (None: forever).
            Defaults to 1.
        shuffle_buffer: int. Rows in the shuffle buffer (CSV; a DataFrame is
            shuffled whole). Defaults to 100,000.
        drop_remainder: bool. Drop the last, smaller batch. Defaults to False.
        preprocessor: optional Keras model from raw feature dicts to encoded inputs
            (the first part of `keras_attn.models.split_ctr_model`). A DataFrame is
            then encoded once, up front, and the batches hold the encoded values
            (ids, standardized numbers); CSV batches are encoded as they stream.
        check_labels: bool. A DataFrame's label columns must each hold both
            classes (a label without any row equal to its task's `positive`, or
            with one value only, is a `ValueError` naming the column and the values
            seen). False for evaluating a slice of one class. CSV files stream and
            are not checked. Defaults to True.

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
    features = list(features)
    labels = label_columns(labels)
    if isinstance(data, pd.DataFrame):
        if not len(data):
            raise ValueError(
                "`data` must have at least one row. Received: an empty DataFrame "
                f"with columns {list(data.columns)}"
            )
        x, y = _frame_arrays(data, features, labels, check_labels=check_labels)
        x = tf.nest.map_structure(tf.constant, x)
        if preprocessor is not None:
            x = _encode(preprocessor, x, len(data))
        tensors = (x, tf.nest.map_structure(tf.constant, y)) if labels else x
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
    ds = _csv_dataset(
        data,
        features,
        labels,
        batch_size,
        shuffle,
        seed,
        num_epochs,
        shuffle_buffer,
        drop_remainder,
    )
    if preprocessor is None:
        return ds

    def encode(*batch):
        return (preprocessor(batch[0]), *batch[1:]) if labels else preprocessor(batch)

    return ds.map(encode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
        tf.data.AUTOTUNE
    )


def _encode(preprocessor, x, n, chunk=16_384):
    """The preprocessor's outputs for whole columns, computed in chunks of rows."""
    parts = []
    for start in range(0, n, chunk):
        rows = tf.nest.map_structure(lambda t, s=start: t[s : s + chunk], x)
        parts.append(preprocessor(rows, training=False))
    if not parts:
        return preprocessor(x, training=False)
    return tf.nest.map_structure(lambda *p: tf.concat(p, axis=0), *parts)


def _csv_dataset(
    data, features, labels, batch_size, shuffle, seed, num_epochs, buffer, drop
):
    paths = csv_paths(data)
    columns = [f.name for f in features] + [c for _, c, _ in labels]
    header = list(pd.read_csv(paths[0], nrows=0).columns)
    check_columns(header, columns, f"CSV file {paths[0]!r}")
    # Fail early, with the column's name, on a wrong type in the first rows.
    head = next(iter_csv_chunks(paths[:1], list(dict.fromkeys(columns)), 1000))
    _frame_arrays(head, features, labels)

    kinds = {}
    for f in features:
        if f.kind == "numeric":
            kinds[f.name] = float("nan")
        elif f.kind == "categorical" and f.dtype == "int64":
            kinds[f.name] = tf.int64
        else:
            kinds[f.name] = ""
    for _, col, pos in labels:
        kinds.setdefault(col, "" if pos is not None else tf.float32)
    selected = [c for c in header if c in kinds]
    ds = tf.data.experimental.make_csv_dataset(
        paths,
        batch_size=batch_size,
        select_columns=selected,
        column_defaults=[kinds[c] for c in selected],
        num_epochs=num_epochs,
        shuffle=shuffle,
        shuffle_buffer_size=buffer,
        shuffle_seed=seed,
        header=True,
        compression_type="GZIP" if paths[0].endswith(".gz") else None,
        sloppy=not shuffle or seed is None,
        prefetch_buffer_size=tf.data.AUTOTUNE,
    )
    if drop:
        ds = ds.unbatch().batch(batch_size, drop_remainder=True)

    def split(row):
        x = {}
        for f in features:
            value = row[f.name]
            if f.kind == "numeric":
                value = tf.cast(value, tf.float32)
            x[f.name] = value
        if not labels:
            return x
        y = {}
        for key, col, pos in labels:
            value = row[col]
            if pos is not None:
                wanted = tf.constant([str(p).strip() for p in pos])
                hit = tf.equal(tf.strings.strip(value)[:, None], wanted[None, :])
                value = tf.reduce_any(hit, axis=1)
            y[key] = tf.cast(value, tf.float32)[:, None]
        return x, y

    return ds.map(split, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
