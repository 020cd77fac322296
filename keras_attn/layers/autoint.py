"""InteractingLayer: AutoInt's multi-head self-attention across feature fields."""

from __future__ import annotations

import math

from keras_attn._deprecation import deprecated_argument, warn_deprecated
from keras_attn._validation import (
    check_bool,
    check_mask_shape,
    check_positive_int,
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


@register
class InteractingLayer(Layer):
    """AutoInt's interacting layer: multi-head self-attention across fields.

    For field embeddings `e_m` and each head `h`:
    `a_mk = softmax_k(<W_q e_m, W_k e_k>)`, `ẽ_m = ‖_h Σ_k a_mk W_v e_k`, and the
    output is `ReLU(ẽ_m + W_res e_m)` (without `W_res e_m` when `use_residual=False`).
    The paper has no `1/sqrt(key_dim)` in the score; `scaling=True` adds it. Layers
    stack: the output is again one vector per field. The projections
    (`query_kernel`, `key_kernel`, `value_kernel`, `residual_kernel`, each
    `(dim, num_heads * key_dim)`, head-major columns) run as one matmul.

    Song et al., "AutoInt: Automatic Feature Interaction Learning via Self-Attentive
    Neural Networks", CIKM 2019.

    Args:
        num_heads: int. Number of attention heads. Defaults to 2.
        key_dim: int. Size of each head (the paper's d'; `att_dim` before, the
            old spelling warns). Defaults to 8.
        use_residual: bool. Whether to add the residual projection `W_res e_m`.
            Defaults to True.
        scaling: bool. Whether to divide the scores by `sqrt(key_dim)`. Defaults to
            False, as in the paper.
        kernel_initializer: initializer of the projections. Defaults to
            "glorot_uniform".
        kernel_regularizer: optional regularizer of the projections.

    Call arguments:
        inputs: `(batch, fields, dim)`.
        mask: optional boolean `(batch, fields)`, True at real fields; padded fields
            are never attended to and give zero output rows.
        return_attention_scores: bool. Also return the weights. Defaults to False.

    Returns:
        `(batch, fields, num_heads * key_dim)`, and the weights
        `(batch, num_heads, fields, fields)` when `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> layer = InteractingLayer(num_heads=2, key_dim=8)
    >>> out, weights = layer(np.ones((4, 39, 16), "float32"),
    ...                      return_attention_scores=True)
    >>> out.shape, weights.shape
    (TensorShape([4, 39, 16]), TensorShape([4, 2, 39, 39]))
    """

    def __init__(
        self,
        num_heads: int = 2,
        key_dim: int | None = None,
        use_residual: bool = True,
        scaling: bool = False,
        kernel_initializer="glorot_uniform",
        kernel_regularizer=None,
        **kwargs,
    ):
        # `att_dim` (the old name, also in configs saved before) -> `key_dim`.
        key_dim = deprecated_argument(
            kwargs, "att_dim", "key_dim", key_dim, "InteractingLayer"
        )
        key_dim = 8 if key_dim is None else key_dim
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("key_dim", key_dim)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.use_residual = check_bool("use_residual", use_residual)
        self.scaling = check_bool("scaling", scaling)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.supports_masking = True

    def build(self, input_shape):
        input_shape = static_shape(input_shape)
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                "`inputs` must have shape (batch, fields, dim) with a known dim. "
                f"Received: inputs.shape={tuple(input_shape)}"
            )
        names = ["query", "key", "value"] + (["residual"] if self.use_residual else [])
        self.kernels = []
        for name in names:
            kernel = self.add_weight(
                name=f"{name}_kernel",
                shape=(input_shape[-1], self.num_heads * self.key_dim),
                initializer=clone_initializer(self.kernel_initializer),
                regularizer=self.kernel_regularizer,
            )
            setattr(self, f"{name}_kernel", kernel)
            self.kernels.append(kernel)
        self.built = True

    def call(self, inputs, mask=None, return_attention_scores=False):
        inputs = self.cast_inputs(inputs)
        mask = as_bool_mask(mask)
        check_mask_shape("mask", mask, static_shape(inputs)[:-1], "inputs")
        heads, att, dim = self.num_heads, self.key_dim, inputs.shape[-1]
        batch, fields = tf.shape(inputs)[0], tf.shape(inputs)[1]
        kernel = tf.concat([tf.cast(k, inputs.dtype) for k in self.kernels], axis=1)
        # One matmul for every projection, then heads first: (proj * heads, b, f, att)
        projected = tf.matmul(tf.reshape(inputs, [-1, dim]), kernel)
        projected = tf.reshape(
            projected, [batch, fields, len(self.kernels) * heads, att]
        )
        parts = tf.split(tf.transpose(projected, [2, 0, 1, 3]), len(self.kernels))
        query, key, value = parts[:3]  # (heads, batch, fields, att)
        if self.scaling:
            query *= tf.cast(1.0 / math.sqrt(att), query.dtype)
        scores = tf.matmul(query, key, transpose_b=True)  # (heads, batch, f, f)
        weights = masked_softmax(
            scores, None if mask is None else mask[tf.newaxis, :, tf.newaxis, :]
        )
        context = tf.matmul(weights, value)
        if self.use_residual:
            context += parts[3]
        output = tf.nn.relu(
            tf.reshape(
                tf.transpose(context, [1, 2, 0, 3]), [batch, fields, heads * att]
            )
        )
        if mask is not None:
            output *= tf.cast(mask[:, :, tf.newaxis], output.dtype)
        if return_attention_scores:
            return output, tf.transpose(weights, [1, 0, 2, 3])
        return output

    @property
    def att_dim(self) -> int:
        """The old name of `key_dim` (warns)."""
        warn_deprecated("`InteractingLayer.att_dim`", "`key_dim`")
        return self.key_dim

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        input_shape = static_shape(input_shape)
        return (input_shape[0], input_shape[1], self.num_heads * self.key_dim)

    def compute_output_spec(self, inputs, mask=None, return_attention_scores=False):
        # Keras 3 only (a symbolic call): with the weights, two tensors, as `call`
        # returns them (`compute_output_shape` alone would give one).
        output = keras.KerasTensor(
            self.compute_output_shape(inputs.shape), dtype=self.compute_dtype
        )
        if not return_attention_scores:
            return output
        batch, fields = inputs.shape[0], inputs.shape[1]
        weights = keras.KerasTensor(
            (batch, self.num_heads, fields, fields), dtype=self.compute_dtype
        )
        return output, weights

    def get_config(self):
        config = {
            "num_heads": self.num_heads,
            "key_dim": self.key_dim,
            "use_residual": self.use_residual,
            "scaling": self.scaling,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer)
            if self.kernel_regularizer
            else None,
        }
        return {**super().get_config(), **config}
