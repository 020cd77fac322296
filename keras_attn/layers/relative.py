"""RelativeMultiHeadAttention: Transformer-XL relative positional attention with a
segment memory."""

from __future__ import annotations

import math

from keras_attn._validation import (
    check_batch_sizes,
    check_bool,
    check_finite,
    check_mask_shape,
    check_positive_int,
    check_rate,
    static_shape,
)
from keras_attn.backend import (
    Layer,
    as_bool_mask,
    clone_initializer,
    keras,
    masked_softmax,
    register,
    tf,
)
from keras_attn.layers.attention import causal_mask
from keras_attn.layers.multi_head import build_projections


def relative_sinusoids(distances, dim: int, max_wavelength: float = 10000.0):
    """Transformer-XL's encodings `[sin(d · f), cos(d · f)]`, `f_k =
    max_wavelength^(-2k / dim)`: float32 `distances.shape + (dim,)`."""
    inv_freq = 1.0 / tf.pow(
        max_wavelength, tf.range(0, dim, 2, dtype=tf.float32) / float(dim)
    )
    angles = tf.cast(distances, tf.float32)[..., tf.newaxis] * inv_freq
    return tf.concat([tf.sin(angles), tf.cos(angles)], axis=-1)


def rel_shift(scores, k_len):
    """Aligns position scores to keys: `(..., q_len, k_len + q_len - 1)`, column r for
    distance `k_len - 1 - r`, -> `(..., q_len, k_len)`, where entry (i, j) is the
    column of distance `k_len - q_len + i - j` (the distance from query i to key j).

    The pad-and-reshape of Transformer-XL: row i moves left by `q_len - 1 - i`.
    """
    shape = tf.shape(scores)
    lead, q_len, r_len = shape[:-2], shape[-2], shape[-1]
    rank = len(scores.shape)
    padded = tf.pad(scores, [[0, 0]] * (rank - 1) + [[1, 0]])
    padded = tf.reshape(padded, tf.concat([lead, [r_len + 1, q_len]], axis=0))
    shifted = tf.reshape(padded[..., 1:, :], shape)
    return shifted[..., :k_len]


