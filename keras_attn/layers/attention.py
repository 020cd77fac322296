"""Attention (score -> masked softmax -> weighted sum) and ContextAttentionPooling."""

from __future__ import annotations

from keras_attn._validation import (
    check_batch_sizes,
    check_bool,
    check_choice,
    check_mask_shape,
    check_positive_int,
    check_rank,
    check_rate,
    static_shape,
)
from keras_attn.backend import (
    Layer,
    as_bool_mask,
    clone_initializer,
    keras,
    mask_any,
    masked_softmax,
    register,
    tf,
)
from keras_attn.layers.scores import AttentionScore


def causal_mask(q_len, k_len):
    """`(q_len, k_len)` boolean mask, True where key j <= query i (aligned at the
    end)."""
    rows = tf.range(q_len)[:, tf.newaxis] + (k_len - q_len)
    cols = tf.range(k_len)[tf.newaxis, :]
    return cols <= rows


#: `ContextAttentionPooling`'s `value_transform` choices.
VALUE_TRANSFORMS = (None, "linear", "nonlinear")


@register
class Attention(Layer):
    """Single-head attention with any score of `AttentionScore`.

    `weights = masked_softmax(score(query, key))` over the key axis, then
    `output = weights · value`. Keys default to the values. Padded values get zero
    weight;
    padded queries give zero output rows; a query with no real key gives zero weights
    and
    a zero output, never NaN.

    Args:
        score: str. The score function, one of `AttentionScore`'s: "dot", "scaled_dot",
            "general", "additive", "cosine", "location". Defaults to "dot".
        dropout: float. Dropout rate on the attention weights. Defaults to 0.0.
        units: int. Hidden size of the "additive" score. Defaults to the key dim.
        max_length: int. Key positions covered by the "location" score.
        use_bias: bool. Bias in the "additive" and "location" scores. Defaults to True.
        kernel_initializer: initializer of the score's matrices.
        bias_initializer: initializer of the score's biases.

    Call arguments:
        query: `(batch, q_len, q_dim)`.
        value: `(batch, k_len, v_dim)`.
        key: optional `(batch, k_len, k_dim)`; defaults to `value`.
        query_mask: optional boolean `(batch, q_len)`, True at real positions.
        value_mask: optional boolean `(batch, k_len)`, True at real positions.
        training: bool, whether dropout is active.
        return_attention_scores: bool. Also return the weights. Defaults to False.
        use_causal_mask: bool. Query i attends only to keys j <= i. Defaults to False.

    Returns:
        `(batch, q_len, v_dim)`, and the weights `(batch, q_len, k_len)` when
        `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> layer = Attention(score="additive", units=16)
    >>> q, v = np.ones((2, 3, 8), "float32"), np.ones((2, 5, 8), "float32")
    >>> out, weights = layer(q, v, return_attention_scores=True)
    >>> out.shape, weights.shape
    (TensorShape([2, 3, 8]), TensorShape([2, 3, 5]))
    """

    def __init__(
        self,
        score: str = "dot",
        dropout: float = 0.0,
        units: int | None = None,
        max_length: int | None = None,
        use_bias: bool = True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_rate("dropout", dropout)
        self.dropout = dropout
        self.supports_masking = True
        self.scorer = AttentionScore(
            score=score,
            units=units,
            max_length=max_length,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            dtype=self.dtype_policy,
            name="scorer",
        )
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="dropout_layer"
        )

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        check_rank("query", query_shape, 3, "(batch, q_len, q_dim)")
        check_rank("value", value_shape, 3, "(batch, k_len, v_dim)")
        check_rank("key", key_shape, 3, "(batch, k_len, k_dim)")
        self.scorer.build(query_shape, key_shape)
        self.built = True

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
    ):
        key = value if key is None else key
        query, value, key = self.cast_inputs(query, value, key)
        if query_mask is None:
            query_mask = (
                mask if mask is not None else getattr(query, "_keras_mask", None)
            )
        if value_mask is None:
            value_mask = getattr(value, "_keras_mask", None)
        query, value, key = check_batch_sizes(query=query, value=value, key=key)
        query_mask, value_mask = as_bool_mask(query_mask), as_bool_mask(value_mask)
        check_mask_shape("query_mask", query_mask, static_shape(query)[:-1], "query")
        check_mask_shape("value_mask", value_mask, static_shape(value)[:-1], "value")

        scores = self.scorer(query, key)  # (batch, q_len, k_len)
        score_mask = None
        if value_mask is not None:
            score_mask = value_mask[:, tf.newaxis, :]
        if use_causal_mask:
            causal = causal_mask(tf.shape(query)[1], tf.shape(key)[1])[tf.newaxis]
            score_mask = causal if score_mask is None else score_mask & causal
        weights = masked_softmax(scores, score_mask)
        if query_mask is not None:
            weights *= tf.cast(query_mask[:, :, tf.newaxis], weights.dtype)
        output = tf.einsum(
            "bqk,bkd->bqd", self.dropout_layer(weights, training=training), value
        )
        if return_attention_scores:
            return output, weights
        return output

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        scorer = self.scorer.get_config()
        config = {
            "score": scorer["score"],
            "dropout": self.dropout,
            "units": scorer["units"],
            "max_length": scorer["max_length"],
            "use_bias": scorer["use_bias"],
            "kernel_initializer": scorer["kernel_initializer"],
            "bias_initializer": scorer["bias_initializer"],
        }
        return {**super().get_config(), **config}


