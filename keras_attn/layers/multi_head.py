"""MultiHeadAttention and its self-attention form, MultiHeadSelfAttention."""

from __future__ import annotations

import math

from keras_attn._validation import (
    check_batch_sizes,
    check_bool,
    check_choice,
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

DISAGREEMENTS = ("subspace", "position", "output")


def _masked_mean(values, valid):
    """Mean of float32 `(batch, n)` values over the True positions of `valid`."""
    if valid is None:
        return tf.reduce_mean(values)
    valid = tf.cast(valid, values.dtype)
    return tf.math.divide_no_nan(tf.reduce_sum(values * valid), tf.reduce_sum(valid))


def _mean_head_cosine(heads, valid):
    """Mean cosine similarity over all head pairs (i, j), `(batch, n, heads, dim)`."""
    unit = tf.math.l2_normalize(tf.cast(heads, tf.float32), axis=-1)
    # Σ_ij cos(h_i, h_j) = |Σ_i unit_i|², without the (heads, heads) matrix.
    summed = tf.reduce_sum(unit, axis=2)  # (batch, n, dim)
    num_heads = tf.cast(tf.shape(heads)[2], tf.float32)
    per_position = tf.reduce_sum(tf.square(summed), axis=-1) / num_heads**2
    return _masked_mean(per_position, valid)


def build_projections(
    layer, query_shape, key_shape, value_shape, value_dim, output_dim
) -> None:
    """Builds `layer.{query,key,value,output}_dense` in Keras' MultiHeadAttention
    layout: `EinsumDense` kernels `(dim, heads, key_dim)` for the query and key,
    `(dim, heads, value_dim)` for the value, `(heads, value_dim, output_dim)` out.

    `layer` supplies `num_heads`, `key_dim`, `use_bias`, the initializers and the
    regularizers (`kernel_regularizer`/`bias_regularizer`, None when it has none).
    """
    heads = layer.num_heads

    def dense(equation, output_shape, bias_axes, name):
        return keras.layers.EinsumDense(
            equation,
            output_shape=output_shape,
            bias_axes=bias_axes if layer.use_bias else None,
            kernel_initializer=clone_initializer(layer.kernel_initializer),
            bias_initializer=clone_initializer(layer.bias_initializer),
            kernel_regularizer=getattr(layer, "kernel_regularizer", None),
            bias_regularizer=getattr(layer, "bias_regularizer", None),
            dtype=layer.dtype_policy,
            name=name,
        )

    # (batch, seq_len, dim) -> (batch, seq_len, heads, head_dim)
    layer.query_dense = dense(
        "abc,cde->abde", (None, heads, layer.key_dim), "de", "query_dense"
    )
    layer.key_dense = dense(
        "abc,cde->abde", (None, heads, layer.key_dim), "de", "key_dense"
    )
    layer.value_dense = dense(
        "abc,cde->abde", (None, heads, value_dim), "de", "value_dense"
    )
    # (batch, q_len, heads, value_dim) -> (batch, q_len, output_dim)
    layer.output_dense = dense("abcd,cde->abe", (None, output_dim), "e", "output_dense")
    layer.query_dense.build(query_shape)
    layer.key_dense.build(key_shape)
    layer.value_dense.build(value_shape)
    layer.output_dense.build((query_shape[0], query_shape[1], heads, value_dim))


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
        window: int. Local attention: query i attends only to keys j with
            `|i - j| <= window` (and `j <= i` with `use_causal_mask`). Computed in
            blocks of `window` queries against `3 · window` keys (`2 · window` when
            causal), so memory grows as O(seq_len · window),
            never with a full `(q_len, k_len)` matrix. Needs `q_len == k_len`; takes
            padding masks but not `attention_mask`. Defaults to None (global
            attention).
        disagreement: str. Disagreement regularization (Li et al., EMNLP 2018),
            added with `add_loss` as `disagreement_weight` times how alike the heads
            are: "subspace" the mean cosine similarity of the heads' value
            projections at each real key position, "position" the mean over real
            queries of `Σ_k A_ik A_jk` (the element-wise product of the heads'
            attention weights), "output" the mean cosine similarity of the heads'
            outputs at each real query position; every mean is over all `num_heads²`
            head pairs `(i, j)`. The paper's disagreement is the negative of these;
            minimizing the loss maximizes it. Defaults to None.
        disagreement_weight: float. Weight of that loss. Defaults to 1.0.

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
        when `return_attention_scores=True` (with `window`, the band is written into
        a dense, mostly zero matrix: ask for it only on short inputs).

    Paper: "Multi-Head Attention with Disagreement Regularization", Li et al., EMNLP
    2018; local attention: "Longformer: The Long-Document Transformer", Beltagy et
    al., 2020 (its sliding window).

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
        window: int | None = None,
        disagreement: str | None = None,
        disagreement_weight: float = 1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("window", window, allow_none=True)
        if disagreement is not None:
            check_choice("disagreement", disagreement, DISAGREEMENTS)
        check_finite("disagreement_weight", disagreement_weight, minimum=0)
        self.window = window
        self.disagreement = disagreement
        self.disagreement_weight = float(disagreement_weight)
        check_positive_int("num_heads", num_heads)
        check_positive_int("key_dim", key_dim)
        check_positive_int("value_dim", value_dim, allow_none=True)
        check_positive_int("output_shape", output_shape, allow_none=True)
        check_rate("dropout", dropout)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim or key_dim
        self.dropout = dropout
        self.use_bias = check_bool("use_bias", use_bias)
        self._output_dim = output_shape
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.supports_masking = True
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="dropout_layer"
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
        build_projections(
            self,
            query_shape,
            key_shape,
            value_shape,
            self.value_dim,
            self._output_dim or query_shape[-1],
        )
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

    def _band_layout(self, causal):
        """(block, left, right): queries go in blocks of `block`; each block reads
        the keys from `left` before its first query to `right` after its last."""
        return self.window, self.window, 0 if causal else self.window

    def _local_attention(
        self, query, key, value, query_valid, key_valid, causal, training
    ):
        """Banded attention, |i - j| <= window, in blocks of `window` queries.

        query (b, n, h, d), key (b, n, h, d), value (b, n, h, dv); `query_valid` and
        `key_valid` boolean (b, n) or None. Returns the context (b, n, h, dv) and the
        weights in blocks, (b, blocks, h, block, left + block + right) (see
        `_band_layout`): 3 · window keys per query, 2 · window if causal.
        """
        block, left, right = self._band_layout(causal)
        batch, n = tf.shape(query)[0], tf.shape(query)[1]
        heads = query.shape[2]
        blocks = (n + block - 1) // block
        pad = blocks * block - n
        views = (left + right) // block + 1

        def windows(t, depth):
            # (b, n, ...) -> (b, blocks, views · block, ...), zeros past either end.
            paddings = [[0, 0], [left, pad + right]] + [[0, 0]] * (len(t.shape) - 2)
            t = tf.pad(t, paddings)
            shape = tf.concat([[batch, blocks + views - 1, block], depth], axis=0)
            t = tf.reshape(t, shape)
            return tf.concat([t[:, v : v + blocks] for v in range(views)], axis=2)

        query = query * tf.cast(1.0 / math.sqrt(self.key_dim), query.dtype)
        query = tf.pad(query, [[0, 0], [0, pad], [0, 0], [0, 0]])
        query = tf.reshape(query, [batch, blocks, block, heads, query.shape[-1]])
        key_win = windows(key, [heads, key.shape[-1]])
        value_win = windows(value, [heads, value.shape[-1]])
        # The batched-matmul layout: no transpose of the (large) scores.
        scores = tf.einsum("bcqhd,bckhd->bchqk", query, key_win)

        # Key slot k of query slot q in block c: j - i = k - q - left.
        offset = (
            tf.range(views * block)[tf.newaxis, :]
            - tf.range(block)[:, tf.newaxis]
            - left
        )
        w = self.window
        band = (offset >= -w) & (offset <= (0 if causal else w))
        if key_valid is None:
            key_valid = tf.ones([batch, n], tf.bool)
        key_valid = windows(key_valid, tf.zeros([0], tf.int32))  # (b, blocks, keys)
        mask = (
            band[tf.newaxis, tf.newaxis, tf.newaxis]
            & key_valid[:, :, tf.newaxis, tf.newaxis, :]
        )
        if query_valid is not None:
            query_valid = tf.pad(query_valid, [[0, 0], [0, pad]])
            query_valid = tf.reshape(query_valid, [batch, blocks, 1, block, 1])
            mask &= query_valid
        weights = masked_softmax(scores, mask)  # (b, blocks, h, block, keys)
        dropped = self.dropout_layer(weights, training=training)
        context = tf.einsum("bchqk,bckhd->bcqhd", dropped, value_win)
        context = tf.reshape(context, [batch, blocks * block, heads, value.shape[-1]])
        return context[:, :n], weights

    def _dense_from_band(self, weights, n, causal):
        """Blocked band weights -> dense (b, h, n, n)."""
        block, left, _ = self._band_layout(causal)
        i = tf.range(n)[:, tf.newaxis]
        j = tf.range(n)[tf.newaxis, :]
        slot = j - i + i % block + left
        inside = tf.abs(j - i) <= self.window
        if causal:
            inside &= j <= i
        index = tf.stack(
            [
                tf.broadcast_to(i // block, [n, n]),
                tf.broadcast_to(i % block, [n, n]),
                tf.clip_by_value(slot, 0, tf.shape(weights)[-1] - 1),
            ],
            axis=-1,
        )
        # (blocks, block, keys, b, h) gathered at (n, n) -> (n, n, b, h)
        dense = tf.gather_nd(tf.transpose(weights, [1, 3, 4, 0, 2]), index)
        dense = tf.where(inside[:, :, tf.newaxis, tf.newaxis], dense, 0)
        return tf.transpose(dense, [2, 3, 0, 1])

    def _add_disagreement(self, values, context, weights, query_valid, key_valid):
        if self.disagreement == "subspace":
            similarity = _mean_head_cosine(values, key_valid)
        elif self.disagreement == "output":
            similarity = _mean_head_cosine(context, query_valid)
        else:
            # Σ_ij Σ_k A_ik A_jk = Σ_k (Σ_i A_ik)²: no (heads, heads) product needed.
            head_axis = 1 if self.window is None else 2
            summed = tf.reduce_sum(tf.cast(weights, tf.float32), axis=head_axis)
            per_query = tf.reduce_sum(tf.square(summed), axis=-1)
            if self.window is not None:
                # (b, blocks, block) -> (b, n)
                n = tf.shape(context)[1]
                per_query = tf.reshape(per_query, [tf.shape(per_query)[0], -1])[:, :n]
            per_query /= float(self.num_heads**2)
            similarity = _masked_mean(per_query, query_valid)
        self.add_loss(self.disagreement_weight * similarity)

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
        query, value, key = check_batch_sizes(query=query, value=value, key=key)
        query_mask, value_mask = as_bool_mask(query_mask), as_bool_mask(value_mask)
        key_mask, attention_mask = as_bool_mask(key_mask), as_bool_mask(attention_mask)
        key_valid = value_mask
        if key_mask is not None:
            key_valid = key_mask if key_valid is None else key_valid & key_mask
        projected_query = self.query_dense(query)
        projected_key = self.key_dense(key)
        projected_value = self.value_dense(value)
        if self.window is None:
            mask = self._attention_mask(
                query,
                key,
                query_mask,
                value_mask,
                key_mask,
                attention_mask,
                use_causal_mask,
            )
            context, weights = self._compute_attention(
                projected_query, projected_key, projected_value, mask, training
            )
        else:
            self._check_local_inputs(
                query, key, query_mask, value_mask, key_mask, attention_mask
            )
            context, weights = self._local_attention(
                projected_query,
                projected_key,
                projected_value,
                query_mask,
                key_valid,
                use_causal_mask,
                training,
            )
        if self.disagreement is not None:
            self._add_disagreement(
                projected_value, context, weights, query_mask, key_valid
            )
        if self.window is not None and return_attention_scores:
            weights = self._dense_from_band(
                weights, tf.shape(query)[1], use_causal_mask
            )
        output = self.output_dense(context)
        if return_attention_scores:
            return output, weights
        return output

    def _check_local_inputs(
        self, query, key, query_mask, value_mask, key_mask, attention_mask
    ):
        if attention_mask is not None:
            raise ValueError(
                "`attention_mask` needs a full (q_len, k_len) matrix, which `window` "
                "avoids: pass padding masks and `use_causal_mask` instead. Received: "
                f"window={self.window}, attention_mask.shape="
                f"{tuple(static_shape(attention_mask))}"
            )
        q_shape, k_shape = static_shape(query)[:-1], static_shape(key)[:-1]
        if (
            q_shape[1] is not None
            and k_shape[1] is not None
            and q_shape[1] != k_shape[1]
        ):
            raise ValueError(
                "`window` needs `query` and `key` of the same length. Received: "
                f"query.shape={tuple(static_shape(query))}, "
                f"key.shape={tuple(static_shape(key))}"
            )
        check_mask_shape("query_mask", query_mask, q_shape, "query")
        check_mask_shape("value_mask", value_mask, k_shape, "value")
        check_mask_shape("key_mask", key_mask, k_shape, "key")

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
            "window": self.window,
            "disagreement": self.disagreement,
            "disagreement_weight": self.disagreement_weight,
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
