"""Optimizers: `FusedAdam` and `FusedAdamW`, Keras' Adam and AdamW with each
variable's update as one fused TensorFlow kernel, and `LinearWarmUpDecay`, the
fine-tuning schedule.

Keras 3's AdamW writes the update of every variable as about ten element-wise ops
(two moment updates, the bias correction, a square root, a division, three
assignments). For a model of a hundred variables that is thousands of ops to trace
(measured on the all-MiniLM-L6-v2 classifier, 105 variables: the training step's
graph grows from 3,355 to 8,002 ops and its tracing from 4 s to 33 s) and ten passes
over the weights at every step. `FusedAdamW` gives each variable one
`ResourceApplyAdam` kernel (the update TensorFlow's own optimizers use, one pass
over the weights) and keeps Keras' decoupled weight decay; `FusedAdam` is the same
without weight decay (the default optimizer of the CTR fits). Under tf_keras
(Keras 2) they are tf_keras' AdamW and Adam, whose updates are compiled by XLA
(`jit_compile=True`, their default).
"""

from __future__ import annotations

from keras_attn._validation import check_finite, check_int
from keras_attn.backend import KERAS_3, keras, register, tf

__all__ = ["FusedAdam", "FusedAdamW", "LinearWarmUpDecay"]


class _FusedUpdate:
    """Keras 3's Adam update of one variable as one `ResourceApplyAdam`."""

    if KERAS_3:

        def _backend_update_step(self, grads, trainable_variables, learning_rate):
            # Without a distribution strategy, the step's scalars (βᵗ, the rate)
            # are computed once per dtype for all the variables, not once per
            # variable: a dozen ops fewer per variable in every training step.
            # A strategy's updates run per device (and per replica thread), so
            # there each variable keeps its own.
            self._step_scalars = None if tf.distribute.has_strategy() else {}
            try:
                return super()._backend_update_step(
                    grads, trainable_variables, learning_rate
                )
            finally:
                self._step_scalars = None

        def _scalars(self, dtype, learning_rate):
            """`(β₁ᵗ, β₂ᵗ, lr, β₁, β₂, ε)` in `dtype` for this step."""
            shared = getattr(self, "_step_scalars", None)
            if shared is not None and dtype in shared:
                return shared[dtype]
            step = tf.cast(self.iterations + 1, dtype)
            beta_1 = tf.cast(self.beta_1, dtype)
            beta_2 = tf.cast(self.beta_2, dtype)
            scalars = (
                tf.pow(beta_1, step),
                tf.pow(beta_2, step),
                tf.cast(learning_rate, dtype),
                beta_1,
                beta_2,
                tf.cast(self.epsilon, dtype),
            )
            if shared is not None:
                shared[dtype] = scalars
            return scalars

        def update_step(self, gradient, variable, learning_rate):
            if self.amsgrad:
                return super().update_step(gradient, variable, learning_rate)
            dtype = variable.dtype
            index = self._get_variable_index(variable)
            beta1_power, beta2_power, lr, beta_1, beta_2, epsilon = self._scalars(
                dtype, learning_rate
            )
            # An embedding's gradient comes as IndexedSlices: the update is dense
            # (as Keras' own, which converts it the same way).
            gradient = tf.convert_to_tensor(gradient)
            tf.raw_ops.ResourceApplyAdam(
                var=variable.handle,
                m=self._momentums[index].handle,
                v=self._velocities[index].handle,
                beta1_power=beta1_power,
                beta2_power=beta2_power,
                lr=lr,
                beta1=beta_1,
                beta2=beta_2,
                epsilon=epsilon,
                grad=tf.cast(gradient, dtype),
            )


@register
class FusedAdamW(_FusedUpdate, keras.optimizers.AdamW):
    """AdamW (Loshchilov & Hutter, ICLR 2019) with one fused kernel per variable.

    The same arguments, update and weight decay as `keras.optimizers.AdamW`
    (`m ← β₁m + (1-β₁)g`, `v ← β₂v + (1-β₂)g²`,
    `w ← w - lr·√(1-β₂ᵗ)/(1-β₁ᵗ)·m/(√v + ε)`, and `w ← w - lr·λ·w` before it);
    each variable's update is TensorFlow's `ResourceApplyAdam`. `amsgrad=True`
    uses Keras' own update.

    Example:

    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> model.compile(FusedAdamW(1e-3), "mse")
    >>> model.fit(np.ones((4, 3)), np.zeros((4, 2)), verbose=0).history["loss"][0] > 0
    True
    """


@register
class FusedAdam(_FusedUpdate, keras.optimizers.Adam):
    """Adam (Kingma & Ba, ICLR 2015) with one fused kernel per variable.

    The same arguments and update as `keras.optimizers.Adam` (`m ← β₁m + (1-β₁)g`,
    `v ← β₂v + (1-β₂)g²`, `w ← w - lr·√(1-β₂ᵗ)/(1-β₁ᵗ)·m/(√v + ε)`); each
    variable's update is TensorFlow's `ResourceApplyAdam` instead of Keras 3's
    ten element-wise ops. On the census MMoE (14 variables) the training step's
    graph went from 1,018 to 682 ops; outside a distribution strategy the step's
    β powers and rate are computed once for all the variables (bench_din's step
    619 -> 507 ops). `amsgrad=True` uses Keras' own update.
    Under tf_keras (Keras 2) it is tf_keras' Adam.

    Example:

    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> model.compile(FusedAdam(1e-3), "mse")
    >>> model.fit(np.ones((4, 3)), np.zeros((4, 2)), verbose=0).history["loss"][0] > 0
    True
    """


@register
class LinearWarmUpDecay(keras.optimizers.schedules.LearningRateSchedule):
    """A learning rate raised linearly from 0 and lowered linearly back to 0.

    `lr(t) = learning_rate · t / warmup_steps` for `t < warmup_steps`, then
    `learning_rate · (total_steps - t) / (total_steps - warmup_steps)`, and 0 from
    `total_steps` on: BERT's fine-tuning schedule (Devlin et al., 2019; Hugging
    Face's `get_linear_schedule_with_warmup`).

    Args:
        learning_rate: float > 0. The peak rate.
        warmup_steps: int >= 0. Steps of the rise.
        total_steps: int > warmup_steps. Steps until the rate is 0.

    Example:

    >>> schedule = LinearWarmUpDecay(1e-3, warmup_steps=2, total_steps=6)
    >>> [round(float(schedule(t)), 6) for t in range(7)]
    [0.0, 0.0005, 0.001, 0.00075, 0.0005, 0.00025, 0.0]
    """

    def __init__(self, learning_rate: float, warmup_steps: int, total_steps: int):
        check_finite("learning_rate", learning_rate, minimum=0, exclusive_minimum=True)
        check_int("warmup_steps", warmup_steps, minimum=0)
        check_int("total_steps", total_steps, minimum=warmup_steps + 1)
        self.learning_rate = float(learning_rate)
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        rise = step / max(self.warmup_steps, 1)
        fall = (self.total_steps - step) / (self.total_steps - self.warmup_steps)
        factor = tf.where(step < self.warmup_steps, rise, tf.maximum(fall, 0.0))
        return self.learning_rate * factor

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
        }