@register
class ContextAttentionPooling(Layer):
    """Attention pooling of a sequence against a learned context vector.

    `u_t = tanh(W h_t + b)`, `a_t = softmax_t(u_tᵀ u_w)`, `output = Σ_t a_t h_t`: the
    word
    and sentence attention of Hierarchical Attention Networks (Yang et al., NAACL 2016).
    The steps axis is the second to last, and any leading axes are kept, so
    `(batch, sentences, words, dim)` pools every sentence at once with no loop.

    HAN weights the raw states `h_t`; self-attention projects its values first.
    `value_transform` chooses: None (HAN, the default) pools `h_t`; "linear" pools
    `v_t = h_t W_v + b_v`; "nonlinear" pools `v_t = tanh(h_t W_v + b_v)`, with a
    square `W_v` (`dim` x `dim`), so the output keeps the input's width. The scores
    always come from `h_t`.

    Args:
        units: int. Size of the hidden projection `u_t` and of the context `u_w`.
        use_bias: bool. Whether the projection adds `b` (and the value transform
            `b_v`). Defaults to True.
        dropout: float. Dropout rate on the attention weights. Defaults to 0.0.
        value_transform: None, "linear" or "nonlinear". What is pooled: the raw
            states, a `Dense` projection of them, or its `tanh`. Defaults to None.
        kernel_initializer: initializer of `W`. Defaults to "glorot_uniform".
        bias_initializer: initializer of `b`. Defaults to "zeros".
        context_initializer: initializer of `u_w`. Defaults to "glorot_uniform".
            `W_v` uses `kernel_initializer`, `b_v` `bias_initializer`.

    Call arguments:
        inputs: `(batch, ..., steps, dim)`.
        mask: optional boolean `(batch, ..., steps)`, True at real steps.
        training: bool, whether dropout is active.
        return_attention_scores: bool. Also return the weights. Defaults to False.

    Returns:
        `(batch, ..., dim)`, and the weights `(batch, ..., steps)` when
        `return_attention_scores=True`. A row without real steps pools to zeros. The
        output
        mask (for 4D input) marks the rows that had at least one real step.

    Example:

    >>> import numpy as np
    >>> layer = ContextAttentionPooling(units=16)
    >>> layer(np.ones((2, 7, 8), "float32")).shape
    TensorShape([2, 8])
    >>> layer = ContextAttentionPooling(units=16, value_transform="nonlinear")
    >>> layer(np.ones((2, 7, 8), "float32")).shape
    TensorShape([2, 8])
    """

    def __init__(
        self,
        units: int,
        use_bias: bool = True,
        dropout: float = 0.0,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        context_initializer="glorot_uniform",
        value_transform: str | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("units", units)
        check_rate("dropout", dropout)
        check_choice("value_transform", value_transform, VALUE_TRANSFORMS)
        self.units = units
        self.use_bias = check_bool("use_bias", use_bias)
        self.dropout = dropout
        self.value_transform = value_transform
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.context_initializer = keras.initializers.get(context_initializer)
        self.supports_masking = True
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="dropout_layer"
        )

    def build(self, input_shape):
        input_shape = static_shape(input_shape)
        if len(input_shape) < 3 or input_shape[-1] is None:
            raise ValueError(
                "`inputs` must have shape (batch, ..., steps, dim) with a known dim. "
                f"Received: inputs.shape={tuple(input_shape)}"
            )
        dim = input_shape[-1]
        self.kernel = self.add_weight(
            name="kernel",
            shape=(dim, self.units),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.bias = (
            self.add_weight(
                name="bias",
                shape=(self.units,),
                initializer=clone_initializer(self.bias_initializer),
            )
            if self.use_bias
            else None
        )
        self.context = self.add_weight(
            name="context",
            shape=(self.units,),
            initializer=clone_initializer(self.context_initializer),
        )
        self.value_kernel = self.value_bias = None
        if self.value_transform is not None:
            self.value_kernel = self.add_weight(
                name="value_kernel",
                shape=(dim, dim),
                initializer=clone_initializer(self.kernel_initializer),
            )
            if self.use_bias:
                self.value_bias = self.add_weight(
                    name="value_bias",
                    shape=(dim,),
                    initializer=clone_initializer(self.bias_initializer),
                )
        self.built = True

    def call(self, inputs, mask=None, training=None, return_attention_scores=False):
        inputs = self.cast_inputs(inputs)
        mask = as_bool_mask(mask)
        check_mask_shape("mask", mask, static_shape(inputs)[:-1], "inputs")
        hidden = tf.einsum("...td,du->...tu", inputs, self.kernel)
        if self.bias is not None:
            hidden += self.bias
        scores = tf.einsum("...tu,u->...t", tf.tanh(hidden), self.context)
        weights = masked_softmax(scores, mask)  # (batch, ..., steps)
        dropped = self.dropout_layer(weights, training=training)
        values = inputs
        if self.value_kernel is not None:
            values = tf.einsum("...td,de->...te", inputs, self.value_kernel)
            if self.value_bias is not None:
                values += self.value_bias
            if self.value_transform == "nonlinear":
                values = tf.tanh(values)
        output = tf.einsum("...t,...td->...d", dropped, values)
        if return_attention_scores:
            return output, weights
        return output

    def compute_mask(self, inputs, mask=None):
        if mask is None or len(mask.shape) < 3:
            return None
        return mask_any(mask, axis=-1)

    def get_config(self):
        config = {
            "units": self.units,
            "use_bias": self.use_bias,
            "dropout": self.dropout,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "context_initializer": keras.initializers.serialize(
                self.context_initializer
            ),
            "value_transform": self.value_transform,
        }
        return {**super().get_config(), **config}
