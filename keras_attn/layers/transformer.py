"""Transformer encoder: FeedForward, TransformerEncoderBlock and the ALBERT-style
shared stack SharedTransformerEncoder."""

from __future__ import annotations

from keras_attn._validation import (
    check_bool,
    check_choice,
    check_finite,
    check_positive_int,
    check_rate,
    static_shape,
)
from keras_attn.backend import (
    Layer,
    as_bool_mask,
    clone_initializer,
    keras,
    register,
    tf,
)
from keras_attn.layers.multi_head import MultiHeadAttention

ACTIVATIONS = ("relu", "gelu", "gelu_approximate")


def _activation(name, x):
    if name == "relu":
        return tf.nn.relu(x)
    # PyTorch's "gelu" is the exact (erf) form; Google's BERT uses the tanh
    # approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
    return tf.nn.gelu(x, approximate=name == "gelu_approximate")


def _check_feature_shape(name, shape):
    shape = static_shape(shape)
    if len(shape) < 2 or shape[-1] is None:
        raise ValueError(
            f"`{name}` must have shape (batch, ..., dim) with a known dim. "
            f"Received: {name}.shape={tuple(shape)}"
        )
    return shape


@register
class FeedForward(Layer):
    """Position-wise feed-forward network: `W₂ dropout(act(W₁ x + b₁)) + b₂`.

    The feed-forward sublayer of the Transformer (Vaswani et al. 2017), laid out as
    PyTorch's `TransformerEncoderLayer`: activation and dropout after the first linear
    map, nothing after the second.

    Args:
        intermediate_dim: int. Width of the hidden layer (`dim_feedforward`).
        output_dim: int. Width of the output. Defaults to the input's dim.
        activation: str. "relu", "gelu" (exact, erf-based, PyTorch's) or
            "gelu_approximate" (the tanh form of Google's BERT). Defaults to "relu".
        dropout: float. Dropout rate after the activation. Defaults to 0.0.
        kernel_initializer: initializer of the kernels. Defaults to "glorot_uniform".
        bias_initializer: initializer of the biases. Defaults to "zeros".

    Call arguments:
        inputs: `(batch, ..., dim)`.
        training: bool, whether dropout is active.

    Returns:
        `(batch, ..., output_dim)`.

    Example:

    >>> import numpy as np
    >>> FeedForward(intermediate_dim=32)(np.ones((2, 5, 8), "float32")).shape
    TensorShape([2, 5, 8])
    """

    def __init__(
        self,
        intermediate_dim: int,
        output_dim: int | None = None,
        activation: str = "relu",
        dropout: float = 0.0,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("intermediate_dim", intermediate_dim)
        check_positive_int("output_dim", output_dim, allow_none=True)
        check_choice("activation", activation, ACTIVATIONS)
        check_rate("dropout", dropout)
        self.intermediate_dim = intermediate_dim
        self.output_dim = output_dim
        self.activation = activation
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="dropout_layer"
        )

    def _dense(self, units, name):
        return keras.layers.Dense(
            units,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, inputs_shape):
        shape = _check_feature_shape("inputs", inputs_shape)
        self.intermediate_dense = self._dense(
            self.intermediate_dim, "intermediate_dense"
        )
        self.output_dense = self._dense(self.output_dim or shape[-1], "output_dense")
        self.intermediate_dense.build(shape)
        self.output_dense.build(shape[:-1] + [self.intermediate_dim])
        self.built = True

    def call(self, inputs, training=None):
        hidden = _activation(self.activation, self.intermediate_dense(inputs))
        hidden = self.dropout_layer(hidden, training=training)
        return self.output_dense(hidden)

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = {
            "intermediate_dim": self.intermediate_dim,
            "output_dim": self.output_dim,
            "activation": self.activation,
            "dropout": self.dropout,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
        return {**super().get_config(), **config}


@register
class TransformerEncoderBlock(Layer):
    """One Transformer encoder layer, with PyTorch `TransformerEncoderLayer` semantics.

    Post-LN (the paper's layout, the default):
    `x = LN₁(x + dropout(SA(x)))`, then `x = LN₂(x + dropout(FF(x)))`.
    Pre-LN (`normalize_first=True`):
    `x = x + dropout(SA(LN₁(x)))`, then `x = x + dropout(FF(LN₂(x)))`.
    `SA` is multi-head self-attention with dropout on its weights, and
    `FF(x) = W₂ dropout(act(W₁ x + b₁)) + b₂`. Every dropout uses the one rate
    `dropout`, and LayerNorm uses PyTorch's epsilon 1e-5, so weights copied from a
    PyTorch layer give its outputs.

    Paper: "Attention Is All You Need", Vaswani et al., NeurIPS 2017; pre-LN: "On Layer
    Normalization in the Transformer Architecture", Xiong et al., ICML 2020.

    Args:
        num_heads: int. Number of attention heads; must divide the input dim.
        intermediate_dim: int. Width of the feed-forward layer. Defaults to 2048.
        dropout: float. Dropout rate everywhere. Defaults to 0.1.
        activation: str. "relu", "gelu" (exact) or "gelu_approximate" (tanh form).
            Defaults to "relu".
        normalize_first: bool. Pre-LN instead of post-LN. Defaults to False.
        layer_norm_epsilon: float. LayerNorm epsilon. Defaults to 1e-5.
        kernel_initializer: initializer of every kernel. Defaults to
            "glorot_uniform".
        bias_initializer: initializer of every bias. Defaults to "zeros".
        intermediate_dropout: float. Dropout after the feed-forward activation;
            None is `dropout` (PyTorch's layer), 0.0 none (BERT's, Google's and
            Hugging Face's layer). Defaults to None.

    Call arguments:
        inputs: `(batch, seq_len, dim)`.
        padding_mask: optional boolean `(batch, seq_len)`, True at real tokens (the
            negation of PyTorch's `src_key_padding_mask`). `mask` from an upstream
            `Embedding(mask_zero=True)` is used when it is not given.
        attention_mask: optional boolean `(batch, seq_len, seq_len)`, True where
            position i may attend to j (the negation of PyTorch's boolean `src_mask`).
        training: bool, whether dropout is active.
        use_causal_mask: bool. Position i attends only to j <= i. Defaults to False.
        return_attention_scores: bool. Also return the self-attention weights.
            Defaults to False.

    Returns:
        `(batch, seq_len, dim)`. Padded positions are computed like real ones (as in
        PyTorch) and never influence the real ones. With
        `return_attention_scores=True`, a tuple of that and the weights
        `(batch, num_heads, seq_len, seq_len)` (zero on padded keys; a row with no
        real key is all zeros).

    Example:

    >>> import numpy as np
    >>> block = TransformerEncoderBlock(num_heads=2, intermediate_dim=32)
    >>> block(np.ones((2, 5, 8), "float32")).shape
    TensorShape([2, 5, 8])
    """

    def __init__(
        self,
        num_heads: int,
        intermediate_dim: int = 2048,
        dropout: float = 0.1,
        activation: str = "relu",
        normalize_first: bool = False,
        layer_norm_epsilon: float = 1e-5,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        intermediate_dropout: float | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("intermediate_dim", intermediate_dim)
        check_rate("dropout", dropout)
        if intermediate_dropout is not None:
            check_rate("intermediate_dropout", intermediate_dropout)
        self.intermediate_dropout = intermediate_dropout
        check_choice("activation", activation, ACTIVATIONS)
        check_finite(
            "layer_norm_epsilon", layer_norm_epsilon, minimum=0, exclusive_minimum=True
        )
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.activation = activation
        self.normalize_first = check_bool("normalize_first", normalize_first)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True
        self.attention_output_dropout = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="attention_output_dropout"
        )
        self.feedforward_output_dropout = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="feedforward_output_dropout"
        )

    def build(self, inputs_shape):
        shape = static_shape(inputs_shape)
        if len(shape) != 3 or shape[-1] is None:
            raise ValueError(
                "`inputs` must have shape (batch, seq_len, dim) with a known dim. "
                f"Received: inputs.shape={tuple(shape)}"
            )
        dim = shape[-1]
        if dim % self.num_heads:
            raise ValueError(
                f"The input dim must be divisible by `num_heads`. Received: "
                f"inputs.shape={tuple(shape)}, num_heads={self.num_heads}"
            )
        self.attention = MultiHeadAttention(
            num_heads=self.num_heads,
            key_dim=dim // self.num_heads,
            dropout=self.dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="attention",
        )
        self.attention_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon,
            dtype=self.dtype_policy,
            name="attention_norm",
        )
        self.feedforward = FeedForward(
            intermediate_dim=self.intermediate_dim,
            activation=self.activation,
            dropout=self.dropout
            if self.intermediate_dropout is None
            else self.intermediate_dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="feedforward",
        )
        self.feedforward_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon,
            dtype=self.dtype_policy,
            name="feedforward_norm",
        )
        self.attention.build(shape, shape)
        self.attention_norm.build(shape)
        self.feedforward.build(shape)
        self.feedforward_norm.build(shape)
        self.built = True

    def _self_attention(self, x, padding_mask, attention_mask, training, causal):
        # PyTorch masks keys only (key_padding_mask): padded queries still attend.
        # Returns (output, weights (batch, heads, seq_len, seq_len)).
        x, weights = self.attention(
            x,
            x,
            value_mask=padding_mask,
            attention_mask=attention_mask,
            training=training,
            use_causal_mask=causal,
            return_attention_scores=True,
        )
        return self.attention_output_dropout(x, training=training), weights

    def _feedforward(self, x, training):
        x = self.feedforward(x, training=training)
        return self.feedforward_output_dropout(x, training=training)

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        mask=None,
        training=None,
        use_causal_mask=False,
        return_attention_scores=False,
    ):
        inputs = self.cast_inputs(inputs)
        if padding_mask is None:
            padding_mask = mask
        padding_mask, attention_mask = (
            as_bool_mask(padding_mask),
            as_bool_mask(attention_mask),
        )
        x = inputs
        if self.normalize_first:
            attended, weights = self._self_attention(
                self.attention_norm(x),
                padding_mask,
                attention_mask,
                training,
                use_causal_mask,
            )
            x = x + attended
            x = x + self._feedforward(self.feedforward_norm(x), training)
        else:
            attended, weights = self._self_attention(
                x, padding_mask, attention_mask, training, use_causal_mask
            )
            x = self.attention_norm(x + attended)
            x = self.feedforward_norm(x + self._feedforward(x, training))
        if return_attention_scores:
            return x, weights
        return x

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = {
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "activation": self.activation,
            "normalize_first": self.normalize_first,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "intermediate_dropout": self.intermediate_dropout,
        }
        return {**super().get_config(), **config}


