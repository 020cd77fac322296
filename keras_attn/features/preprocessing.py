"""Preprocessing layers that live inside a CTR model, so it takes raw values.

`NumericPreprocessing` imputes, standardizes and flags missing numbers;
`SequenceSplit` turns a joined history string into padded ids and a mask;
`StackColumns` stacks per-feature columns into one `(batch, fields)` tensor.
`build_preprocessing` wires them, with Keras' StringLookup / IntegerLookup / Hashing
for the categorical features, from a list of feature specs.
"""

from __future__ import annotations

import numpy as np

from keras_attn._validation import check_choice, check_positive_int
from keras_attn.backend import Layer, keras, register, tf
from keras_attn.features.specs import NON_FINITE_LIMIT, NON_FINITE_MODES

__all__ = [
    "NumericPreprocessing",
    "SequenceSplit",
    "StackColumns",
    "build_preprocessing",
    "categorical_lookup",
]


@register
class NumericPreprocessing(Layer):
    """Imputes, standardizes and flags missing values of several numeric columns.

    Column `j` becomes `(t(x_j) - mean_j) / std_j` with `t` the identity or
    `sign(x) log1p(|x|)`, and a NaN becomes 0 (the mean); where `indicators[j]` is
    set, an extra 0/1 column says the value was missing. NaN never reaches the output.
    A non-finite value (inf, -inf, or `|t(x)|` or the standardized value above
    `NON_FINITE_LIMIT` = 1e19) is missing too in a "missing" column, and fails an
    in-graph assertion naming the column in an "error" column (a no-op under XLA,
    which drops assertions). Under float16 the output is clipped to +-65504.

    Args:
        means: list of float. Mean of each column (after `t`).
        stds: list of float. Standard deviation of each column (after `t`).
        logs: list of bool. Apply `sign(x) log1p(|x|)` first. Defaults to all False.
        indicators: list of bool. Add an is-missing column. Defaults to all False.
        non_finite: list of str, "missing" or "error" per column. Defaults to all
            "missing".
        columns: list of str. Column names, for the messages. Defaults to
            "column 0", "column 1", ...

    Call arguments:
        inputs: list of float `(batch,)` tensors, one per column.

    Returns:
        `(batch, num_columns + sum(indicators))`: the standardized columns, then the
        indicators.

    Example:

    >>> import numpy as np
    >>> layer = NumericPreprocessing([1.0], [2.0], indicators=[True])
    >>> layer([np.array([3.0, np.nan, np.inf], "float32")]).numpy().tolist()
    [[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]
    """

    def __init__(
        self,
        means,
        stds,
        logs=None,
        indicators=None,
        non_finite=None,
        columns=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        n = len(means)
        logs = [False] * n if logs is None else list(logs)
        indicators = [False] * n if indicators is None else list(indicators)
        non_finite = ["missing"] * n if non_finite is None else list(non_finite)
        columns = [f"column {j}" for j in range(n)] if columns is None else columns
        columns = list(columns)
        lengths = [len(v) for v in (stds, logs, indicators, non_finite, columns)]
        if any(length != n for length in lengths):
            raise ValueError(
                "`means`, `stds`, `logs`, `indicators`, `non_finite` and `columns` "
                f"must have one entry per column. Received lengths {[n, *lengths]}"
            )
        if any(not (abs(m) < float("inf")) for m in means):
            raise ValueError(f"`means` must be finite. Received: means={list(means)}")
        if any(not (0 < s < float("inf")) for s in stds):
            raise ValueError(
                f"`stds` must be positive and finite. Received: stds={list(stds)}"
            )
        for mode in non_finite:
            check_choice("non_finite", mode, NON_FINITE_MODES)
        self.means = [float(m) for m in means]
        self.stds = [float(s) for s in stds]
        self.logs = [bool(v) for v in logs]
        self.indicators = [bool(v) for v in indicators]
        self.non_finite = non_finite
        self.columns = [str(c) for c in columns]

    def call(self, inputs):
        if not isinstance(inputs, (list, tuple)):
            inputs = [inputs]  # tf_keras unwraps a one-element list on reload
        # All columns at once, (batch, columns): a request runs a dozen ops in all
        # instead of a dozen per column (at batch 1 the graph's time is mostly
        # per-op overhead). Each column gets the same float32 operations as alone.
        x = _stack_columns(inputs, tf.float32)
        nan = tf.math.is_nan(x)
        if any(self.logs):
            logged = tf.sign(x) * tf.math.log1p(tf.abs(x))
            x = logged if all(self.logs) else tf.where(self.logs, logged, x)
        z = (x - self.means) / self.stds
        # NaN compares False, so `finite` is False for NaN, inf and overflow.
        finite = (tf.abs(x) <= NON_FINITE_LIMIT) & (tf.abs(z) <= NON_FINITE_LIMIT)
        for j, mode in enumerate(self.non_finite):
            if mode == "error":
                tf.debugging.Assert(
                    tf.reduce_all(finite[:, j] | nan[:, j]),
                    [
                        f"Numeric feature {self.columns[j]!r} (non_finite='error') "
                        "got a non-finite value (inf or beyond 1e19)"
                    ],
                )
        missing = ~finite
        out = tf.where(missing, tf.zeros_like(z), z)
        flagged = [j for j, flag in enumerate(self.indicators) if flag]
        if flagged:
            flags = tf.cast(tf.gather(missing, flagged, axis=1), tf.float32)
            out = tf.concat([out, flags], axis=1)  # (batch, columns + indicators)
        if self.compute_dtype == "float16":
            out = tf.clip_by_value(out, -65504.0, 65504.0)  # float16's largest
        return tf.cast(out, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        if not isinstance(input_shape[0], (list, tuple)):
            input_shape = [input_shape]
        return (input_shape[0][0], len(self.means) + sum(self.indicators))

    def get_config(self):
        config = {
            "means": self.means,
            "stds": self.stds,
            "logs": self.logs,
            "indicators": self.indicators,
            "non_finite": self.non_finite,
            "columns": self.columns,
        }
        return {**super().get_config(), **config}


@register
class SequenceSplit(Layer):
    """Splits joined id histories into `(batch, max_len)` tokens and a mask.

    Each row's string `"id1|id2|..."` (oldest first) is split on `separator`; the last
    `max_len` ids are kept (the most recent behaviour) and the row is padded at the
    end. An empty string is an empty history (an all-False mask row).

    Args:
        max_len: int. Length of the output rows.
        separator: str. Separator of the ids. Defaults to "|".
        output_dtype: str. "string", or "int64" to parse the ids as integers.
            Defaults to "string".

    Call arguments:
        inputs: string `(batch,)`.

    Returns:
        `(tokens, mask)`: `(batch, max_len)` string (or int64) ids padded with "" (or
        0), and the boolean mask `(batch, max_len)`, True at real ids.

    Example:

    >>> import tensorflow as tf
    >>> layer = SequenceSplit(max_len=3)
    >>> tokens, mask = layer(tf.constant(["a|b|c|d", ""]))
    >>> tokens.numpy().tolist(), mask.numpy().tolist()
    ([[b'b', b'c', b'd'], [b'', b'', b'']], [[True, True, True], [False, False, False]])
    """

    def __init__(self, max_len, separator="|", output_dtype="string", **kwargs):
        super().__init__(**kwargs)
        check_positive_int("max_len", max_len)
        check_choice("output_dtype", output_dtype, ("string", "int64"))
        self.max_len = max_len
        self.separator = separator
        self.output_dtype = output_dtype

    def call(self, inputs):
        inputs = tf.reshape(tf.convert_to_tensor(inputs, tf.string), [-1])
        if self.output_dtype == "int64" and tf.executing_eagerly():
            # A whole column encoded once (`fit_ctr_model` on a DataFrame): NumPy
            # over its bytes took 0.1 s of the 0.3-0.7 s the string ops took on
            # the DIN benchmark's 73,442 histories of up to 50 ids.
            host = _split_int_histories(inputs.numpy(), self.max_len, self.separator)
            if host is not None:
                return tf.constant(host[0]), tf.constant(host[1])
        tokens = tf.strings.strip(tf.strings.split(inputs, sep=self.separator))
        # Drop empty ids (an empty history, a trailing separator).
        tokens = tf.ragged.boolean_mask(tokens, tf.strings.length(tokens) > 0)
        tokens = tokens[:, -self.max_len :]
        mask = tf.ones_like(tokens, tf.bool).to_tensor(
            default_value=False, shape=[None, self.max_len]
        )
        tokens = tokens.to_tensor(default_value="", shape=[None, self.max_len])
        if self.output_dtype == "int64":
            tokens = tf.where(mask, tokens, "0")
            tokens = tf.strings.to_number(tokens, tf.int64)
        return tokens, mask

    def compute_output_shape(self, input_shape):
        shape = (input_shape[0], self.max_len)
        return shape, shape

    def compute_output_spec(self, inputs):
        # Keras 3 would otherwise give the symbolic outputs the float compute dtype,
        # and a model cut at them (`split_ctr_model`) would cast the ids and mask.
        shape = (inputs.shape[0], self.max_len)
        return (
            keras.KerasTensor(shape, dtype=self.output_dtype),
            keras.KerasTensor(shape, dtype="bool"),
        )

    def get_config(self):
        config = {
            "max_len": self.max_len,
            "separator": self.separator,
            "output_dtype": self.output_dtype,
        }
        return {**super().get_config(), **config}


def _split_int_histories(rows, max_len: int, separator: str = "|"):
    """`SequenceSplit(..., output_dtype="int64")` computed on the host, with NumPy.

    The same ids and mask as the layer's string ops for rows made of ASCII digits
    and a one-byte separator only; None for anything else (whitespace, signs, a
    longer separator, an id of more than 18 digits), which the string ops decide.

    Args:
        rows: sequence of `bytes` (or a NumPy object array of them), one history
            each.
        max_len: int. Length of the output rows.
        separator: str. Separator of the ids. Defaults to "|".

    Returns:
        `(ids, mask)`, `(rows, max_len)` int64 and bool NumPy arrays, or None.
    """
    sep = separator.encode()
    if len(sep) != 1 or sep.isdigit() or sep == b"\n":
        return None
    n = len(rows)
    # One buffer, a row per line: a run of digits is an id and never spans rows.
    text = np.frombuffer(b"\n".join(rows), np.uint8)
    digits = text - np.uint8(ord("0"))  # wraps around below "0"
    is_digit = digits < 10
    newline = text == ord("\n")
    if np.count_nonzero(newline) != max(n - 1, 0) or not np.all(
        is_digit | newline | (text == sep[0])
    ):
        return None
    edges = np.diff(is_digit.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)  # exclusive
    sizes = ends - starts
    if len(sizes) and sizes.max() > 18:
        return None  # beyond what int64 always holds: the string ops decide
    # Horner's rule over the digit places, all ids at once (a short id reads its
    # own last digit again, and keeps its value).
    values = np.zeros(len(starts), np.int64)
    for place in range(int(sizes.max()) if len(sizes) else 0):
        digit = digits[np.minimum(starts + place, ends - 1)]
        values = np.where(sizes > place, values * 10 + digit, values)
    # The row of each id, its position in the row, and the last `max_len` kept.
    lengths = np.fromiter(map(len, rows), np.int64, n)
    row = np.searchsorted(np.cumsum(lengths + 1), starts, side="right")
    counts = np.bincount(row, minlength=n)
    position = np.arange(len(starts)) - (np.cumsum(counts) - counts)[row]
    column = position - np.maximum(counts - max_len, 0)[row]
    keep = column >= 0
    flat = row[keep] * max_len + column[keep]
    ids = np.zeros(n * max_len, np.int64)
    mask = np.zeros(n * max_len, bool)
    ids[flat] = values[keep]
    mask[flat] = True
    return ids.reshape(n, max_len), mask.reshape(n, max_len)


@register
class StackColumns(Layer):
    """Stacks `(batch,)` or `(batch, k)` columns into `(batch, total)` of one dtype.

    Args:
        output_dtype: str. dtype of the output. Defaults to "int32".

    Call arguments:
        inputs: list of `(batch,)` or `(batch, k)` tensors.

    Returns:
        `(batch, total columns)`.

    Example:

    >>> import numpy as np
    >>> StackColumns()([np.array([1, 2]), np.array([[3], [4]])]).numpy().tolist()
    [[1, 3], [2, 4]]
    """

    def __init__(self, output_dtype="int32", **kwargs):
        super().__init__(**kwargs)
        self.output_dtype = output_dtype

    def call(self, inputs):
        if not isinstance(inputs, (list, tuple)):
            inputs = [inputs]  # tf_keras unwraps a one-element list on reload
        return _stack_columns(inputs, self.output_dtype)

    def compute_output_shape(self, input_shape):
        if not isinstance(input_shape[0], (list, tuple)):
            input_shape = [input_shape]
        width = 0
        for shape in input_shape:
            width += 1 if len(shape) == 1 else shape[-1]
        return (input_shape[0][0], width)

    def compute_output_spec(self, inputs):
        # Keras 3 only (see SequenceSplit.compute_output_spec): the ids stay integers.
        if not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        shape = self.compute_output_shape([tuple(x.shape) for x in inputs])
        return keras.KerasTensor(shape, dtype=self.output_dtype)

    def get_config(self):
        return {**super().get_config(), "output_dtype": self.output_dtype}


def _stack_columns(columns, dtype):
    """`(batch,)` or `(batch, k)` columns side by side: `(batch, total)` of `dtype`.

    Columns of rank 1 and one dtype (a CTR model's raw numbers, its lookups' ids)
    go through one stack and one cast; others are each cast and reshaped.
    """
    columns = [tf.convert_to_tensor(c) for c in columns]
    if all(c.shape.rank == 1 for c in columns) and len({c.dtype for c in columns}) == 1:
        return tf.cast(tf.stack(columns, axis=1), dtype)
    parts = []
    for x in columns:
        x = tf.cast(x, dtype)
        parts.append(tf.reshape(x, [tf.shape(x)[0], -1]))
    return tf.concat(parts, axis=1)


def categorical_lookup(spec, name=None):
    """The Keras layer mapping a categorical spec's raw values to ids in
    `[0, spec.vocabulary_size)`."""
    name = name or f"{spec.name}_lookup"
    if spec.hash_buckets is not None:
        return keras.layers.Hashing(num_bins=spec.hash_buckets, name=name)
    if spec.vocabulary is None:
        raise ValueError(
            f"Categorical feature {spec.name!r} has no vocabulary: fit the specs on "
            "data first (`fit_features` or `infer_features`)"
        )
    cls = keras.layers.StringLookup
    if spec.dtype == "int64":
        cls = keras.layers.IntegerLookup
    vocabulary = list(spec.vocabulary)
    if not vocabulary:
        # An all-missing column: one placeholder keeps the layer valid.
        vocabulary = ["\x00<empty>"] if spec.dtype == "string" else [-(2**62)]
    return cls(
        vocabulary=vocabulary,
        num_oov_indices=spec.num_oov_buckets,
        mask_token=None,
        output_mode="int",
        name=name,
    )


def raw_input_spec(spec):
    """(shape, dtype) of a feature's raw model input."""
    if spec.kind == "numeric":
        return (), "float32"
    if spec.kind == "categorical" and spec.dtype == "int64":
        return (), "int64"
    return (), "string"


def build_preprocessing(features, inputs):
    """Applies the specs' preprocessing to symbolic raw inputs.

    Args:
        features: list of fitted feature specs.
        inputs: dict of `keras.Input` by feature name.

    Returns:
        dict with `ids` (`{name: (batch,) int64 ids}` of each categorical feature),
        `numeric` (float `(batch, num_numeric_fields)`, or None), `sequences`
        (`{name: (ids (batch, max_len), mask, shared feature name)}`) and
        `lookups` (the lookup layer of each categorical feature). A history has a
        lookup layer of its own, `{name}_lookup`, with the shared feature's
        vocabulary: each lookup then runs once in the graph, so a model can be cut
        after the preprocessing (`keras_attn.models.split_ctr_model`).
    """
    by_name = {f.name: f for f in features}
    categorical = [f for f in features if f.kind == "categorical"]
    numeric = [f for f in features if f.kind == "numeric"]
    sequences = [f for f in features if f.kind == "sequence"]
    lookups = {f.name: categorical_lookup(f) for f in categorical}
    ids = {name: lookup(inputs[name]) for name, lookup in lookups.items()}
    out = {"lookups": lookups, "ids": ids}
    out["numeric"] = None
    if numeric:
        out["numeric"] = NumericPreprocessing(
            means=[f.mean for f in numeric],
            stds=[f.std for f in numeric],
            logs=[f.log for f in numeric],
            indicators=[bool(f.missing_indicator) for f in numeric],
            non_finite=[f.non_finite for f in numeric],
            columns=[f.name for f in numeric],
            name="numeric_preprocessing",
        )([inputs[f.name] for f in numeric])
    out["sequences"] = {}
    for f in sequences:
        shared = by_name.get(f.shares)
        if shared is None or shared.kind != "categorical":
            raise ValueError(
                f"Sequence feature {f.name!r} shares {f.shares!r}, which is not a "
                f"categorical feature. Categorical features: {list(lookups)}"
            )
        tokens, mask = SequenceSplit(
            f.max_len,
            separator=f.separator,
            output_dtype=shared.dtype,
            name=f"{f.name}_split",
        )(inputs[f.name])
        history_lookup = categorical_lookup(shared, name=f"{f.name}_lookup")
        out["sequences"][f.name] = (history_lookup(tokens), mask, f.shares)
    return out
