"""FeatureCross: the cross network of DCN-v2, full rank, low rank, or a mixture of
low-rank experts."""

from __future__ import annotations

from keras_attn._validation import (
    check_activation,
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
    register,
    tf,
)


@register
class FeatureCross(Layer):
    """DCN-v2's cross layers: explicit feature crosses of a bounded degree.

    From the input `x_0` (one flat vector per example), `num_layers` cross layers
    compute `x_{l+1} = x_0 ⊙ (W_l x_l + b_l) + x_l`; each layer raises the degree
    of the crosses by one, and the residual `+ x_l` keeps the lower ones. With
    `projection_dim=r` the matrix is low rank, `W_l = U_l V_l^T` (`U_l`, `V_l` of
    shape `(dim, r)`): `x_0 ⊙ (U_l (V_l^T x_l) + b_l) + x_l`, `2 * dim * r`
    weights instead of `dim^2`.

    With `num_experts=k > 1` each layer is DCN-v2's mixture of low-rank experts
    (the paper's DCN-Mix, section 5.2): `x_{l+1} = x_0 ⊙ (Σ_i G_i(x_l) E_i(x_l) +
    b_l) + x_l` with the experts `E_i(x) = U_i g(C_i g(V_i^T x))` (`V_i`, `U_i` of
    rank `projection_dim`, `C_i` of shape `(r, r)`, `g` the `activation`) and the
    gates `G(x) = softmax(x W_g)` over the experts (`W_g` of shape `(dim, k)`, one
    per layer, not regularized). The gates sum to one, so the experts' common bias
    is one `b_l` per layer, as in `num_experts=1`.

    A rank-3 input `(batch, fields, dim)` (field embeddings, as `CTRModel` passes
    to its `interaction` layers) is crossed as its flat `(batch, fields * dim)`
    vector and returned in its own shape, so the layer stacks with
    `InteractingLayer`; a padded field (mask False) is zero in the input and in
    the output.

    Wang et al., "DCN V2: Improved Deep & Cross Network and Practical Lessons for
    Web-scale Learning to Rank Systems", WWW 2021.

    Args:
        num_layers: int. Cross layers. Defaults to 1.
        projection_dim: int or None. Rank of each `W_l`; None is full rank.
            Defaults to None.
        use_bias: bool. Whether to add `b_l`. Defaults to True.
        kernel_initializer: initializer of `W_l` (or `U_l`, `V_l`). Defaults to
            "glorot_uniform".
        bias_initializer: initializer of `b_l`. Defaults to "zeros".
        kernel_regularizer: optional regularizer of the kernels.
        bias_regularizer: optional regularizer of the biases.
        num_experts: int. Low-rank experts per layer; above 1, the mixture
            (needs `projection_dim`). 1 (or None) is the plain cross above, with
            its weights. Defaults to 1.
        activation: str or callable. The experts' nonlinearity `g` (used only
            when `num_experts > 1`). Defaults to "tanh" (DeepCTR's `CrossNetMix`).

    Call arguments:
        inputs: `x_0`, `(batch, dim)` or `(batch, fields, dim)`.
        x: optional tensor of the shape of `inputs` to start from instead of
            `x_0` (the output of an earlier cross, TFRS's `Cross()(x0, x)`).
        mask: optional boolean `(batch, fields)` for a rank-3 input.

    Returns:
        A tensor of the shape of `inputs`.

    Example:

    >>> import numpy as np
    >>> cross = FeatureCross(num_layers=2, projection_dim=4)
    >>> cross(np.ones((3, 39, 16), "float32")).shape
    TensorShape([3, 39, 16])
    >>> mixture = FeatureCross(num_layers=2, projection_dim=4, num_experts=3)
    >>> mixture(np.ones((3, 10), "float32")).shape
    TensorShape([3, 10])
    """

    def __init__(
        self,
        num_layers: int = 1,
        projection_dim: int | None = None,
        use_bias: bool = True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        num_experts: int | None = 1,
        activation="tanh",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_layers = check_positive_int("num_layers", num_layers)
        self.projection_dim = check_positive_int(
            "projection_dim", projection_dim, allow_none=True
        )
        self.use_bias = check_bool("use_bias", use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.num_experts = check_positive_int(
            "num_experts", 1 if num_experts is None else num_experts
        )
        if self.num_experts > 1 and self.projection_dim is None:
            raise ValueError(
                "`projection_dim` must be a positive integer when `num_experts` > 1 "
                "(the experts are low rank). Received: projection_dim=None, "
                f"num_experts={num_experts!r}"
            )
        self._activation_fn = check_activation("activation", activation)
        self.activation = activation
        self.supports_masking = True

    def build(self, inputs_shape):
        shape = static_shape(inputs_shape)
        if len(shape) not in (2, 3) or any(d is None for d in shape[1:]):
            raise ValueError(
                "`inputs` must have shape (batch, dim) or (batch, fields, dim) with "
                f"known sizes. Received: inputs.shape={tuple(shape)}"
            )
        dim = shape[1] if len(shape) == 2 else shape[1] * shape[2]
        experts, rank = self.num_experts, self.projection_dim
        if self.projection_dim is None:
            factors = [("kernel", (dim, dim))]
        elif experts > 1:  # per expert: x @ V_i, g, @ C_i, g, @ U_i
            factors = [
                ("down_kernel", (experts, dim, rank)),
                ("middle_kernel", (experts, rank, rank)),
                ("up_kernel", (experts, rank, dim)),
            ]
        else:  # x @ V (dim, r) @ U^T (r, dim): the low-rank W = U V^T
            factors = [
                ("down_kernel", (dim, self.projection_dim)),
                ("up_kernel", (self.projection_dim, dim)),
            ]
        self.kernels, self.biases, self.gate_kernels = [], [], []
        for layer in range(self.num_layers):
            if experts > 1:
                self.gate_kernels.append(
                    self.add_weight(
                        name=f"gate_kernel_{layer}",
                        shape=(dim, experts),
                        initializer=clone_initializer(self.kernel_initializer),
                    )
                )
            self.kernels.append(
                [
                    self.add_weight(
                        name=f"{name}_{layer}",
                        shape=kernel_shape,
                        initializer=clone_initializer(self.kernel_initializer),
                        regularizer=self.kernel_regularizer,
                    )
                    for name, kernel_shape in factors
                ]
            )
            if self.use_bias:
                self.biases.append(
                    self.add_weight(
                        name=f"bias_{layer}",
                        shape=(dim,),
                        initializer=clone_initializer(self.bias_initializer),
                        regularizer=self.bias_regularizer,
                    )
                )
        self.built = True

    def call(self, inputs, x=None, mask=None):
        x0, x = self.cast_inputs(inputs, x)
        shape = static_shape(x0)
        if x is not None and static_shape(x)[1:] != shape[1:]:
            raise ValueError(
                "`x` must have the shape of `inputs`. Received: "
                f"x.shape={tuple(static_shape(x))}, inputs.shape={tuple(shape)}"
            )
        mask = as_bool_mask(mask)
        real = None
        if len(shape) == 3:
            if mask is not None:
                check_mask_shape("mask", mask, shape[:-1], "inputs")
                real = tf.cast(mask, x0.dtype)[:, :, tf.newaxis]
                x0 = x0 * real
                x = None if x is None else x * real
            flat = [-1, shape[1] * shape[2]]
            x0 = tf.reshape(x0, flat)
            x = None if x is None else tf.reshape(x, flat)
        x = x0 if x is None else x
        for layer, factors in enumerate(self.kernels):
            if self.num_experts > 1:
                projected = self._mixture(x, factors, self.gate_kernels[layer])
            else:
                projected = x
                for kernel in factors:
                    projected = tf.matmul(projected, tf.cast(kernel, x.dtype))
            if self.use_bias:
                projected += tf.cast(self.biases[layer], x.dtype)
            x = x0 * projected + x
        if len(shape) == 3:
            x = tf.reshape(x, [-1, shape[1], shape[2]])
            if real is not None:
                x *= real
        return x

    def _mixture(self, x, factors, gate_kernel):
        """Σ_i G_i(x) E_i(x) for one layer: (batch, dim)."""
        down, middle, up = (tf.cast(k, x.dtype) for k in factors)
        g = self._activation_fn
        hidden = g(tf.einsum("bd,edr->ber", x, down))  # (batch, experts, rank)
        hidden = g(tf.einsum("ber,ers->bes", hidden, middle))
        experts = tf.einsum("ber,erd->bed", hidden, up)  # (batch, experts, dim)
        # Softmax in float32 at least: float16 logits of wide inputs overflow.
        logits = tf.matmul(x, tf.cast(gate_kernel, x.dtype))  # (batch, experts)
        gates = tf.cast(tf.nn.softmax(tf.cast(logits, "float32")), x.dtype)
        return tf.einsum("be,bed->bd", gates, experts)

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return tuple(static_shape(input_shape))

    def get_config(self):
        def regularizer(value):
            return None if value is None else keras.regularizers.serialize(value)

        config = {
            "num_layers": self.num_layers,
            "projection_dim": self.projection_dim,
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "kernel_regularizer": regularizer(self.kernel_regularizer),
            "bias_regularizer": regularizer(self.bias_regularizer),
            "num_experts": self.num_experts,
            "activation": self.activation
            if isinstance(self.activation, str)
            else keras.activations.serialize(self.activation),
        }
        return {**super().get_config(), **config}