@register
class SharedTransformerEncoder(Layer):
    """A stack of `num_layers` encoder layers sharing `num_groups` blocks (ALBERT).

    Cross-layer parameter sharing: layer `l` (0-based) applies block
    `floor(l · num_groups / num_layers)`, so with `num_groups=1` one
    `TransformerEncoderBlock` is applied `num_layers` times and the stack has exactly
    the parameters of one block; `num_groups=num_layers` is an unshared BERT stack.

    Paper: "ALBERT: A Lite BERT for Self-supervised Learning of Language
    Representations", Lan et al., ICLR 2020.

    Args:
        num_layers: int. Depth of the stack. Defaults to 12.
        num_groups: int. Number of distinct blocks, at most `num_layers`. Defaults
            to 1.
        num_heads: int. Attention heads of each block. Defaults to 12.
        intermediate_dim: int. Feed-forward width of each block. Defaults to 3072.
        dropout: float. Dropout rate of each block. Defaults to 0.1.
        activation: str. "relu", "gelu" (exact) or "gelu_approximate" (tanh
            form). Defaults to "gelu".
        normalize_first: bool. Pre-LN blocks. Defaults to False.
        layer_norm_epsilon: float. LayerNorm epsilon. Defaults to 1e-5.
        kernel_initializer: initializer of every kernel. Defaults to
            "glorot_uniform".
        bias_initializer: initializer of every bias. Defaults to "zeros".

    Call arguments:
        inputs: `(batch, seq_len, dim)`.
        padding_mask: optional boolean `(batch, seq_len)`, True at real tokens.
        attention_mask: optional boolean `(batch, seq_len, seq_len)`.
        training: bool, whether dropout is active.

    Returns:
        `(batch, seq_len, dim)`.

    Example:

    >>> import numpy as np
    >>> encoder = SharedTransformerEncoder(
    ...     num_layers=4, num_heads=2, intermediate_dim=16
    ... )
    >>> encoder(np.ones((2, 5, 8), "float32")).shape
    TensorShape([2, 5, 8])
    """

    def __init__(
        self,
        num_layers: int = 12,
        num_groups: int = 1,
        num_heads: int = 12,
        intermediate_dim: int = 3072,
        dropout: float = 0.1,
        activation: str = "gelu",
        normalize_first: bool = False,
        layer_norm_epsilon: float = 1e-5,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_layers", num_layers)
        check_positive_int("num_groups", num_groups)
        if num_groups > num_layers:
            raise ValueError(
                "`num_groups` must be at most `num_layers`. Received: "
                f"num_groups={num_groups}, num_layers={num_layers}"
            )
        self.num_layers = num_layers
        self.num_groups = num_groups
        self.block_kwargs = {
            "num_heads": num_heads,
            "intermediate_dim": intermediate_dim,
            "dropout": dropout,
            "activation": activation,
            "normalize_first": normalize_first,
            "layer_norm_epsilon": layer_norm_epsilon,
        }
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True
        self.blocks = [
            TransformerEncoderBlock(
                **self.block_kwargs,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                bias_initializer=clone_initializer(self.bias_initializer),
                dtype=self.dtype_policy,
                name=f"block_{i}",
            )
            for i in range(num_groups)
        ]

    def build(self, inputs_shape):
        for block in self.blocks:
            block.build(inputs_shape)
        self.built = True

    def group_of_layer(self, layer_index: int) -> int:
        """The index of the block that layer `layer_index` applies."""
        return layer_index * self.num_groups // self.num_layers

    def call(
        self, inputs, padding_mask=None, attention_mask=None, mask=None, training=None
    ):
        inputs = self.cast_inputs(inputs)
        if padding_mask is None:
            padding_mask = mask
        x = inputs
        for layer_index in range(self.num_layers):
            x = self.blocks[self.group_of_layer(layer_index)](
                x,
                padding_mask=padding_mask,
                attention_mask=attention_mask,
                training=training,
            )
        return x

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = {
            "num_layers": self.num_layers,
            "num_groups": self.num_groups,
            **self.block_kwargs,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
        return {**super().get_config(), **config}
