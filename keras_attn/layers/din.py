"""Deep Interest Network layers: Dice, LocalActivationUnit, AttentionSequencePooling."""

from __future__ import annotations

from keras_attn._validation import (
    check_activation,
    check_batch_sizes,
    check_bool,
    check_choice,
    check_finite,
    check_int,
    check_mask_shape,
    check_positive_int_list,
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


def _in_xla(graph=None) -> bool:
    """Whether ops built now are compiled by XLA (a `jit_compile` function)."""
    from tensorflow.python.ops import control_flow_util

    return control_flow_util.GraphOrParentsInXlaContext(
        graph or tf.compat.v1.get_default_graph()
    )


def _sum_rows(values, rows, num_rows):
    """`(num_rows, ...)`: row `r` the sum of the `values` whose sorted `rows` is r.

    On a CPU the sorted segment sum runs one reduction per row where the
    unsorted one adds the values one by one (on bench_din's packed histories,
    ~9,000 x 80: 0.25 against 1.0 ms); XLA, which cannot size `segment_sum`'s
    output, gets the unsorted one."""
    if _in_xla():
        return tf.math.unsorted_segment_sum(values, rows, num_rows)
    summed = tf.math.segment_sum(values, rows)  # up to the last row with values
    missing = num_rows - tf.shape(summed, out_type=tf.int32)[0]
    shape = tf.concat([[missing], tf.shape(values, out_type=tf.int32)[1:]], 0)
    return tf.concat([summed, tf.zeros(shape, values.dtype)], 0)


@tf.custom_gradient
def _gather_rows(params, rows):
    """`tf.gather(params, rows)` for sorted `rows`, whose gradient sums each row's
    copies with `_sum_rows` (`tf.gather`'s own adds them unsorted)."""

    def grad(upstream):
        return _sum_rows(upstream, rows, tf.shape(params, out_type=tf.int32)[0]), None

    return tf.gather(params, rows), grad


@register
class Dice(Layer):
    """Dice, the data-adaptive activation of DIN.

    `p(s) = sigmoid((s - E[s]) / sqrt(Var[s] + epsilon))`,
    `f(s) = p(s) s + (1 - p(s)) alpha s`, with a learned `alpha` per channel. In
    training `E[s]` and `Var[s]` are the batch's (over every axis but `axis`) and
    update moving averages, as `BatchNormalization` does; in inference the moving
    averages are used. They are non-trainable weights, so they are saved with the
    model. Statistics are computed in float32 under mixed precision, and over the
    global batch under a `tf.distribute` strategy with several replicas.

    Zhou et al., "Deep Interest Network for Click-Through Rate Prediction", KDD 2018.

    Args:
        axis: int. The channel axis. Defaults to -1.
        epsilon: float. Added to the variance. Defaults to 1e-9.
        momentum: float. Momentum of the moving averages. Defaults to 0.99.
        alpha_initializer: initializer of `alpha`. Defaults to "zeros".

    Call arguments:
        inputs: a tensor of any rank >= 2.
        training: bool. Batch statistics (True) or moving statistics.

    Returns:
        A tensor of the shape of `inputs`.

    Example:

    >>> import numpy as np
    >>> Dice()(np.ones((4, 8), "float32")).shape
    TensorShape([4, 8])
    """

    def __init__(
        self,
        axis: int = -1,
        epsilon: float = 1e-9,
        momentum: float = 0.99,
        alpha_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_int("axis", axis)
        check_finite("epsilon", epsilon, minimum=0, exclusive_minimum=True)
        check_rate("momentum", momentum)
        self.axis = axis
        self.epsilon = float(epsilon)
        self.momentum = float(momentum)
        self.alpha_initializer = keras.initializers.get(alpha_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        input_shape = static_shape(input_shape)
        rank = len(input_shape)
        if rank < 2:
            # Batch statistics need a batch axis besides the channel axis.
            raise ValueError(
                "`inputs` must have rank >= 2, (batch, ..., channels). Received: "
                f"inputs.shape={tuple(input_shape)}"
            )
        if not -rank <= self.axis < rank or input_shape[self.axis] is None:
            raise ValueError(
                f"`axis` must index a known dim of `inputs`. Received: "
                f"axis={self.axis}, inputs.shape={tuple(input_shape)}"
            )
        channels = input_shape[self.axis % rank]
        self.alpha = self.add_weight(
            name="alpha",
            shape=(channels,),
            initializer=clone_initializer(self.alpha_initializer),
        )
        self.moving_mean = self.add_weight(
            name="moving_mean",
            shape=(channels,),
            initializer="zeros",
            trainable=False,
        )
        self.moving_variance = self.add_weight(
            name="moving_variance",
            shape=(channels,),
            initializer="ones",
            trainable=False,
        )
        self.built = True

    def _broadcast(self, v, rank):
        shape = [1] * rank
        shape[self.axis % rank] = -1
        return tf.reshape(v, shape)

    def _batch_moments(self, x, reduce_axes):
        # Mean and variance over `reduce_axes`, and whether there was any element:
        # an empty batch (e.g. no real history item at all) must not turn the
        # moving statistics into NaN.
        # Under a tf.distribute strategy with several replicas, the sums run over
        # the global batch (as `BatchNormalization(synchronized=True)`), so the
        # replicas' statistics, and the step, are those of one device.
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:

            def total(v):
                return context.all_reduce(tf.distribute.ReduceOp.SUM, v)
        else:

            def total(v):
                return v

        count = tf.cast(tf.reduce_prod(tf.gather(tf.shape(x), reduce_axes)), x.dtype)
        count = total(count)
        safe = tf.maximum(count, 1.0)
        mean = total(tf.reduce_sum(x, reduce_axes)) / safe
        centered = x - self._broadcast(mean, len(x.shape))
        variance = total(tf.reduce_sum(tf.square(centered), reduce_axes)) / safe
        return mean, variance, count > 0

    def _fused_moments(self, x):
        # Batch statistics over every axis but the last on one replica, through
        # the batch-norm kernel: one op forward (mean, variance and the
        # normalized x) and one for the gradient, where the moments written out
        # cost a dozen small ops each way (on the DIN benchmark's steps, the two
        # Dice layers' ops took almost half the step's op time).
        channels = x.shape[-1]
        normalized, mean, variance, *_ = tf.raw_ops.FusedBatchNormV3(
            x=tf.reshape(x, [-1, 1, 1, channels]),
            scale=tf.ones([channels]),
            offset=tf.zeros([channels]),
            mean=tf.zeros([0]),
            variance=tf.zeros([0]),
            epsilon=self.epsilon,
            exponential_avg_factor=1.0,
            data_format="NHWC",
            is_training=True,
        )
        count = tf.cast(tf.size(x) // channels, tf.float32)
        # The kernel's variance is the unbiased one (n / (n - 1)); Dice's, as
        # `_batch_moments`, the biased one.
        variance = variance * tf.maximum(count - 1.0, 0.0) / tf.maximum(count, 1.0)
        return tf.reshape(normalized, tf.shape(x)), mean, variance, count > 0

    def call(self, inputs, training=None):
        inputs = self.cast_inputs(inputs)
        x = tf.cast(inputs, tf.float32)
        # The channel axis is counted on this call's rank: the activation unit
        # calls Dice on (batch, history, units) or on packed (items, units) rows.
        rank = len(x.shape)
        axis = self.axis % rank
        reduce_axes = [i for i in range(rank) if i != axis]
        moving_mean = tf.cast(self.moving_mean, tf.float32)
        moving_variance = tf.cast(self.moving_variance, tf.float32)
        context = tf.distribute.get_replica_context()
        fused = axis == rank - 1 and (
            context is None or context.num_replicas_in_sync == 1
        )

        def standardized(mean, variance):
            # (x - mean) / sqrt(variance + epsilon), per-channel factors folded
            # first so the big tensor sees few elementwise ops.
            inv = tf.math.rsqrt(variance + self.epsilon)
            return x * self._broadcast(inv, rank) - self._broadcast(mean * inv, rank)

        def batch_statistics():
            if fused:
                z, mean, variance, nonempty = self._fused_moments(x)
            else:
                mean, variance, nonempty = self._batch_moments(x, reduce_axes)
                z = standardized(mean, variance)
            m = self.momentum
            self.moving_mean.assign(
                tf.where(nonempty, moving_mean * m + mean * (1.0 - m), moving_mean)
            )
            self.moving_variance.assign(
                tf.where(
                    nonempty,
                    moving_variance * m + variance * (1.0 - m),
                    moving_variance,
                )
            )
            return z

        if tf.is_tensor(training):
            # A tensor `training` (e.g. a tf.function argument) decides in the graph.
            z = tf.cond(
                tf.cast(training, tf.bool),
                batch_statistics,
                lambda: standardized(moving_mean, moving_variance),
            )
        elif training:
            z = batch_statistics()
        else:
            z = standardized(moving_mean, moving_variance)
        # f = x (alpha + p (1 - alpha)), p = sigmoid(z)
        p = tf.sigmoid(z)
        alpha = tf.cast(self.alpha, tf.float32)
        out = x * (
            self._broadcast(alpha, rank) + p * self._broadcast(1.0 - alpha, rank)
        )
        return tf.cast(out, inputs.dtype)

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = {
            "axis": self.axis,
            "epsilon": self.epsilon,
            "momentum": self.momentum,
            "alpha_initializer": keras.initializers.serialize(self.alpha_initializer),
        }
        return {**super().get_config(), **config}


#: `LocalActivationUnit`'s `interaction` choices.
INTERACTIONS = ("concat_diff_product", "outer_product")


@register
class LocalActivationUnit(Layer):
    """DIN's local activation unit: one relevance score per history item.

    `w_j = MLP(x_j)`, an MLP of `hidden_units` with the given activation (Dice by
    default) and a final linear unit, over the candidate `q` and the history item
    `k_j` (both of `dim`) combined by `interaction`:

    - "concat_diff_product" (the default; the DIN authors' code):
      `x_j = [q, k_j, q - k_j, q ⊙ k_j]`, `4 * dim` features.
    - "outer_product" (the paper's "out product", Figure 3): the elementwise product
      replaced by the flattened outer product, `x_j = [q, k_j, q - k_j,
      vec(q ⊗ k_j)]` with `vec(q ⊗ k_j)[a * dim + b] = q_a k_jb`: `3 * dim + dim²`
      features, every pair of coordinates (the elementwise product is its
      diagonal).

    The first layer's kernel `W` is applied as `q (W_q + W_d) + k_j (W_k - W_d) +
    p(q, k_j) W_p` (`p` the product term), the same value, so the query's part is
    computed once per example rather than once per history item. The outer product
    forms a `dim²` vector per (real) history item: cheap at DIN's embedding sizes
    (64 values at 8), large at wide ones.

    Zhou et al., "Deep Interest Network for Click-Through Rate Prediction", KDD 2018.

    Args:
        hidden_units: list of int. Sizes of the MLP's hidden layers. Defaults to
            (80, 40).
        activation: "dice" or any Keras activation. Defaults to "dice".
        interaction: str. How `q` and `k_j` are combined: "concat_diff_product" or
            "outer_product" (above). Defaults to "concat_diff_product".
        dropout: float. Dropout rate after each hidden layer. Defaults to 0.0.
        kernel_initializer: initializer of the MLP kernels. Defaults to
            "glorot_normal".
        bias_initializer: initializer of the MLP biases. Defaults to "zeros".

    Call arguments:
        query: `(batch, dim)`, the candidate item.
        keys: `(batch, history_len, dim)`, the behaviour history.
        mask: optional boolean `(batch, history_len)`, True at real items. With a
            mask only the real items go through the MLP (packed into rows, so a
            half-padded history costs half), Dice's batch statistics cover real
            items only, and padded positions score 0.
        training: bool, whether dropout is active and Dice uses batch statistics.

    Returns:
        Unnormalized scores `(batch, history_len)`.

    Example:

    >>> import numpy as np
    >>> unit = LocalActivationUnit(hidden_units=(16, 8))
    >>> unit(np.ones((2, 8), "float32"), np.ones((2, 5, 8), "float32")).shape
    TensorShape([2, 5])
    >>> unit = LocalActivationUnit(hidden_units=(16, 8), interaction="outer_product")
    >>> unit(np.ones((2, 8), "float32"), np.ones((2, 5, 8), "float32")).shape
    TensorShape([2, 5])
    >>> unit.kernels[0].shape  # 3 * 8 + 8 * 8 rows
    TensorShape([88, 16])
    """

    def __init__(
        self,
        hidden_units=(80, 40),
        activation="dice",
        dropout: float = 0.0,
        kernel_initializer="glorot_normal",
        bias_initializer="zeros",
        interaction: str = "concat_diff_product",
        **kwargs,
    ):
        super().__init__(**kwargs)
        units = check_positive_int_list("hidden_units", hidden_units)
        activation_fn = check_activation("activation", activation, extra=("dice",))
        check_rate("dropout", dropout)
        check_choice("interaction", interaction, INTERACTIONS)
        self.hidden_units = units
        self.activation = activation
        self.interaction = interaction
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        if activation == "dice":
            self.dice_layers = [
                Dice(dtype=self.dtype_policy, name=f"dice_{i}")
                for i in range(len(units))
            ]
            self._activation_fn = None
        else:
            self.dice_layers = []
            self._activation_fn = activation_fn
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="dropout_layer"
        )
        self.supports_masking = True  # consumes the history mask; returns none

    def build(self, query_shape, keys_shape):
        query_shape, keys_shape = static_shape(query_shape), static_shape(keys_shape)
        if (
            len(query_shape) != 2
            or len(keys_shape) != 3
            or query_shape[-1] is None
            or query_shape[-1] != keys_shape[-1]
        ):
            raise ValueError(
                "`query` must be (batch, dim) and `keys` (batch, history_len, dim) "
                f"with the same known dim. Received: query.shape={tuple(query_shape)}"
                f", keys.shape={tuple(keys_shape)}"
            )
        dim = query_shape[-1]
        self.kernels, self.biases = [], []
        fan_in = 4 * dim if self.interaction == "concat_diff_product" else 3 * dim
        if self.interaction == "outer_product":
            fan_in += dim * dim
        for i, units in enumerate(self.hidden_units):
            self.kernels.append(
                self.add_weight(
                    name=f"kernel_{i}",
                    shape=(fan_in, units),
                    initializer=clone_initializer(self.kernel_initializer),
                )
            )
            self.biases.append(
                self.add_weight(
                    name=f"bias_{i}",
                    shape=(units,),
                    initializer=clone_initializer(self.bias_initializer),
                )
            )
            if self.dice_layers:
                self.dice_layers[i].build((keys_shape[0], keys_shape[1], units))
            fan_in = units
        self.output_kernel = self.add_weight(
            name="output_kernel",
            shape=(fan_in, 1),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.output_bias = self.add_weight(
            name="output_bias",
            shape=(1,),
            initializer=clone_initializer(self.bias_initializer),
        )
        self.built = True

    def _dropout(self, hidden, training):
        # Dropout at rate 0 is the identity: skip the layer call altogether.
        if not self.dropout:
            return hidden
        return self.dropout_layer(hidden, training=training)

    def _activate(self, i, hidden, training):
        if self.dice_layers:
            return self.dice_layers[i](hidden, training=training)
        return self._activation_fn(hidden)

    def call(self, query, keys, mask=None, training=None):
        query, keys = self.cast_inputs(query, keys)
        query, keys = check_batch_sizes(query=query, keys=keys)
        mask = as_bool_mask(mask)
        check_mask_shape("mask", mask, static_shape(keys)[:-1], "keys")
        if mask is not None:
            scores, index, _ = self._packed_scores(query, keys, mask, training)
            # Padded positions score 0.
            return tf.scatter_nd(index, scores, tf.shape(mask, out_type=index.dtype))
        dtype = query.dtype
        w_q, w_k, w_d, w_p = self._first_kernel_parts(dtype, query.shape[-1])
        # [q, k, q - k, q * k] W  ==  q (W_q + W_d) + [k, q * k] [W_k - W_d; W_p]
        query_part = tf.matmul(query, w_q + w_d) + tf.cast(self.biases[0], dtype)
        # (2 * dim, units), or (dim + dim², units) for the outer product
        pair_kernel = tf.concat([w_k - w_d, w_p], axis=0)
        pairs = tf.concat([keys, self._pair(query[:, tf.newaxis, :], keys)], -1)
        hidden = tf.einsum("btd,du->btu", pairs, pair_kernel)
        hidden += query_part[:, tf.newaxis, :]
        units = self.hidden_units[0]
        scores = self._mlp(tf.reshape(hidden, [-1, units]), training)
        return tf.reshape(scores, tf.shape(keys)[:2])

    def _first_kernel_parts(self, dtype, dim):
        """The first kernel's rows `(W_q, W_k, W_d, W_p)`, those of `q`, `k`,
        `q - k` and the product term."""
        w = tf.cast(self.kernels[0], dtype)
        return w[:dim], w[dim : 2 * dim], w[2 * dim : 3 * dim], w[3 * dim :]

    def _packed_scores(self, query, keys, mask, training):
        """The scores of the real items only: `(scores (items,), index (items, 2),
        items (items, dim))`, `index` the (example, position) of each, row-major
        (`tf.where(mask)`).

        Only the real items go through the MLP, packed as rows: the padded part
        of a history costs nothing, and Dice's batch statistics cover real items
        only (as BatchNormalization's `mask`), so padding cannot shift them."""
        dtype = query.dtype
        w_q, w_k, w_d, w_p = self._first_kernel_parts(dtype, query.shape[-1])
        index = tf.where(mask)  # (items, 2): (example, position)
        items = tf.gather_nd(keys, index)  # (items, dim)
        rows = index[:, 0]
        # The candidate of each item. In training its gradient sums each
        # example's items with the sorted segment sum (`tf.gather`'s adds them
        # one by one); inference keeps the plain gather, whose graph an export
        # can fold and save without a custom gradient.
        if training is True:
            candidates = _gather_rows(query, rows)  # (items, dim)
        else:
            candidates = tf.gather(query, rows)
        # [q, k, q - k, q * k] W + b  ==  [k, q * k, q, 1] [W_k - W_d; W_p;
        # W_q + W_d; b]: one matmul, and the candidate enters at its width (dim),
        # not at the first layer's (one gather of `units` values per item cost a
        # tenth of bench_din's step, most of it in its gradient). The bias rides
        # in the matmul: a matmul + bias add is fused into a oneDNN primitive
        # made anew for each number of items, ~0.4 ms a step on bench_din.
        bias = tf.cast(self.biases[0], dtype)[tf.newaxis, :]
        kernel = tf.concat([w_k - w_d, w_p, w_q + w_d, bias], axis=0)
        ones = tf.ones_like(items[:, :1])
        pairs = tf.concat([items, self._pair(candidates, items), candidates, ones], -1)
        return self._mlp(tf.matmul(pairs, kernel), training), index, items

    def _pair(self, query, keys):
        """`q ⊙ k`, or `vec(q ⊗ k)` (`[..., a * dim + b] = q_a k_b`), on the last
        axis; `query` broadcasts against `keys`."""
        if self.interaction == "concat_diff_product":
            return query * keys
        outer = query[..., :, tf.newaxis] * keys[..., tf.newaxis, :]
        shape = tf.concat([tf.shape(outer)[:-2], [keys.shape[-1] ** 2]], axis=0)
        return tf.reshape(outer, shape)

    def _mlp(self, hidden, training):
        """(rows, hidden_units[0]) pre-activations -> (rows,) scores."""
        dtype = hidden.dtype
        hidden = self._dropout(self._activate(0, hidden, training), training)
        for i in range(1, len(self.hidden_units)):
            hidden = tf.matmul(hidden, tf.cast(self.kernels[i], dtype))
            hidden += tf.cast(self.biases[i], dtype)
            hidden = self._dropout(self._activate(i, hidden, training), training)
        scores = tf.matmul(hidden, tf.cast(self.output_kernel, dtype))
        return scores[:, 0] + tf.cast(self.output_bias[0], dtype)

    def compute_mask(self, query, keys=None, mask=None):
        return None

    def compute_output_shape(self, query_shape, keys_shape):
        keys_shape = static_shape(keys_shape)
        return (keys_shape[0], keys_shape[1])

    def get_config(self):
        config = {
            "hidden_units": list(self.hidden_units),
            "activation": self.activation
            if isinstance(self.activation, str)
            else keras.activations.serialize(self.activation),
            "dropout": self.dropout,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "interaction": self.interaction,
        }
        return {**super().get_config(), **config}


@register
class AttentionSequencePooling(Layer):
    """DIN's attention pooling of a behaviour history against the candidate item.

    `v = Σ_j w_j k_j`, with `w_j` from a `LocalActivationUnit` over the candidate
    `q` and the history item `k_j`. With `weight_normalization=False` (the paper) the
    raw scores are the weights and padded items get 0; with `True` the weights are a
    masked softmax. An empty history pools to a zero vector, never NaN. With a mask,
    padded items are not computed at all and do not enter Dice's batch statistics
    (DeepCTR computes and normalizes over them), so in training too the output does
    not depend on what the padding holds.

    Zhou et al., "Deep Interest Network for Click-Through Rate Prediction", KDD 2018.

    Args:
        hidden_units: list of int. The activation unit's hidden sizes. Defaults to
            (80, 40).
        activation: "dice" or any Keras activation. Defaults to "dice".
        weight_normalization: bool. Softmax over the history instead of raw scores.
            Defaults to False.
        dropout: float. Dropout rate inside the activation unit. Defaults to 0.0.
        kernel_initializer: initializer of the unit's kernels. Defaults to
            "glorot_normal".
        bias_initializer: initializer of the unit's biases. Defaults to "zeros".
        interaction: str. How the unit combines the candidate and an item:
            "concat_diff_product" or "outer_product" (see `LocalActivationUnit`).
            Defaults to "concat_diff_product".

    Call arguments:
        query: `(batch, dim)`, the candidate item.
        keys: `(batch, history_len, dim)`, the behaviour history.
        mask: optional boolean `(batch, history_len)`, True at real items. Defaults to
            the mask carried by `keys` (e.g. from `Embedding(mask_zero=True)`).
        training: bool, whether dropout is active and Dice uses batch statistics.
        return_attention_scores: bool. Also return the weights. Defaults to False.

    Returns:
        `(batch, dim)`, and the weights `(batch, history_len)` when
        `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> pooling = AttentionSequencePooling(hidden_units=(16, 8))
    >>> history = np.ones((2, 5, 8), "float32")
    >>> mask = np.array([[True] * 3 + [False] * 2, [False] * 5])
    >>> pooling(np.ones((2, 8), "float32"), history, mask=mask).shape
    TensorShape([2, 8])
    """

    def __init__(
        self,
        hidden_units=(80, 40),
        activation="dice",
        weight_normalization: bool = False,
        dropout: float = 0.0,
        kernel_initializer="glorot_normal",
        bias_initializer="zeros",
        interaction: str = "concat_diff_product",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.weight_normalization = check_bool(
            "weight_normalization", weight_normalization
        )
        self.supports_masking = True  # consumes the history mask; returns none
        self.local_activation_unit = LocalActivationUnit(
            hidden_units=hidden_units,
            activation=activation,
            dropout=dropout,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            interaction=interaction,
            dtype=self.dtype_policy,
            name="local_activation_unit",
        )

    def build(self, query_shape, keys_shape):
        self.local_activation_unit.build(query_shape, keys_shape)
        self.built = True

    def call(
        self,
        query,
        keys,
        mask=None,
        training=None,
        return_attention_scores=False,
    ):
        if mask is None:
            mask = getattr(keys, "_keras_mask", None)
        query, keys = self.cast_inputs(query, keys)
        mask = as_bool_mask(mask)
        check_mask_shape("mask", mask, static_shape(keys)[:-1], "keys")
        if mask is not None and not self.weight_normalization:
            # Raw scores: the weighted sum runs over the real items as the unit
            # scored them, packed; the padded positions weigh 0.
            unit = self.local_activation_unit
            query, keys = check_batch_sizes(query=query, keys=keys)
            scores, index, items = unit._packed_scores(query, keys, mask, training)
            output = _sum_rows(
                scores[:, tf.newaxis] * items,
                index[:, 0],
                tf.shape(keys, out_type=tf.int32)[0],
            )
            if return_attention_scores:
                weights = tf.scatter_nd(
                    index, scores, tf.shape(mask, out_type=index.dtype)
                )
                return output, weights
            return output
        scores = self.local_activation_unit(query, keys, mask=mask, training=training)
        if self.weight_normalization:
            weights = masked_softmax(scores, mask)
        elif mask is not None:
            weights = tf.where(mask, scores, tf.zeros([], scores.dtype))
        else:
            weights = scores
        output = tf.einsum("bt,btd->bd", weights, keys)
        if return_attention_scores:
            return output, weights
        return output

    def compute_mask(self, query, keys=None, mask=None):
        return None

    def compute_output_shape(self, query_shape, keys_shape):
        return tuple(static_shape(query_shape))

    def get_config(self):
        unit = self.local_activation_unit.get_config()
        config = {
            "hidden_units": unit["hidden_units"],
            "activation": unit["activation"],
            "weight_normalization": self.weight_normalization,
            "dropout": unit["dropout"],
            "kernel_initializer": unit["kernel_initializer"],
            "bias_initializer": unit["bias_initializer"],
            "interaction": unit["interaction"],
        }
        return {**super().get_config(), **config}


__all__ = ["AttentionSequencePooling", "Dice", "LocalActivationUnit"]
