"""Multi-task mixtures of experts: MMoE, and PLE (progressive CGC levels)."""

from __future__ import annotations

import json
import math

from keras_attn._validation import (
    check_activation,
    check_choice,
    check_positive_int,
    check_positive_int_list,
    check_rate,
    static_shape,
)
from keras_attn.backend import Layer, clone_initializer, keras, register, tf
from keras_attn.layers.scores import SCORES, AttentionScore

GATES = ("softmax", "attention")


def _check_tasks(tasks):
    if (
        isinstance(tasks, (str, bytes))
        or not isinstance(tasks, (list, tuple))
        or not tasks
        or not all(isinstance(t, str) and t for t in tasks)
        or len(set(tasks)) != len(tasks)
    ):
        raise ValueError(
            "`tasks` must be a non-empty list of distinct task names (strings). "
            f"Received: tasks={tasks!r}"
        )
    return list(tasks)


def _stacked_initializer(initializer, leading: int):
    """Initializes `(*lead, fan_in, fan_out)` as `leading` independent matrices, each
    with the fans of one expert's own kernel (not of the stacked tensor)."""

    def init(shape, dtype=None, **kwargs):
        shape = list(shape)
        mats = [
            clone_initializer(initializer)(shape[-2:], dtype=dtype)
            for _ in range(leading)
        ]
        return tf.reshape(tf.stack(mats), shape)

    return init


# Gate scores linear in the key, whose task contexts fold into the key projection.
_LINEAR_SCORES = ("dot", "scaled_dot", "general")
# Largest first-layer expert kernel (values) that runs as one fused matmul.
_FUSED_FIRST_LAYER = 2**19


def _softmax(logits, axis=-1):
    # float16 logits overflow exp() far sooner than float32.
    return tf.cast(tf.nn.softmax(tf.cast(logits, tf.float32), axis=axis), logits.dtype)


class _ExpertsMixin:
    """Weights and arithmetic shared by MMoE and PLE."""

    def _init_common(
        self,
        tasks,
        expert_units,
        gate,
        gate_score,
        gate_units,
        expert_activation,
        dropout,
        kernel_initializer,
        bias_initializer,
        kernel_regularizer,
    ):
        self.tasks = _check_tasks(tasks)
        self.expert_units = check_positive_int_list("expert_units", expert_units)
        check_choice("gate", gate, GATES)
        check_choice("gate_score", gate_score, SCORES)
        check_positive_int("gate_units", gate_units, allow_none=True)
        check_rate("dropout", dropout)
        self._activation_fn = check_activation("expert_activation", expert_activation)
        self.gate = gate
        self.gate_score = gate_score
        self.gate_units = gate_units
        self.expert_activation = expert_activation
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="dropout_layer"
        )

    def _add_kernel(self, name, shape):
        leading = math.prod(shape[:-2]) if len(shape) > 2 else 1
        initializer = (
            _stacked_initializer(self.kernel_initializer, leading)
            if len(shape) > 2
            else clone_initializer(self.kernel_initializer)
        )
        return self.add_weight(
            name=name,
            shape=tuple(shape),
            initializer=initializer,
            regularizer=self.kernel_regularizer,
        )

    def _add_bias(self, name, shape):
        return self.add_weight(
            name=name,
            shape=tuple(shape),
            initializer=clone_initializer(self.bias_initializer),
        )

    def _build_dense_experts(self, prefix, lead, dim):
        """Kernels `(*lead, in, units)` and biases `(*lead, units)` of a stack of
        dense experts, one tensor per depth, all experts computed at once."""
        layers = []
        for depth, units in enumerate(self.expert_units):
            kernel = self._add_kernel(f"{prefix}_kernel_{depth}", (*lead, dim, units))
            bias = self._add_bias(f"{prefix}_bias_{depth}", (*lead, units))
            layers.append((kernel, bias))
            dim = units
        return layers

    def _dropout(self, x, training):
        # Dropout at rate 0 is the identity: skip the layer call altogether.
        if not self.dropout:
            return x
        return self.dropout_layer(x, training=training)

    def _dense_experts(self, x, layers, first_eq, deep_eq, training):
        for depth, (kernel, bias) in enumerate(layers):
            x = tf.einsum(first_eq if depth == 0 else deep_eq, x, kernel) + bias
            x = self._dropout(self._activation_fn(x), training)
        return x

    def _build_scorer(self, name, query_shape, key_shape):
        scorer = AttentionScore(
            score=self.gate_score,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name=name,
        )
        scorer.build(query_shape, key_shape)
        return scorer

    def _attention_gate(self, scorer, context, key_kernel, experts):
        """Weights `(..., n)` over experts `(..., n, units)` for a learned `context`
        query `(..., a)`: softmax(score(context, experts W_k))."""
        keys = tf.einsum("...nu,ua->...na", experts, key_kernel)
        query = tf.broadcast_to(
            context[..., tf.newaxis, :],
            tf.concat([tf.shape(keys)[:-2], [1, tf.shape(context)[-1]]], axis=0),
        )
        scores = scorer(query, keys)[..., 0, :]  # (..., n)
        return _softmax(scores)

    def _common_config(self):
        return {
            "tasks": list(self.tasks),
            "expert_units": list(self.expert_units),
            "gate": self.gate,
            "gate_score": self.gate_score,
            "gate_units": self.gate_units,
            "expert_activation": self.expert_activation
            if isinstance(self.expert_activation, str)
            else keras.activations.serialize(self.expert_activation),
            "dropout": self.dropout,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer)
            if self.kernel_regularizer
            else None,
        }


