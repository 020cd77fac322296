"""AttentionScore: the single place where a query/key pair becomes an attention
score."""

from __future__ import annotations

import math

from keras_attn._validation import (
    check_batch_sizes,
    check_bool,
    check_choice,
    check_positive_int,
    static_shape,
)
from keras_attn.backend import Layer, clone_initializer, keras, register, tf

SCORES = ("dot", "scaled_dot", "general", "additive", "cosine", "location")
# Scores that compare query and key element by element, so their last dims must agree.
_SAME_DIM_SCORES = ("dot", "scaled_dot", "cosine")


@register
class AttentionScore(Layer):
    """Unnormalized attention scores between queries and keys.

    For queries `q_i` and keys `k_j`:

    - `"dot"`: `q_i · k_j` (Luong et al. 2015).
    - `"scaled_dot"`: `q_i · k_j / sqrt(d)` (Vaswani et al. 2017), `d` the key dim.
    - `"general"`: `q_i W k_jᵀ`, a learned bilinear form (Luong et al. 2015); query and
      key dims may differ.
    - `"additive"`: `vᵀ tanh(W₁ q_i + W₂ k_j)` (Bahdanau et al. 2015), `units` wide.
    - `"cosine"`: `q_i · k_j / (|q_i| |k_j|)` (Graves et al. 2014).
    - `"location"`: `(W q_i)_j`, from the query alone (Luong et al. 2015); `W` has one
      column per key position, so keys may be at most `max_length` long.

    Any leading axes beyond `(q_len, dim)` are carried through (e.g. heads).

    Args:
        score: str. One of "dot", "scaled_dot", "general", "additive", "cosine",
            "location". Defaults to "dot".
        units: int. Hidden size of the "additive" score. Defaults to the key dim.
        max_length: int. Number of key positions the "location" score covers. Defaults
            to the static key length seen at build.
        use_bias: bool. Whether "additive" and "location" add a bias. Defaults to True.
        kernel_initializer: initializer of the learned matrices. Defaults to
            "glorot_uniform".
        bias_initializer: initializer of the biases. Defaults to "zeros".

    Call arguments:
        query: `(batch, q_len, q_dim)`.
        key: `(batch, k_len, k_dim)`.

    Returns:
        Scores of shape `(batch, q_len, k_len)`.

    Example:

    >>> import numpy as np
    >>> layer = AttentionScore(score="scaled_dot")
    >>> layer(np.ones((2, 3, 8), "float32"), np.ones((2, 5, 8), "float32")).shape
    TensorShape([2, 3, 5])
    """

    def __init__(
        self,
        score: str = "dot",
        units: int | None = None,
        max_length: int | None = None,
        use_bias: bool = True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_choice("score", score, SCORES)
        check_positive_int("units", units, allow_none=True)
        check_positive_int("max_length", max_length, allow_none=True)
        self.score = score
        self.units = units
        self.max_length = max_length
        self.use_bias = check_bool("use_bias", use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, query_shape, key_shape=None):
        query_shape = static_shape(query_shape)
        key_shape = query_shape if key_shape is None else static_shape(key_shape)
        if len(query_shape) < 3 or len(query_shape) != len(key_shape):
            raise ValueError(
                "`query` and `key` must have the same rank, at least 3: (batch, "
                "q_len, q_dim) and (batch, k_len, k_dim), any axes between batch and "
                f"length alike. Received: query.shape={tuple(query_shape)}, "
                f"key.shape={tuple(key_shape)}"
            )
        q_dim, k_dim = query_shape[-1], key_shape[-1]
        if q_dim is None or k_dim is None:
            raise ValueError(
                "The last dims of `query` and `key` must be known. Received: "
                f"query.shape={tuple(query_shape)}, key.shape={tuple(key_shape)}"
            )
        if self.score in _SAME_DIM_SCORES and q_dim != k_dim:
            raise ValueError(
                f'score="{self.score}" needs `query` and `key` of the same last dim. '
                f"Received: query.shape={tuple(query_shape)}, "
                f"key.shape={tuple(key_shape)}"
            )
        if self.score == "general":
            self.kernel = self.add_weight(
                name="kernel",
                shape=(q_dim, k_dim),
                initializer=clone_initializer(self.kernel_initializer),
            )
        elif self.score == "additive":
            units = self.units or k_dim
            self.query_kernel = self.add_weight(
                name="query_kernel",
                shape=(q_dim, units),
                initializer=clone_initializer(self.kernel_initializer),
            )
            self.key_kernel = self.add_weight(
                name="key_kernel",
                shape=(k_dim, units),
                initializer=clone_initializer(self.kernel_initializer),
            )
            self.bias = (
                self.add_weight(
                    name="bias",
                    shape=(units,),
                    initializer=clone_initializer(self.bias_initializer),
                )
                if self.use_bias
                else None
            )
            self.score_kernel = self.add_weight(
                name="score_kernel",
                shape=(units,),
                initializer=clone_initializer(self.kernel_initializer),
            )
        elif self.score == "location":
            length = self.max_length or key_shape[-2]
            if length is None:
                raise ValueError(
                    'score="location" needs `max_length` or a static key length. '
                    f"Received: max_length=None, key.shape={tuple(key_shape)}"
                )
            self.max_length = length
            self.kernel = self.add_weight(
                name="kernel",
                shape=(q_dim, length),
                initializer=clone_initializer(self.kernel_initializer),
            )
            self.bias = (
                self.add_weight(
                    name="bias",
                    shape=(length,),
                    initializer=clone_initializer(self.bias_initializer),
                )
                if self.use_bias
                else None
            )
        self.built = True

    def call(self, query, key=None):
        key = query if key is None else key
        query, key = self.cast_inputs(query, key)
        query, key = check_batch_sizes(query=query, key=key)
        if self.score == "scaled_dot":
            # Scaled before the product: the unscaled q·k would overflow float16
            # (max 65504) sqrt(d) times sooner than the scores themselves.
            query = query * tf.cast(1.0 / math.sqrt(key.shape[-1]), query.dtype)
        if self.score in ("dot", "scaled_dot"):
            return tf.einsum("...qd,...kd->...qk", query, key)
        if self.score == "cosine":
            # Normalize in float32: a float16 epsilon underflows and 0/0 gives NaN.
            q = tf.math.l2_normalize(tf.cast(query, tf.float32), axis=-1, epsilon=1e-12)
            k = tf.math.l2_normalize(tf.cast(key, tf.float32), axis=-1, epsilon=1e-12)
            return tf.cast(tf.einsum("...qd,...kd->...qk", q, k), query.dtype)
        if self.score == "general":
            projected = tf.einsum("...qd,de->...qe", query, self.kernel)
            return tf.einsum("...qe,...ke->...qk", projected, key)
        if self.score == "additive":
            q = tf.einsum("...qd,du->...qu", query, self.query_kernel)
            k = tf.einsum("...kd,du->...ku", key, self.key_kernel)
            # (..., q_len, k_len, units): broadcast every query against every key.
            hidden = q[..., :, tf.newaxis, :] + k[..., tf.newaxis, :, :]
            if self.bias is not None:
                hidden += self.bias
            return tf.einsum("...qku,u->...qk", tf.tanh(hidden), self.score_kernel)
        # "location": one score per key position, from the query alone.
        k_len = key.shape[-2]
        if k_len is not None and k_len > self.max_length:
            raise ValueError(
                f'score="location" covers at most max_length={self.max_length} key '
                f"positions. Received: key.shape={tuple(key.shape)}"
            )
        scores = tf.einsum("...qd,dl->...ql", query, self.kernel)
        if self.bias is not None:
            scores += self.bias
        return scores[..., : tf.shape(key)[-2]]

    def compute_output_shape(self, query_shape, key_shape=None):
        query_shape = static_shape(query_shape)
        key_shape = query_shape if key_shape is None else static_shape(key_shape)
        return tuple(query_shape[:-1]) + (key_shape[-2],)

    def get_config(self):
        config = {
            "score": self.score,
            "units": self.units,
            "max_length": self.max_length,
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
        return {**super().get_config(), **config}
