"""Pooling a sequence into one vector, padding masked: `SequencePooling` (the first
position, the mean or maximum over the real positions, or the zeroed, flattened
sequence) and `HistoryPooling` (a behaviour history's last real state, attention or
mean); `FieldSum`, the sum over a CTR model's fields."""

from __future__ import annotations

from keras_attn._validation import check_choice, check_positive_int
from keras_attn.backend import Layer, as_bool_mask, register, tf
from keras_attn.layers.attention import ContextAttentionPooling

__all__ = [
    "POOLINGS",
    "SEQUENCE_POOLINGS",
    "FieldSum",
    "HistoryPooling",
    "SequencePooling",
]

#: How `HistoryPooling` reduces the states of a history.
POOLINGS = ("last", "attention", "mean")
#: How `SequencePooling` reduces a sequence.
SEQUENCE_POOLINGS = ("cls", "mean", "max", "flatten")


@register
class HistoryPooling(Layer):
    """One vector per history from its per-position states, padding masked.

    "last": the state at the last real position (the most recent item, wherever
    the padding sits); "attention": `ContextAttentionPooling` over the real
    positions; "mean": their mean. A history with no real position gives zeros.

    Args:
        pooling: str. One of "last", "attention", "mean". Defaults to "last".
        units: int. Width of the attention pooling's projection. Defaults to 64.

    Call arguments:
        inputs: `(batch, seq_len, dim)`.
        mask: boolean `(batch, seq_len)`, True at real positions.

    Returns:
        `(batch, dim)`.

    Example:

    >>> import numpy as np
    >>> states = np.arange(12, dtype="float32").reshape(1, 3, 4)
    >>> pooled = HistoryPooling("last")(states, mask=np.array([[True, True, False]]))
    >>> pooled.numpy().tolist()
    [[4.0, 5.0, 6.0, 7.0]]
    """

    def __init__(self, pooling: str = "last", units: int = 64, **kwargs):
        super().__init__(**kwargs)
        check_choice("pooling", pooling, POOLINGS)
        check_positive_int("units", units)
        self.pooling = pooling
        self.units = units
        self.supports_masking = True
        self.attention = None
        if pooling == "attention":
            self.attention = ContextAttentionPooling(
                units, dtype=self.dtype_policy, name="attention"
            )

    def build(self, inputs_shape):
        if self.attention is not None:
            self.attention.build(inputs_shape)
        self.built = True

    def call(self, inputs, mask=None):
        inputs = self.cast_inputs(inputs)
        if mask is None:
            mask = tf.ones(tf.shape(inputs)[:2], tf.bool)
        mask = tf.cast(mask, tf.bool)
        real = tf.cast(mask, inputs.dtype)[..., tf.newaxis]  # (batch, seq_len, 1)
        if self.pooling == "attention":
            return self.attention(inputs, mask=mask)
        if self.pooling == "mean":
            total = tf.reduce_sum(inputs * real, axis=1)
            return tf.math.divide_no_nan(total, tf.reduce_sum(real, axis=1))
        # The last True position of each row; a row without one gathers position 0
        # and is zeroed below.
        steps = tf.range(tf.shape(inputs)[1])
        last = tf.reduce_max(tf.where(mask, steps, -1), axis=1)  # (batch,)
        state = tf.gather(inputs, tf.maximum(last, 0), axis=1, batch_dims=1)
        return state * tf.cast(last >= 0, inputs.dtype)[:, tf.newaxis]

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[-1])

    def get_config(self):
        return {**super().get_config(), "pooling": self.pooling, "units": self.units}


@register
class SequencePooling(Layer):
    """Pools `(batch, seq_len, dim)` into one vector per sequence, honouring the mask.

    `"cls"` takes the first position; `"mean"` averages the real positions (zero for
    a sequence without any); `"max"` takes the maximum over real positions (zero for
    none); `"flatten"` zeroes padded positions and reshapes to `(batch, seq_len·dim)`
    (needs a static `seq_len`).

    Args:
        mode: str. One of "cls", "mean", "max", "flatten". Defaults to "mean".

    Call arguments:
        inputs: `(batch, seq_len, dim)`.
        mask: optional boolean `(batch, seq_len)`, True at real positions.

    Returns:
        `(batch, dim)`, or `(batch, seq_len·dim)` for "flatten".

    Example:

    >>> import numpy as np
    >>> x = np.arange(12, dtype="float32").reshape(1, 3, 4)
    >>> SequencePooling("mean")(x, mask=np.array([[True, True, False]])).numpy()
    array([[2., 3., 4., 5.]], dtype=float32)
    """

    def __init__(self, mode: str = "mean", **kwargs):
        super().__init__(**kwargs)
        check_choice("mode", mode, SEQUENCE_POOLINGS)
        self.mode = mode
        self.supports_masking = True

    def call(self, inputs, mask=None):
        inputs = self.cast_inputs(inputs)
        if self.mode == "cls":
            return inputs[:, 0]
        if mask is None:
            mask = tf.ones(tf.shape(inputs)[:2], tf.bool)
        mask = as_bool_mask(mask)
        weights = tf.cast(mask, inputs.dtype)[..., tf.newaxis]  # (batch, seq_len, 1)
        if self.mode == "mean":
            total = tf.reduce_sum(inputs * weights, axis=1)
            return tf.math.divide_no_nan(total, tf.reduce_sum(weights, axis=1))
        if self.mode == "max":
            lowest = tf.fill(tf.shape(inputs), tf.as_dtype(inputs.dtype).min)
            best = tf.reduce_max(tf.where(mask[..., tf.newaxis], inputs, lowest), 1)
            return tf.where(tf.reduce_any(mask, axis=1, keepdims=True), best, 0.0)
        length, dim = inputs.shape[1], inputs.shape[2]
        if length is None or dim is None:
            raise ValueError(
                "`mode='flatten'` needs static seq_len and dim. "
                f"Received: inputs.shape={tuple(inputs.shape)}"
            )
        return tf.reshape(inputs * weights, [-1, length * dim])

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        if self.mode == "flatten":
            return (input_shape[0], input_shape[1] * input_shape[2])
        return (input_shape[0], input_shape[2])

    def get_config(self):
        return {**super().get_config(), "mode": self.mode}


@register
class FieldSum(Layer):
    """The sum over the fields: `(batch, fields, units)` -> `(batch, units)`.

    A CTR model's linear part is one such sum: each categorical field's weight for
    its value and each number times its weight, `(batch, fields, 1)`, summed into
    the task's linear logit (DeepCTR's linear logit, `CTRModel(linear=True)`).
    Every field counts: fields are never padding.

    Example:

    >>> import numpy as np
    >>> FieldSum()(np.ones((2, 3, 1), "float32")).numpy().tolist()
    [[3.0], [3.0]]
    """

    def build(self, input_shape):
        if len(input_shape) < 3:
            raise ValueError(
                "`inputs` must have shape (batch, fields, units). Received: "
                f"inputs.shape={tuple(input_shape)}"
            )
        super().build(input_shape)

    def call(self, inputs):
        return tf.reduce_sum(inputs, axis=1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], *input_shape[2:])