@register
class RelativeMultiHeadAttention(Layer):
    """Multi-head self-attention with Transformer-XL relative positions and memory.

    For query i and key j at relative distance `i - j` (counting the memory):
    `score_ij = (q_i + u)ᵀ k_j + (q_i + v)ᵀ W_r R_(i-j)`, scaled by `1/sqrt(key_dim)`:
    the content term (AC) with the content bias `u` (`r_w_bias`) and the position
    term (BD) with the position bias `v` (`r_r_bias`), `R` the sinusoidal encoding of
    the distance. BD is computed once per distance and aligned with `rel_shift`,
    with no `(q_len, k_len, dim)` tensor. Distances are clipped to `clamp_len`. Keys
    and values come from `[memory; inputs]`: pass the previous segment's hidden
    states as `memory` to read a long text segment by segment (no gradient flows into
    the memory). The layer is the attention alone; the residual and LayerNorm are the
    caller's.

    Paper: "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context",
    Dai et al., ACL 2019.

    Args:
        num_heads: int. Number of attention heads.
        key_dim: int. Size of each head.
        dropout: float. Dropout rate on the attention weights. Defaults to 0.0.
        clamp_len: int. Largest relative distance encoded; longer ones are clipped.
            Defaults to None (no clipping).
        max_wavelength: float. Base of the sinusoids. Defaults to 10000.
        use_bias: bool. Whether the projections add biases (Transformer-XL's do
            not). Defaults to False.
        kernel_initializer: initializer of the projections. Defaults to
            "glorot_uniform".
        bias_initializer: initializer of `u`, `v` and the projection biases.
            Defaults to "zeros".

    Call arguments:
        inputs: `(batch, seq_len, dim)`, the current segment; `dim` must be even.
        memory: optional `(batch, mem_len, dim)`, the previous segment's states.
        mask: optional boolean `(batch, seq_len)`, True at real positions.
        memory_mask: optional boolean `(batch, mem_len)`, True at real positions.
        training: bool, whether dropout is active.
        return_attention_scores: bool. Also return the weights. Defaults to False.
        use_causal_mask: bool. Position i attends to the memory and to inputs j <= i,
            as in Transformer-XL's language model. Defaults to False.

    Returns:
        `(batch, seq_len, dim)`, and the weights `(batch, num_heads, seq_len,
        mem_len + seq_len)` when `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> layer = RelativeMultiHeadAttention(num_heads=2, key_dim=4, clamp_len=16)
    >>> first, second = np.ones((2, 5, 8), "float32"), np.ones((2, 5, 8), "float32")
    >>> hidden = layer(first, use_causal_mask=True)
    >>> layer(second, memory=first, use_causal_mask=True).shape
    TensorShape([2, 5, 8])
    """

    def __init__(
        self,
        num_heads: int,
        key_dim: int,
        dropout: float = 0.0,
        clamp_len: int | None = None,
        max_wavelength: float = 10000.0,
        use_bias: bool = False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("key_dim", key_dim)
        check_positive_int("clamp_len", clamp_len, allow_none=True)
        check_rate("dropout", dropout)
        check_finite(
            "max_wavelength", max_wavelength, minimum=1, exclusive_minimum=True
        )
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.dropout = dropout
        self.clamp_len = clamp_len
        self.max_wavelength = float(max_wavelength)
        self.use_bias = check_bool("use_bias", use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="dropout_layer"
        )

    def build(self, inputs_shape, memory_shape=None):
        shape = static_shape(inputs_shape)
        if len(shape) != 3 or shape[-1] is None or shape[-1] % 2:
            raise ValueError(
                "`inputs` must have shape (batch, seq_len, dim) with a known, even "
                f"dim. Received: inputs.shape={tuple(shape)}"
            )
        if memory_shape is not None:
            mem = static_shape(memory_shape)
            if len(mem) != 3 or mem[-1] != shape[-1]:
                raise ValueError(
                    "`memory` must have shape (batch, mem_len, dim) with the dim of "
                    f"`inputs`. Received: memory.shape={tuple(mem)}, "
                    f"inputs.shape={tuple(shape)}"
                )
        dim, heads = shape[-1], self.num_heads
        # Value heads have key_dim too (Transformer-XL's d_head).
        build_projections(self, shape, shape, shape, self.key_dim, dim)
        # W_r of Transformer-XL's r_net: encodings (dim) -> (heads, key_dim).
        self.position_kernel = self.add_weight(
            name="position_kernel",
            shape=(dim, heads, self.key_dim),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.r_w_bias = self.add_weight(
            name="r_w_bias",
            shape=(heads, self.key_dim),
            initializer=clone_initializer(self.bias_initializer),
        )
        self.r_r_bias = self.add_weight(
            name="r_r_bias",
            shape=(heads, self.key_dim),
            initializer=clone_initializer(self.bias_initializer),
        )
        self.built = True

    def _relative_encodings(self, q_len, k_len, dim, dtype):
        # Distances k_len - 1 down to -(q_len - 1): every i - j + mem_len that occurs.
        distances = tf.range(k_len - 1, -q_len, -1)
        if self.clamp_len is not None:
            distances = tf.clip_by_value(distances, -self.clamp_len, self.clamp_len)
        table = relative_sinusoids(distances, dim, self.max_wavelength)
        kernel = tf.cast(tf.convert_to_tensor(self.position_kernel), dtype)
        return tf.einsum("rc,chd->rhd", tf.cast(table, dtype), kernel)

    def call(
        self,
        inputs,
        memory=None,
        mask=None,
        memory_mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
    ):
        inputs, memory = self.cast_inputs(inputs, memory)
        inputs, memory = check_batch_sizes(inputs=inputs, memory=memory)
        mask, memory_mask = as_bool_mask(mask), as_bool_mask(memory_mask)
        check_mask_shape("mask", mask, static_shape(inputs)[:-1], "inputs")
        dtype = inputs.dtype
        batch, q_len = tf.shape(inputs)[0], tf.shape(inputs)[1]
        if memory is not None:
            check_mask_shape(
                "memory_mask", memory_mask, static_shape(memory)[:-1], "memory"
            )
            memory = tf.stop_gradient(memory)
            context = tf.concat([memory, inputs], axis=1)
            m_len = tf.shape(memory)[1]
        else:
            context, m_len = inputs, 0
        k_len = q_len + m_len

        query = self.query_dense(inputs)  # (batch, q_len, heads, key_dim)
        key = self.key_dense(context)  # (batch, k_len, heads, key_dim)
        value = self.value_dense(context)
        relative = self._relative_encodings(q_len, k_len, inputs.shape[-1], dtype)
        content = tf.einsum(
            "bqhd,bkhd->bhqk", query + tf.cast(self.r_w_bias, dtype), key
        )
        position = tf.einsum(
            "bqhd,rhd->bhqr", query + tf.cast(self.r_r_bias, dtype), relative
        )  # (batch, heads, q_len, k_len + q_len - 1)
        scores = (content + rel_shift(position, k_len)) * tf.cast(
            1.0 / math.sqrt(self.key_dim), dtype
        )

        score_mask = None
        if mask is not None or (memory is not None and memory_mask is not None):
            if mask is None:
                mask = tf.ones([batch, q_len], tf.bool)
            if memory is not None and memory_mask is None:
                memory_mask = tf.ones([batch, m_len], tf.bool)
            key_valid = mask if memory is None else tf.concat([memory_mask, mask], 1)
            score_mask = (
                key_valid[:, tf.newaxis, tf.newaxis, :]
                & (mask[:, tf.newaxis, :, tf.newaxis])
            )
        if use_causal_mask:
            causal = causal_mask(q_len, k_len)[tf.newaxis, tf.newaxis]
            score_mask = causal if score_mask is None else score_mask & causal
        weights = masked_softmax(scores, score_mask)  # (batch, heads, q_len, k_len)
        dropped = self.dropout_layer(weights, training=training)
        output = self.output_dense(tf.einsum("bhqk,bkhd->bqhd", dropped, value))
        if return_attention_scores:
            return output, weights
        return output

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = {
            "num_heads": self.num_heads,
            "key_dim": self.key_dim,
            "dropout": self.dropout,
            "clamp_len": self.clamp_len,
            "max_wavelength": self.max_wavelength,
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
        return {**super().get_config(), **config}
