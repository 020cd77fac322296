"""HistoryPooling: one vector per history from its per-position states."""

from __future__ import annotations

from keras_attn._validation import check_choice, check_positive_int
from keras_attn.backend import Layer, register, tf
from keras_attn.layers.attention import ContextAttentionPooling

__all__ = ["POOLINGS", "HistoryPooling"]

#: How `HistoryPooling` reduces the states of a history.
POOLINGS = ("last", "attention", "mean")


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
