"""MultiHeadAttention and its self-attention form, MultiHeadSelfAttention."""

from __future__ import annotations

import math

from keras_attn.backend import (
    Layer,
    clone_initializer,
    keras,
    masked_softmax,
    register,
    tf,
)
from keras_attn.layers._checks import (
    check_mask_shape,
    check_positive_int,
    check_rate,
    static_shape,
)
from keras_attn.layers.attention import _as_bool, causal_mask


@register
class MultiHeadAttention(Layer):
    """Multi-head scaled dot-product attention (Vaswani et al. 2017).

    Queries, keys and values are projected per head, `softmax(q kᵀ / sqrt(key_dim))`
    weighs the values, and the heads are concatenated and projected back. The weights
    have the shapes of `keras.layers.MultiHeadAttention`'s and, copied from it, give its
    output. Unlike it, a query without any real key (a fully padded row) gets zero
    weights, not a uniform row, and its output is the output bias alone.

    Args:
        num_heads: int. Number of attention heads.
        key_dim: int. Size of each head for query and key.
        value_dim: int. Size of each head for value. Defaults to `key_dim`.
        dropout: float. Dropout rate on the attention weights. Defaults to 0.0.
        use_bias: bool. Whether the projections use biases. Defaults to True.
        output_shape: int. Size of the output projection. Defaults to the query's dim.
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the projection biases.
        kernel_regularizer: optional regularizer of the projection kernels.
        bias_regularizer: optional regularizer of the projection biases.

    Call arguments:
        query: `(batch, q_len, dim)`.
        value: `(batch, k_len, dim)`.
        key: optional `(batch, k_len, dim)`; defaults to `value`.
        query_mask: optional boolean `(batch, q_len)`, True at real positions.
        value_mask: optional boolean `(batch, k_len)`, True at real positions.
        key_mask: optional boolean `(batch, k_len)`; combined with `value_mask`.
        attention_mask: optional boolean `(batch, q_len, k_len)`, True where query i may
            attend to key j.
        return_attention_scores: bool. Also return the weights. Defaults to False.
        training: bool, whether dropout is active.
        use_causal_mask: bool. Query i attends only to keys j <= i. Defaults to False.

    Returns:
        `(batch, q_len, output_shape)`, and the weights `(batch, num_heads, q_len,
        k_len)`
        when `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> layer = MultiHeadAttention(num_heads=2, key_dim=4)
    >>> q, v = np.ones((2, 3, 8), "float32"), np.ones((2, 5, 8), "float32")
    >>> out, weights = layer(q, v, return_attention_scores=True)
    >>> out.shape, weights.shape
    (TensorShape([2, 3, 8]), TensorShape([2, 2, 3, 5]))
    """

    def __init__(
        self,
        num_heads: int,
        key_dim: int,
        value_dim: int | None = None,
        dropout: float = 0.0,
        use_bias: bool = True,
        output_shape: int | None = None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("key_dim", key_dim)
        check_positive_int("value_dim", value_dim, allow_none=True)
        check_positive_int("output_shape", output_shape, allow_none=True)
        check_rate("dropout", dropout)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim or key_dim
        self.dropout = dropout
        self.use_bias = use_bias
        self._output_dim = output_shape
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.supports_masking = True
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="dropout_layer"
        )

    def _dense(self, equation, output_shape, bias_axes, name):
        return keras.layers.EinsumDense(
            equation,
            output_shape=output_shape,
            bias_axes=bias_axes if self.use_bias else None,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            kernel_regularizer=self.kernel_regularizer,
            bias_regularizer=self.bias_regularizer,
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, query_shape, value_shape, key_shape=None):
        query_shape = static_shape(query_shape)
        value_shape = static_shape(value_shape)
        key_shape = value_shape if key_shape is None else static_shape(key_shape)
        for name, shape in (
            ("query", query_shape),
            ("value", value_shape),
            ("key", key_shape),
        ):
            if len(shape) != 3 or shape[-1] is None:
                raise ValueError(
                    f"`{name}` must have shape (batch, seq_len, dim) with a known dim. "
                    f"Received: {name}.shape={tuple(shape)}"
                )
        if (
            key_shape[1] is not None
            and value_shape[1] is not None
            and (key_shape[1] != value_shape[1])
        ):
            raise ValueError(
                "`key` and `value` must have the same length. Received: "
                f"key.shape={tuple(key_shape)}, value.shape={tuple(value_shape)}"
            )
        heads = self.num_heads
        output_dim = self._output_dim or query_shape[-1]
        # (batch, seq_len, dim) -> (batch, seq_len, heads, head_dim)
        self.query_dense = self._dense(
            "abc,cde->abde", (None, heads, self.key_dim), "de", "query_dense"
        )
        self.key_dense = self._dense(
            "abc,cde->abde", (None, heads, self.key_dim), "de", "key_dense"
        )
        self.value_dense = self._dense(
            "abc,cde->abde", (None, heads, self.value_dim), "de", "value_dense"
        )
        # (batch, q_len, heads, value_dim) -> (batch, q_len, output_dim)
        self.output_dense = self._dense(
            "abcd,cde->abe", (None, output_dim), "e", "output_dense"
        )
        self.query_dense.build(query_shape)
        self.key_dense.build(key_shape)
        self.value_dense.build(value_shape)
        self.output_dense.build((query_shape[0], query_shape[1], heads, self.value_dim))
        self.built = True

    def _attention_mask(
        self,
        query,
        key,
        query_mask,
        value_mask,
        key_mask,
        attention_mask,
        use_causal_mask,
    ):
        """Combines every mask into one boolean `(batch, 1, q_len, k_len)`, or None."""
        q_shape, k_shape = static_shape(query)[:-1], static_shape(key)[:-1]
        check_mask_shape("query_mask", query_mask, q_shape, "query")
        check_mask_shape("value_mask", value_mask, k_shape, "value")
        check_mask_shape("key_mask", key_mask, k_shape, "key")
        check_mask_shape(
            "attention_mask",
            attention_mask,
            [q_shape[0], q_shape[1], k_shape[1]],
            "(query, key)",
        )
        mask = attention_mask
        for part in (
            None if query_mask is None else query_mask[:, :, tf.newaxis],
            None if value_mask is None else value_mask[:, tf.newaxis, :],
            None if key_mask is None else key_mask[:, tf.newaxis, :],
        ):
            if part is not None:
                mask = part if mask is None else mask & part
        if use_causal_mask:
            causal = causal_mask(tf.shape(query)[1], tf.shape(key)[1])[tf.newaxis]
            mask = causal if mask is None else mask & causal
        return None if mask is None else mask[:, tf.newaxis]

    def _compute_attention(self, query, key, value, mask, training):
        """query (b, q, h, d), key (b, k, h, d), value (b, k, h, dv) -> (b, q, h,
        dv)."""
        query = query * tf.cast(1.0 / math.sqrt(self.key_dim), query.dtype)
        scores = tf.einsum("bqhd,bkhd->bhqk", query, key)  # (batch, heads, q, k)
        weights = masked_softmax(scores, mask)
        dropped = self.dropout_layer(weights, training=training)
        return tf.einsum("bhqk,bkhd->bqhd", dropped, value), weights

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
    ):
        key = value if key is None else key
        if query_mask is None:
            query_mask = getattr(query, "_keras_mask", None)
        if value_mask is None:
            value_mask = getattr(value, "_keras_mask", None)
        if key_mask is None and key is not value:
            key_mask = getattr(key, "_keras_mask", None)
        query, value, key = self.cast_inputs(query, value, key)
        mask = self._attention_mask(
            query,
            key,
            _as_bool(query_mask),
            _as_bool(value_mask),
            _as_bool(key_mask),
            _as_bool(attention_mask),
            use_causal_mask,
        )
        context, weights = self._compute_attention(
            self.query_dense(query),
            self.key_dense(key),
            self.value_dense(value),
            mask,
            training,
        )
        output = self.output_dense(context)
        if return_attention_scores:
            return output, weights
        return output

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, (list, tuple)):
            return mask[0]
        return mask

    def get_config(self):
        config = {
            "num_heads": self.num_heads,
            "key_dim": self.key_dim,
            "value_dim": self.value_dim,
            "dropout": self.dropout,
            "use_bias": self.use_bias,
            "output_shape": self._output_dim,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer)
            if self.kernel_regularizer
            else None,
            "bias_regularizer": keras.regularizers.serialize(self.bias_regularizer)
            if self.bias_regularizer
            else None,
        }
        return {**super().get_config(), **config}


