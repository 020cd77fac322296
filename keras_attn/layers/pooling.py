"""Masked pooling of a sequence into one vector: the first position, the mean or
the maximum over the real positions, or the zeroed, flattened sequence."""

from __future__ import annotations

from keras_attn._validation import check_choice
from keras_attn.backend import Layer, as_bool_mask, register, tf

__all__ = ["POOLINGS", "SequencePooling"]

POOLINGS = ("cls", "mean", "max", "flatten")


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
        check_choice("mode", mode, POOLINGS)
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
