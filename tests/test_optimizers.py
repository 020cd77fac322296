"""FusedAdam and FusedAdamW: the updates of keras.optimizers.Adam and AdamW, one
fused kernel per variable."""

import numpy as np
import pytest

from keras_attn.backend import KERAS_3, keras, tf
from keras_attn.optimizers import FusedAdam, FusedAdamW


def _train(optimizer, steps=5, compiled=True, strategy=None):
    """Weights after `steps` updates of a model with a dense and an embedding
    gradient (IndexedSlices), weight decay on; `optimizer` an optimizer, or with
    `strategy` a function making one (in its scope, each step by its `run`)."""
    if strategy is None:
        return _weights_after(optimizer, steps, compiled, run=lambda step: step())
    with strategy.scope():
        return _weights_after(optimizer(), steps, compiled, run=strategy.run)


def _weights_after(optimizer, steps, compiled, run):
    keras.utils.set_random_seed(0)
    ids = keras.Input((3,), dtype="int32")
    x = keras.Input((5,))
    table = keras.layers.Embedding(20, 4)(ids)
    features = keras.layers.Concatenate()(
        [keras.layers.Flatten()(table), keras.layers.Dense(8)(x)]
    )
    model = keras.Model([ids, x], keras.layers.Dense(3)(features))
    rng = np.random.default_rng(1)
    data = [
        rng.integers(0, 20, (4, 3)).astype("int32"),
        rng.normal(size=(4, 5)).astype("float32"),
    ]
    y = rng.normal(size=(4, 3)).astype("float32")
    variables = model.trainable_variables

    def replica_step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(data) - y) ** 2)
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))

    def step():
        run(replica_step)

    step = tf.function(step) if compiled else step
    for _ in range(steps):
        step()
    return [v.numpy() for v in variables]


@pytest.mark.parametrize("compiled", [False, True])
def test_fused_update_is_keras_adamw(compiled):
    settings = dict(learning_rate=0.05, weight_decay=0.1, beta_2=0.99)
    expected = _train(keras.optimizers.AdamW(**settings), compiled=compiled)
    got = _train(FusedAdamW(**settings), compiled=compiled)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, atol=1e-5)
    # The weights moved: the comparison is not between two untouched models.
    assert not np.allclose(got[-1], _train(FusedAdamW(**settings), steps=0)[-1])


@pytest.mark.parametrize("compiled", [False, True])
def test_fused_update_is_keras_adam(compiled):
    settings = dict(learning_rate=0.05, beta_2=0.99)
    expected = _train(keras.optimizers.Adam(**settings), compiled=compiled)
    got = _train(FusedAdam(**settings), compiled=compiled)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, atol=1e-5)
    assert not np.allclose(got[-1], _train(FusedAdam(**settings), steps=0)[-1])


@pytest.mark.skipif(not KERAS_3, reason="Keras 3's update is what is fused")
def test_one_fused_kernel_per_variable():
    variable = keras.Variable(np.ones((3, 2), "float32"))
    optimizer = FusedAdamW(learning_rate=0.1)
    optimizer.build([variable])

    @tf.function
    def step():
        optimizer.apply_gradients([(tf.ones((3, 2)), variable)])

    ops = [op.type for op in step.get_concrete_function().graph.get_operations()]
    assert ops.count("ResourceApplyAdam") == 1


@pytest.mark.skipif(not KERAS_3, reason="Keras 3's update is what is fused")
def test_the_steps_scalars_once_for_all_variables():
    # Without a strategy, βᵗ and the rate are computed once per step and dtype,
    # not once per variable (two Pow per variable before); under a strategy each
    # variable's update computes its own, with the same weights as Keras' Adam.
    variables = [keras.Variable(np.ones((3, 2), "float32")) for _ in range(3)]
    optimizer = FusedAdam(learning_rate=0.1)
    optimizer.build(variables)

    @tf.function
    def step():
        optimizer.apply_gradients([(tf.ones((3, 2)), v) for v in variables])

    ops = [op.type for op in step.get_concrete_function().graph.get_operations()]
    assert ops.count("Pow") == 2 and ops.count("ResourceApplyAdam") == 3, ops
    settings = dict(learning_rate=0.05, beta_2=0.99)
    expected = _train(keras.optimizers.Adam(**settings))
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    got = _train(lambda: FusedAdam(**settings), strategy=strategy)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, atol=1e-5)


def test_config_round_trip():
    optimizer = FusedAdamW(learning_rate=0.01, weight_decay=0.02)
    again = FusedAdamW.from_config(optimizer.get_config())
    assert isinstance(again, FusedAdamW)
    assert again.get_config()["weight_decay"] == pytest.approx(0.02)