def _check_input_shape(input_shape):
    input_shape = static_shape(input_shape)
    if len(input_shape) != 2 or input_shape[-1] is None:
        raise ValueError(
            "`inputs` must have shape (batch, dim) with a known dim. "
            f"Received: inputs.shape={tuple(input_shape)}"
        )
    return input_shape


@register
class MMoE(_ExpertsMixin, Layer):
    """Multi-gate Mixture-of-Experts: shared experts, one gate per task.

    `f_t(x) = Σ_i g_t(x)_i e_i(x)` for each task `t`, over experts `e_i`. Gates:

    - `gate="softmax"` (the paper): `g_t(x) = softmax(W_t x)`.
    - `gate="attention"`: a context-query attention gate. Each task has a learned
      context vector `c_t` as the query; the expert outputs, projected by `W_k`, are
      the keys and (unprojected) the values:
      `g_t = softmax_i(score(c_t, W_k e_i(x)))`, with `score` any `AttentionScore`.

    Dense experts are `len(expert_units)` layers, each depth's kernels stacked in
    one variable. The first layer runs as one fused `(batch, dim) x (dim, experts *
    units)` matmul while its kernels are small, and as one matmul per expert when
    they are larger; deeper layers run one matmul per expert (the sizes where each
    measured faster are in `benchmarks/RESULTS.md`, bench_mmoe_experts). Any Keras
    layer may be given as `expert` instead: it is cloned from its config, once per
    expert.

    Ma et al., "Modeling Task Relationships in Multi-task Learning with Multi-gate
    Mixture-of-Experts", KDD 2018.

    Args:
        tasks: list of str. Task names; the outputs are keyed by them.
        num_experts: int. Number of experts.
        expert_units: list of int. Hidden sizes of each dense expert. Defaults to
            (64,).
        gate: str. "softmax" or "attention". Defaults to "softmax".
        gate_score: str. The `AttentionScore` of the "attention" gate: "dot",
            "scaled_dot", "general", "additive", "cosine" or "location". Defaults to
            "dot": with only a few experts to weigh, the unscaled score lets gates
            sharpen sooner, and on census-income it beat "scaled_dot" and the
            softmax gate (benchmarks/RESULTS.md, bench_ctr_gate_score).
        expert: optional Keras layer (or its serialized config) mapping
            `(batch, dim)` to `(batch, units)`; replaces the dense experts.
        dropout: float. Dropout rate after each dense expert layer. Defaults to 0.0.
        gate_units: int. Size of the attention gate's keys and contexts. Defaults to
            the experts' output size.
        expert_activation: activation of the dense experts. Defaults to "relu".
        kernel_initializer: initializer of experts, gates, contexts. Defaults to
            "glorot_uniform".
        bias_initializer: initializer of the experts' biases. Defaults to "zeros".
        kernel_regularizer: optional regularizer of the expert and gate kernels.

    Call arguments:
        inputs: `(batch, dim)`.
        training: bool, whether dropout is active.
        return_gate_weights: bool. Also return each task's weights over experts.
            Defaults to False.

    Returns:
        `{task: (batch, units)}` (`units` the experts' output size), and with
        `return_gate_weights=True` the tuple
        `(outputs, {task: (batch, num_experts)})`.

    Example:

    >>> import numpy as np
    >>> layer = MMoE(tasks=["income", "marital"], num_experts=4, expert_units=(8,),
    ...              gate="attention")
    >>> outputs, gates = layer(np.ones((2, 16), "float32"), return_gate_weights=True)
    >>> outputs["income"].shape, gates["marital"].shape
    (TensorShape([2, 8]), TensorShape([2, 4]))
    """

    def __init__(
        self,
        tasks: list[str],
        num_experts: int,
        expert_units=(64,),
        gate: str = "softmax",
        gate_score: str = "dot",
        expert=None,
        dropout: float = 0.0,
        gate_units: int | None = None,
        expert_activation="relu",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_experts", num_experts)
        self._init_common(
            tasks,
            expert_units,
            gate,
            gate_score,
            gate_units,
            expert_activation,
            dropout,
            kernel_initializer,
            bias_initializer,
            kernel_regularizer,
        )
        self.num_experts = num_experts
        self._expert_json = None
        self.experts = []
        if expert is not None:
            if isinstance(expert, dict):
                expert = keras.layers.deserialize(expert)
            if not isinstance(expert, keras.layers.Layer):
                raise ValueError(
                    "`expert` must be a Keras layer or its serialized config. "
                    f"Received: expert={expert!r}"
                )
            config = keras.layers.serialize(expert)
            self._expert_json = json.dumps(config)
            for i in range(num_experts):
                clone = json.loads(self._expert_json)
                clone["config"]["name"] = f"expert_{i}"
                clone["config"]["dtype"] = self.dtype_policy.name
                self.experts.append(keras.layers.deserialize(clone))

    def build(self, input_shape):
        input_shape = _check_input_shape(input_shape)
        dim, tasks, experts = input_shape[-1], len(self.tasks), self.num_experts
        if self.experts:
            for expert in self.experts:
                expert.build(tuple(input_shape))
            out_shape = static_shape(
                self.experts[0].compute_output_shape(tuple(input_shape))
            )
            if len(out_shape) != 2 or out_shape[-1] is None:
                raise ValueError(
                    "`expert` must map (batch, dim) to (batch, units). Received an "
                    f"expert with output shape {tuple(out_shape)}"
                )
            self._units = out_shape[-1]
            self.expert_layers = []
        else:
            self.expert_layers = self._build_dense_experts("expert", (experts,), dim)
            self._units = self.expert_units[-1]
        if self.gate == "softmax":
            self.gate_kernels = [
                self._add_kernel(f"gate_kernel_{t}", (dim, experts))
                for t in range(tasks)
            ]
        else:
            att = self.gate_units or self._units
            self.gate_context = self._add_kernel("gate_context", (tasks, att))
            self.gate_key_kernel = self._add_kernel(
                "gate_key_kernel", (self._units, att)
            )
            self.gate_scorer = self._build_scorer(
                "gate_scorer", (None, tasks, att), (None, experts, att)
            )
        self.built = True

    def call(self, inputs, training=None, return_gate_weights=False):
        inputs = self.cast_inputs(inputs)
        if self.experts:
            expert_out = tf.stack(
                [e(inputs, training=training) for e in self.experts], axis=1
            )
        else:
            expert_out = self._separate_experts(inputs, training)
        expert_out = tf.cast(expert_out, inputs.dtype)  # (batch, experts, units)
        tasks = len(self.tasks)
        # The gates as (batch, tasks, experts), or for the folded scores as
        # (batch, experts, tasks): each is mixed by one batched matmul, with no
        # transpose between them.
        by_expert = False
        if self.gate == "softmax":
            kernel = tf.concat([tf.cast(k, inputs.dtype) for k in self.gate_kernels], 1)
            logits = tf.reshape(
                tf.matmul(inputs, kernel), [-1, tasks, self.num_experts]
            )
            gates = _softmax(logits)  # (batch, tasks, experts)
        elif self.gate_score in _LINEAR_SCORES:
            by_expert = True
            gates = _softmax(self._folded_scores(expert_out), axis=1)
        else:
            keys = tf.einsum(
                "beu,ua->bea", expert_out, tf.cast(self.gate_key_kernel, inputs.dtype)
            )
            context = tf.cast(self.gate_context, inputs.dtype)  # (tasks, att)
            query = tf.broadcast_to(
                context[tf.newaxis],
                tf.concat([tf.shape(inputs)[:1], tf.shape(context)], axis=0),
            )
            gates = _softmax(self.gate_scorer(query, keys))  # (batch, tasks, experts)
        # (batch, tasks, units). A batched matmul and an unstack: the einsum and
        # per-task slices they replace cost 15% of the layer's training step
        # (census sizes, forward and backward), for the same values.
        mixed = tf.matmul(gates, expert_out, transpose_a=by_expert)
        outputs = dict(zip(self.tasks, tf.unstack(mixed, num=tasks, axis=1)))
        if return_gate_weights:
            weights = tf.unstack(gates, num=tasks, axis=2 if by_expert else 1)
            return outputs, dict(zip(self.tasks, weights))
        return outputs

    def _folded_scores(self, expert_out):
        """Gate scores `(batch, experts, tasks)` for the scores linear in the key.

        The query (each task's context) does not depend on the example, and
        `score(c_t, W_k e) = (W_k q_t) · e` with `q_t = c_t` ("dot"),
        `c_t / sqrt(att)` ("scaled_dot") or `c_t W` ("general"): the contexts fold
        into one `(units, tasks)` matrix, and the keys `(batch, experts, att)` are
        never formed. One `(batch * experts, units) x (units, tasks)` matmul instead
        of two batched ones: the same function, computed in fewer operations.
        """
        dtype = expert_out.dtype
        query = tf.cast(self.gate_context, dtype)  # (tasks, att)
        if self.gate_score == "general":
            query = tf.matmul(query, tf.cast(self.gate_scorer.kernel, dtype))
        elif self.gate_score == "scaled_dot":
            query = query * (1.0 / math.sqrt(self.gate_context.shape[-1]))
        key_kernel = tf.cast(self.gate_key_kernel, dtype)  # (units, att)
        folded = tf.matmul(key_kernel, query, transpose_b=True)  # (units, tasks)
        scores = tf.matmul(tf.reshape(expert_out, [-1, self._units]), folded)
        return tf.reshape(scores, [-1, self.num_experts, len(self.tasks)])

    def _separate_experts(self, inputs, training):
        """(batch, experts, units). Each depth's weights are one stacked variable.

        The first layer reads the same input for every expert. While its kernels
        are small (`dim * experts * units` up to `_FUSED_FIRST_LAYER` values) they run
        as one `(batch, dim) x (dim, experts * units)` matmul: at census-MMoE sizes
        (319 x 8 x 64) that measured 1.1x (graph) to 1.25x (XLA) faster than one
        matmul per expert, and at 624 x 8 x 256 1.2-1.3x slower
        (benchmarks/bench_mmoe_experts.py). Larger kernels, and the deeper layers
        (one input per expert), run one matmul per expert, which on CPU measured
        faster than one batched einsum.
        """
        layers = self.expert_layers
        kernel, bias = layers[0]
        if math.prod(kernel.shape) > _FUSED_FIRST_LAYER:
            hidden = [inputs] * self.num_experts
        else:
            dim, units = kernel.shape[1], kernel.shape[2]
            # (experts, dim, units) -> (dim, experts * units), expert-major columns.
            fused = tf.reshape(
                tf.transpose(tf.cast(kernel, inputs.dtype), [1, 0, 2]),
                [dim, self.num_experts * units],
            )
            out = tf.reshape(
                tf.matmul(inputs, fused), [-1, self.num_experts, units]
            ) + tf.cast(bias, inputs.dtype)
            out = self._dropout(self._activation_fn(out), training)
            if len(layers) == 1:
                return out
            hidden = tf.unstack(out, num=self.num_experts, axis=1)
            layers = layers[1:]
        for kernel, bias in layers:
            kernels = tf.unstack(tf.cast(kernel, inputs.dtype), num=self.num_experts)
            biases = tf.unstack(tf.cast(bias, inputs.dtype), num=self.num_experts)
            hidden = [
                self._dropout(self._activation_fn(tf.matmul(h, k) + b), training)
                for h, k, b in zip(hidden, kernels, biases)
            ]
        return tf.stack(hidden, axis=1)

    def get_config(self):
        config = {
            "num_experts": self.num_experts,
            "expert": None
            if self._expert_json is None
            else json.loads(self._expert_json),
            **self._common_config(),
        }
        return {**super().get_config(), **config}


@register
class PLE(_ExpertsMixin, Layer):
    """Progressive Layered Extraction: task-specific and shared experts, in levels.

    Each level is a Customized Gate Control (CGC) block: every task has its own
    experts and the level has shared ones. Task `t`'s gate mixes its own and the
    shared experts, from task `t`'s input; a shared gate mixes every expert of the
    level, from the shared input; the next level takes these mixtures as its task
    and shared inputs (the first level takes `inputs` for all). The last level has no
    shared gate. `num_levels=1` is CGC. Gates are those of `MMoE`: "softmax"
    (`softmax(W x)`) or "attention" (a learned context per gate as the query over the
    projected expert outputs).

    Tang et al., "Progressive Layered Extraction (PLE): A Novel Multi-Task Learning
    (MTL) Model for Personalized Recommendations", RecSys 2020.

    Args:
        tasks: list of str. Task names; the outputs are keyed by them.
        num_shared_experts: int. Shared experts per level. Defaults to 2.
        num_task_experts: int. Experts of each task per level. Defaults to 2.
        num_levels: int. Number of CGC levels. Defaults to 2.
        expert_units: list of int. Hidden sizes of each dense expert. Defaults to
            (64,).
        gate: str. "softmax" or "attention". Defaults to "softmax".
        gate_score: str. The `AttentionScore` of the "attention" gates. Defaults to
            "dot", as for `MMoE`.
        dropout: float. Dropout rate after each expert layer. Defaults to 0.0.
        gate_units: int. Size of the attention gates' keys and contexts. Defaults to
            the experts' output size.
        expert_activation: activation of the experts. Defaults to "relu".
        kernel_initializer: initializer of experts, gates, contexts. Defaults to
            "glorot_uniform".
        bias_initializer: initializer of the experts' biases. Defaults to "zeros".
        kernel_regularizer: optional regularizer of the expert and gate kernels.

    Call arguments:
        inputs: `(batch, dim)`.
        training: bool, whether dropout is active.
        return_gate_weights: bool. Also return each task's last-level gate weights,
            over its own experts then the shared ones. Defaults to False.

    Returns:
        `{task: (batch, expert_units[-1])}`, and with `return_gate_weights=True` the
        tuple `(outputs, {task: (batch, num_task_experts + num_shared_experts)})`.

    Example:

    >>> import numpy as np
    >>> layer = PLE(tasks=["ctr", "cvr"], expert_units=(8,))
    >>> outputs, gates = layer(np.ones((2, 16), "float32"), return_gate_weights=True)
    >>> outputs["cvr"].shape, gates["ctr"].shape
    (TensorShape([2, 8]), TensorShape([2, 4]))
    """

    def __init__(
        self,
        tasks: list[str],
        num_shared_experts: int = 2,
        num_task_experts: int = 2,
        num_levels: int = 2,
        expert_units=(64,),
        gate: str = "softmax",
        gate_score: str = "dot",
        dropout: float = 0.0,
        gate_units: int | None = None,
        expert_activation="relu",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_shared_experts", num_shared_experts)
        check_positive_int("num_task_experts", num_task_experts)
        check_positive_int("num_levels", num_levels)
        self._init_common(
            tasks,
            expert_units,
            gate,
            gate_score,
            gate_units,
            expert_activation,
            dropout,
            kernel_initializer,
            bias_initializer,
            kernel_regularizer,
        )
        self.num_shared_experts = num_shared_experts
        self.num_task_experts = num_task_experts
        self.num_levels = num_levels

    def build(self, input_shape):
        input_shape = _check_input_shape(input_shape)
        dim, tasks = input_shape[-1], len(self.tasks)
        m_t, m_s = self.num_task_experts, self.num_shared_experts
        units = self.expert_units[-1]
        att = self.gate_units or units
        self.levels = []
        self.task_gate_scorers, self.shared_gate_scorers = [], []
        for level in range(self.num_levels):
            last = level == self.num_levels - 1
            weights = {
                "task": self._build_dense_experts(
                    f"level_{level}_task", (tasks, m_t), dim
                ),
                "shared": self._build_dense_experts(
                    f"level_{level}_shared", (m_s,), dim
                ),
            }
            if self.gate == "softmax":
                weights["task_gate"] = self._add_kernel(
                    f"level_{level}_task_gate_kernel", (tasks, dim, m_t + m_s)
                )
                if not last:
                    weights["shared_gate"] = self._add_kernel(
                        f"level_{level}_shared_gate_kernel", (dim, tasks * m_t + m_s)
                    )
            else:
                weights["key_kernel"] = self._add_kernel(
                    f"level_{level}_gate_key_kernel", (units, att)
                )
                weights["task_context"] = self._add_kernel(
                    f"level_{level}_task_gate_context", (tasks, att)
                )
                self.task_gate_scorers.append(
                    self._build_scorer(
                        f"level_{level}_task_gate_scorer",
                        (None, tasks, 1, att),
                        (None, tasks, m_t + m_s, att),
                    )
                )
                if not last:
                    weights["shared_context"] = self._add_kernel(
                        f"level_{level}_shared_gate_context", (1, att)
                    )
                    self.shared_gate_scorers.append(
                        self._build_scorer(
                            f"level_{level}_shared_gate_scorer",
                            (None, 1, att),
                            (None, tasks * m_t + m_s, att),
                        )
                    )
            self.levels.append(weights)
            dim = units
        self.built = True

    def _gate(self, level, kind, gate_input, candidates, dtype):
        """Weights over `candidates` `(batch, [tasks,] n, units)`."""
        weights = self.levels[level]
        if self.gate == "softmax":
            kernel = tf.cast(weights[f"{kind}_gate"], dtype)
            eq = "btd,tde->bte" if kind == "task" else "bd,de->be"
            return _softmax(tf.einsum(eq, gate_input, kernel))
        context = tf.cast(weights[f"{kind}_context"], dtype)
        if kind == "shared":
            context = context[0]
        lead = tf.shape(candidates)[:-2]
        context = tf.broadcast_to(
            context, tf.concat([lead, tf.shape(context)[-1:]], axis=0)
        )
        return self._attention_gate(
            (self.task_gate_scorers if kind == "task" else self.shared_gate_scorers)[
                level
            ],
            context,
            tf.cast(weights["key_kernel"], dtype),
            candidates,
        )

    def call(self, inputs, training=None, return_gate_weights=False):
        inputs = self.cast_inputs(inputs)
        dtype, tasks = inputs.dtype, len(self.tasks)
        units = self.expert_units[-1]
        batch = tf.shape(inputs)[0]
        # (batch, tasks, dim) and (batch, dim): every branch starts from `inputs`.
        task_in = tf.broadcast_to(
            inputs[:, tf.newaxis], tf.stack([batch, tasks, tf.shape(inputs)[-1]])
        )
        shared_in = inputs
        for level, weights in enumerate(self.levels):
            last = level == self.num_levels - 1
            # (batch, tasks, task_experts, units)
            task_experts = self._dense_experts(
                task_in, weights["task"], "btd,tmdu->btmu", "btmd,tmdu->btmu", training
            )
            # (batch, shared_experts, units)
            shared_experts = self._dense_experts(
                shared_in, weights["shared"], "bd,mdu->bmu", "bmd,mdu->bmu", training
            )
            # Task t's candidates: its own experts, then the shared ones.
            shared_b = tf.broadcast_to(
                shared_experts[:, tf.newaxis],
                tf.stack([batch, tasks, self.num_shared_experts, units]),
            )
            candidates = tf.concat([task_experts, shared_b], axis=2)
            task_gates = self._gate(level, "task", task_in, candidates, dtype)
            next_task = tf.einsum("bte,bteu->btu", task_gates, candidates)
            if not last:
                all_experts = tf.concat(
                    [
                        tf.reshape(
                            task_experts,
                            tf.stack([batch, tasks * self.num_task_experts, units]),
                        ),
                        shared_experts,
                    ],
                    axis=1,
                )
                shared_gates = self._gate(
                    level, "shared", shared_in, all_experts, dtype
                )
                shared_in = tf.einsum("be,beu->bu", shared_gates, all_experts)
            task_in = next_task
        outputs = {task: task_in[:, t] for t, task in enumerate(self.tasks)}
        if return_gate_weights:
            gates = {task: task_gates[:, t] for t, task in enumerate(self.tasks)}
            return outputs, gates
        return outputs

    def get_config(self):
        config = {
            "num_shared_experts": self.num_shared_experts,
            "num_task_experts": self.num_task_experts,
            "num_levels": self.num_levels,
            **self._common_config(),
        }
        return {**super().get_config(), **config}


__all__ = ["GATES", "PLE", "MMoE"]