@register
class MultiHeadSelfAttention(MultiHeadAttention):
    """Multi-head self-attention: `MultiHeadAttention` with query = key = value.

    Takes the arguments of `MultiHeadAttention`. The padding mask comes from `mask` (or
    from an upstream `Embedding(mask_zero=True)`) and is passed on unchanged.

    Call arguments:
        inputs: `(batch, seq_len, dim)`.
        mask: optional boolean `(batch, seq_len)`, True at real positions.
        attention_mask: optional boolean `(batch, seq_len, seq_len)`.
        return_attention_scores: bool. Also return the weights. Defaults to False.
        training: bool, whether dropout is active.
        use_causal_mask: bool. Position i attends only to j <= i. Defaults to False.

    Returns:
        `(batch, seq_len, output_shape)`, and the weights
        `(batch, num_heads, seq_len, seq_len)` when `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> layer = MultiHeadSelfAttention(num_heads=2, key_dim=4)
    >>> layer(np.ones((2, 6, 8), "float32")).shape
    TensorShape([2, 6, 8])
    """

    def build(self, inputs_shape):
        super().build(inputs_shape, inputs_shape)

    def call(
        self,
        inputs,
        mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
    ):
        return super().call(
            inputs,
            inputs,
            query_mask=mask,
            value_mask=mask,
            attention_mask=attention_mask,
            return_attention_scores=return_attention_scores,
            training=training,
            use_causal_mask=use_causal_mask,
        )
