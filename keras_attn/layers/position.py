"""Position information for attention: SinusoidalPositionEncoding (fixed) and
PositionEmbedding (learned)."""

from __future__ import annotations

import math

from keras_attn._validation import (
    check_finite,
    check_int,
    check_positive_int,
    static_shape,
)
from keras_attn.backend import Layer, clone_initializer, keras, register, tf


def sinusoidal_table(positions, dim: int, max_wavelength: float = 10000.0):
    """Sinusoids of `positions` (any float tensor), sin on even and cos on odd dims.

    Returns a float32 tensor of shape `positions.shape + (dim,)`.
    """
    positions = tf.cast(positions, tf.float32)
    half = (dim + 1) // 2
    # 1 / max_wavelength^(2i / dim) for the i-th sin/cos pair.
    inv_freq = tf.exp(
        tf.range(half, dtype=tf.float32) * (-2.0 * math.log(max_wavelength) / dim)
    )
    angles = positions[..., tf.newaxis] * inv_freq  # (..., half)
    # Interleave: (..., half, 2) -> (..., 2 * half), then drop the extra odd slot.
    table = tf.stack([tf.sin(angles), tf.cos(angles)], axis=-1)
    table = tf.reshape(table, tf.concat([tf.shape(positions), [2 * half]], axis=0))
    return table[..., :dim]


def _check_inputs(inputs_shape):
    shape = static_shape(inputs_shape)
    if len(shape) < 3 or shape[-1] is None:
        raise ValueError(
            "`inputs` must have shape (batch, seq_len, dim) with a known dim. "
            f"Received: inputs.shape={tuple(shape)}"
        )
    return shape


@register
class SinusoidalPositionEncoding(Layer):
    """Fixed sinusoidal position encoding (Vaswani et al. 2017).

    `PE(pos, 2i) = sin(pos / max_wavelength^(2i / dim))` and
    `PE(pos, 2i + 1) = cos(pos / max_wavelength^(2i / dim))`. The encoding is computed
    from the positions at call time, so it covers any length, also lengths never seen
    in training. The layer returns the encoding (broadcast to the input's shape); add it
    to the embeddings yourself.

    Paper: "Attention Is All You Need", Vaswani et al., NeurIPS 2017.

    Args:
        max_wavelength: float. The base of the geometric progression of wavelengths.
            Defaults to 10000.

    Call arguments:
        inputs: `(batch, seq_len, dim)`; only its shape is used.
        start_index: int or scalar tensor. Position of the first step (e.g. the
            length of the segments already processed). Defaults to 0.

    Returns:
        `(batch, seq_len, dim)`, in the layer's compute dtype.

    Example:

    >>> import numpy as np
    >>> x = np.zeros((2, 5, 8), "float32")
    >>> encoded = x + SinusoidalPositionEncoding()(x)
    >>> encoded.shape
    TensorShape([2, 5, 8])
    """

    def __init__(self, max_wavelength: float = 10000.0, **kwargs):
        super().__init__(**kwargs)
        check_finite(
            "max_wavelength", max_wavelength, minimum=1, exclusive_minimum=True
        )
        self.max_wavelength = float(max_wavelength)
        self.supports_masking = True

    def build(self, inputs_shape):
        _check_inputs(inputs_shape)
        self.built = True

    def call(self, inputs, start_index=0):
        inputs = self.cast_inputs(inputs)
        dim = static_shape(inputs)[-1]
        shape = tf.shape(inputs)
        positions = tf.range(shape[-2]) + tf.cast(start_index, tf.int32)
        table = sinusoidal_table(positions, dim, self.max_wavelength)  # (seq_len, dim)
        return tf.broadcast_to(tf.cast(table, inputs.dtype), shape)

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        return {**super().get_config(), "max_wavelength": self.max_wavelength}


@register
class PositionEmbedding(Layer):
    """Learned absolute position embedding: one trainable vector per position.

    `output[b, t] = P[start_index + t]` with `P` of shape `(sequence_length, dim)`, as
    in BERT and ALBERT. Positions at or past `sequence_length` have no vector: calling
    the layer on a longer input raises an error.

    Paper: "BERT: Pre-training of Deep Bidirectional Transformers for Language
    Understanding", Devlin et al., NAACL 2019.

    Args:
        sequence_length: int. The maximum number of positions.
        initializer: initializer of the table. Defaults to "glorot_uniform".

    Call arguments:
        inputs: `(batch, seq_len, dim)`; only its shape is used.
        start_index: int or scalar tensor, `>= 0`. Position of the first step.
            Defaults to 0.

    Returns:
        `(batch, seq_len, dim)`, the position vectors broadcast over the batch.

    Example:

    >>> import numpy as np
    >>> x = np.zeros((2, 5, 8), "float32")
    >>> PositionEmbedding(sequence_length=16)(x).shape
    TensorShape([2, 5, 8])
    """

    def __init__(self, sequence_length: int, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        check_positive_int("sequence_length", sequence_length)
        self.sequence_length = sequence_length
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        shape = _check_inputs(inputs_shape)
        self._check_length(shape[-2])
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.sequence_length, shape[-1]),
            initializer=clone_initializer(self.initializer),
        )
        self.built = True

    def _check_length(self, length, start_index=0):
        if not tf.is_tensor(start_index):
            check_int("start_index", start_index, minimum=0)
        if length is None or not isinstance(start_index, int):
            return
        if start_index + length > self.sequence_length:
            raise ValueError(
                f"`inputs` has {length} positions from start_index={start_index}, "
                f"past the layer's sequence_length={self.sequence_length}. "
                f"Received: inputs length {length}"
            )

    def call(self, inputs, start_index=0):
        inputs = self.cast_inputs(inputs)
        length = static_shape(inputs)[-2]
        self._check_length(length, start_index)
        shape = tf.shape(inputs)
        start = tf.cast(start_index, tf.int32)
        # Lengths unknown while tracing are checked when the graph runs.
        check = tf.debugging.assert_less_equal(
            start + shape[-2],
            self.sequence_length,
            message=f"inputs are longer than sequence_length={self.sequence_length}",
        )
        checks = [check] if check is not None else []
        if tf.is_tensor(start_index):
            checks.append(
                tf.debugging.assert_non_negative(
                    start, message="`start_index` must be >= 0"
                )
            )
        checks = [c for c in checks if c is not None]
        with tf.control_dependencies(checks):
            table = tf.slice(
                tf.convert_to_tensor(self.position_embeddings),
                tf.stack([start, 0]),
                tf.stack([shape[-2], -1]),
            )
        return tf.broadcast_to(tf.cast(table, inputs.dtype), shape)

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = {
            "sequence_length": self.sequence_length,
            "initializer": keras.initializers.serialize(self.initializer),
        }
        return {**super().get_config(), **config}
