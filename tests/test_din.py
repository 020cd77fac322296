"""DIN: Dice's batch vs moving statistics, the local activation unit, attention
pooling with masks and empty histories."""

import numpy as np
import pytest

from keras_attn.backend import keras, tf
from keras_attn.layers import AttentionSequencePooling, Dice, LocalActivationUnit
from tests.harness import assert_mask_invariant, run_layer_test

pytestmark = pytest.mark.generation_neutral

DIM, HIST = 6, 5


def _data(batch=4, seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(batch, DIM)).astype("float32")
    keys = rng.normal(size=(batch, HIST, DIM)).astype("float32")
    mask = np.ones((batch, HIST), bool)
    mask[1, 2:] = False
    mask[2, :] = False  # an empty history
    return query, keys, mask


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _dice_np(x, mean, var, alpha, eps=1e-9):
    # Zhou et al. (2018), eq. 7: p(s) = sigmoid((s - E[s]) / sqrt(Var[s] + eps)).
    p = _sigmoid((x - mean) / np.sqrt(var + eps))
    return p * x + (1 - p) * alpha * x


def _randomize(layer, seed=1):
    rng = np.random.default_rng(seed)
    for w in layer.trainable_weights:
        w.assign(rng.normal(scale=0.5, size=w.shape).astype("float32"))


def _unit_np(unit, query, keys):
    """The activation unit's MLP over [q, k, q - k, q * k] (or, for
    "outer_product", [q, k, q - k, vec(q ⊗ k)]), inference statistics."""
    q = np.broadcast_to(query[:, None], keys.shape)
    if unit.interaction == "outer_product":
        # vec(q ⊗ k)[a * dim + b] = q_a k_b
        pair = np.einsum("bta,btc->btac", q, keys).reshape(keys.shape[:2] + (-1,))
    else:
        pair = q * keys
    h = np.concatenate([q, keys, q - keys, pair], axis=-1)
    for i, (kernel, bias) in enumerate(zip(unit.kernels, unit.biases)):
        h = h @ np.asarray(kernel) + np.asarray(bias)
        if unit.dice_layers:
            d = unit.dice_layers[i]
            h = _dice_np(
                h,
                np.asarray(d.moving_mean),
                np.asarray(d.moving_variance),
                np.asarray(d.alpha),
            )
        else:
            h = _sigmoid(h)
    return (h @ np.asarray(unit.output_kernel))[..., 0] + np.asarray(unit.output_bias)


@pytest.mark.generation_specific
@pytest.mark.slow
def test_harness_dice():
    run_layer_test(
        Dice,
        {},
        {"inputs": np.random.default_rng(0).normal(size=(8, 3, 4)).astype("float32")},
        expected_output_shape=(8, 3, 4),
        expected_num_trainable_weights=1,
        expected_num_non_trainable_weights=2,
    )


@pytest.mark.generation_specific
@pytest.mark.slow
def test_harness_local_activation_unit():
    query, keys, _ = _data(batch=8)
    run_layer_test(
        LocalActivationUnit,
        {"hidden_units": (8, 4)},
        {"query": query, "keys": keys},
        expected_output_shape=(8, HIST),
        expected_num_trainable_weights=8,  # 3 kernels, 3 biases, 2 Dice alphas
        expected_num_non_trainable_weights=4,
    )


@pytest.mark.generation_specific
@pytest.mark.slow
def test_harness_local_activation_unit_outer_product():
    query, keys, mask = _data(batch=8)
    run_layer_test(
        LocalActivationUnit,
        {"hidden_units": (8, 4), "interaction": "outer_product"},
        {"query": query, "keys": keys, "mask": mask},
        expected_output_shape=(8, HIST),
        expected_num_trainable_weights=8,
        expected_num_non_trainable_weights=4,
    )


@pytest.mark.generation_specific
@pytest.mark.slow
@pytest.mark.parametrize("weight_normalization", [False, True])
def test_harness_attention_sequence_pooling(weight_normalization):
    query, keys, mask = _data(batch=8)
    run_layer_test(
        AttentionSequencePooling,
        {"hidden_units": (8, 4), "weight_normalization": weight_normalization},
        {"query": query, "keys": keys, "mask": mask},
        expected_output_shape=((8, DIM), (8, HIST)),
        expected_num_trainable_weights=8,
        expected_num_non_trainable_weights=4,
        call_kwargs={"return_attention_scores": True},
    )


def test_dice_golden_training_and_inference():
    rng = np.random.default_rng(0)
    x = rng.normal(loc=2.0, scale=3.0, size=(16, 4, 3)).astype("float32")
    dice = Dice(momentum=0.9)
    dice(x)
    alpha = np.array([0.3, -0.5, 1.0], "float32")
    dice.alpha.assign(alpha)
    mean, var = x.mean(axis=(0, 1)), x.var(axis=(0, 1))
    train_out = np.asarray(dice(x, training=True))
    np.testing.assert_allclose(
        train_out, _dice_np(x, mean, var, alpha), rtol=1e-4, atol=1e-4
    )
    # The moving statistics moved toward the batch's (momentum 0.9, from 0 and 1).
    np.testing.assert_allclose(np.asarray(dice.moving_mean), 0.1 * mean, rtol=1e-5)
    np.testing.assert_allclose(
        np.asarray(dice.moving_variance), 0.9 + 0.1 * var, rtol=1e-5
    )
    infer_out = np.asarray(dice(x, training=False))
    expected = _dice_np(x, 0.1 * mean, 0.9 + 0.1 * var, alpha)
    np.testing.assert_allclose(infer_out, expected, rtol=1e-4, atol=1e-4)
    assert not np.allclose(train_out, infer_out)


@pytest.mark.generation_specific
def test_dice_statistics_are_saved(tmp_path):
    x = np.random.default_rng(0).normal(loc=5.0, size=(32, 4)).astype("float32")
    inputs = keras.Input((4,))
    model = keras.Model(inputs, Dice(name="dice")(inputs))
    dice = model.get_layer("dice")
    for _ in range(3):
        dice(x, training=True)
    assert np.all(np.asarray(dice.moving_mean) > 0.1)  # from 0, momentum 0.99
    path = str(tmp_path / "dice.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    np.testing.assert_allclose(
        np.asarray(reloaded.get_layer("dice").moving_mean),
        np.asarray(dice.moving_mean),
    )
    np.testing.assert_allclose(np.asarray(reloaded(x)), np.asarray(model(x)), atol=1e-6)


@pytest.mark.parametrize("activation", ["dice", "sigmoid"])
def test_local_activation_unit_golden(activation):
    query, keys, _ = _data()
    unit = LocalActivationUnit(hidden_units=(7, 3), activation=activation)
    unit(query, keys)
    _randomize(unit)
    got = np.asarray(unit(query, keys))
    np.testing.assert_allclose(got, _unit_np(unit, query, keys), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("masked", [False, True])
def test_outer_product_interaction_golden(masked):
    query, keys, mask = _data()
    unit = LocalActivationUnit(hidden_units=(7, 3), interaction="outer_product")
    unit(query, keys)
    assert unit.kernels[0].shape == (3 * DIM + DIM * DIM, 7)
    _randomize(unit)
    expected = _unit_np(unit, query, keys)
    if masked:
        got = np.asarray(unit(query, keys, mask=mask))
        expected = np.where(mask, expected, 0.0)
    else:
        got = np.asarray(unit(query, keys))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_interaction_config_round_trip_and_validation():
    pooling = AttentionSequencePooling(hidden_units=(4,), interaction="outer_product")
    config = pooling.get_config()
    assert config["interaction"] == "outer_product"
    clone = AttentionSequencePooling.from_config(config)
    assert clone.local_activation_unit.interaction == "outer_product"
    assert LocalActivationUnit().get_config()["interaction"] == "concat_diff_product"
    with pytest.raises(ValueError, match="`interaction` must be one of.*'inner'"):
        LocalActivationUnit(interaction="inner")
    with pytest.raises(ValueError, match="interaction='outer'"):
        AttentionSequencePooling(interaction="outer")


@pytest.mark.parametrize("weight_normalization", [False, True])
def test_attention_sequence_pooling_golden(weight_normalization):
    query, keys, mask = _data()
    pooling = AttentionSequencePooling(
        hidden_units=(7, 3), weight_normalization=weight_normalization
    )
    pooling(query, keys, mask=mask)
    _randomize(pooling)
    out, weights = pooling(query, keys, mask=mask, return_attention_scores=True)
    scores = _unit_np(pooling.local_activation_unit, query, keys)
    if weight_normalization:
        e = np.where(mask, np.exp(scores - scores.max(-1, keepdims=True)), 0.0)
        denom = e.sum(-1, keepdims=True)
        expected_w = np.divide(e, denom, out=np.zeros_like(e), where=denom > 0)
    else:
        expected_w = np.where(mask, scores, 0.0)  # the paper: raw weights
    np.testing.assert_allclose(np.asarray(weights), expected_w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(out),
        np.einsum("bt,btd->bd", expected_w, keys),
        rtol=1e-4,
        atol=1e-5,
    )


@pytest.mark.parametrize("weight_normalization", [False, True])
def test_mask_invariance(weight_normalization):
    query, keys, mask = _data()
    pooling = AttentionSequencePooling(
        hidden_units=(8, 4), weight_normalization=weight_normalization
    )
    assert_mask_invariant(
        pooling, {"query": query, "keys": keys, "mask": mask}, "keys", ~mask
    )


@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("weight_normalization", [False, True])
def test_empty_history_gives_zeros(policy, weight_normalization):
    keras.mixed_precision.set_global_policy(policy)
    query, keys, mask = _data()
    pooling = AttentionSequencePooling(
        hidden_units=(8, 4), weight_normalization=weight_normalization
    )
    for training in (False, True):
        out, weights = pooling(
            query,
            keys * 100.0,
            mask=mask,
            training=training,
            return_attention_scores=True,
        )
        out = np.asarray(tf.cast(out, "float32"))
        assert np.all(np.isfinite(out))
        assert np.all(out[2] == 0) and np.all(np.asarray(weights)[2] == 0)
        assert np.any(out[0] != 0)


@pytest.mark.generation_specific
def test_mask_from_keys_embedding():
    ids = np.array([[3, 1, 0, 0], [0, 0, 0, 0]])
    embed = keras.layers.Embedding(5, DIM, mask_zero=True)
    pooling = AttentionSequencePooling(hidden_units=(4,), weight_normalization=True)
    history = embed(ids)
    _, weights = pooling(
        np.ones((2, DIM), "float32"), history, return_attention_scores=True
    )
    w = np.asarray(weights)
    np.testing.assert_allclose(w[0].sum(), 1.0, rtol=1e-5)
    assert np.all(w[0, 2:] == 0) and np.all(w[1] == 0)


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (Dice, {"epsilon": 0}, "epsilon=0"),
        (Dice, {"axis": 1.5}, "axis=1.5"),
        (Dice, {"momentum": 1.0}, "momentum=1.0"),
        (LocalActivationUnit, {"hidden_units": ()}, "hidden_units=\\(\\)"),
        (LocalActivationUnit, {"hidden_units": (8, 0)}, "hidden_units"),
        (LocalActivationUnit, {"activation": "nope"}, "activation='nope'"),
        (LocalActivationUnit, {"dropout": -0.1}, "dropout=-0.1"),
        (AttentionSequencePooling, {"hidden_units": [-1]}, "hidden_units"),
        (AttentionSequencePooling, {"activation": "bogus"}, "activation='bogus'"),
    ],
)
def test_validation(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_shape_errors():
    query, keys, mask = _data()
    with pytest.raises(ValueError, match=r"query.shape=\(4, 3\)"):
        AttentionSequencePooling()(query[:, :3], keys)
    with pytest.raises(ValueError, match=r"mask.shape=\(4, 4\)"):
        AttentionSequencePooling(hidden_units=(4,))(query, keys, mask=mask[:, :4])


def test_padding_is_skipped_in_training_statistics():
    # With a mask, Dice's batch statistics come from the real items only: the
    # first layer's pre-activations of real items, in NumPy, give its moving mean.
    query, keys, mask = _data(batch=6)
    unit = LocalActivationUnit(hidden_units=(5,), activation="dice")
    unit(query, keys, mask=mask)
    _randomize(unit)
    dice = unit.dice_layers[0]
    dice.momentum = 0.0  # the moving statistics become the last batch's
    unit(query, keys, mask=mask, training=True)
    q = np.broadcast_to(query[:, None], keys.shape)
    h = np.concatenate([q, keys, q - keys, q * keys], axis=-1)
    h = h @ np.asarray(unit.kernels[0]) + np.asarray(unit.biases[0])
    np.testing.assert_allclose(
        np.asarray(dice.moving_mean), h[mask].mean(0), rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(
        np.asarray(dice.moving_variance), h[mask].var(0), rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize("training", [False, True])
def test_padding_content_never_changes_the_output(training):
    query, keys, mask = _data(batch=6)
    pooling = AttentionSequencePooling(hidden_units=(8, 4))
    pooling(query, keys, mask=mask)
    _randomize(pooling)
    noisy = np.where(mask[..., None], keys, 1e3 * np.ones_like(keys))
    a = np.asarray(pooling(query, keys, mask=mask, training=training))
    b = np.asarray(pooling(query, noisy, mask=mask, training=training))
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_all_padded_batch_keeps_moving_statistics_finite():
    query, keys, mask = _data()
    pooling = AttentionSequencePooling(hidden_units=(4,))
    out = pooling(query, keys, mask=np.zeros_like(mask), training=True)
    assert np.all(np.asarray(out) == 0)
    dice = pooling.local_activation_unit.dice_layers[0]
    np.testing.assert_array_equal(np.asarray(dice.moving_mean), 0.0)
    np.testing.assert_array_equal(np.asarray(dice.moving_variance), 1.0)


def test_sorted_row_helpers_equal_their_unsorted_forms():
    # The packed path's candidate gather (its gradient a sorted segment sum) and
    # its row sums, against tf.gather / unsorted_segment_sum; the rows skip
    # example 1 and end before the last two examples, which must come out 0.
    from keras_attn.layers.din import _gather_rows, _sum_rows

    rng = np.random.default_rng(0)
    params = tf.constant(rng.normal(size=(6, 3)).astype("float32"))
    rows = tf.constant([0, 0, 2, 2, 2, 3], tf.int64)
    upstream = tf.constant(rng.normal(size=(6, 3)).astype("float32"))
    grads = []
    for gather in (_gather_rows, tf.gather):
        with tf.GradientTape() as tape:
            tape.watch(params)
            out = gather(params, rows)
        np.testing.assert_array_equal(out, tf.gather(params, rows))
        grads.append(tape.gradient(out, params, output_gradients=upstream))
    np.testing.assert_allclose(grads[0], tf.convert_to_tensor(grads[1]), atol=1e-6)
    expected = tf.math.unsorted_segment_sum(upstream, rows, 6)
    np.testing.assert_allclose(_sum_rows(upstream, rows, 6), expected, atol=1e-6)
    empty = _sum_rows(tf.zeros([0, 3]), tf.zeros([0], tf.int64), 4)
    np.testing.assert_array_equal(empty, np.zeros((4, 3)))


def test_packed_training_gradients_equal_the_unmasked_path():
    # With every item real, the masked (packed) path computes what the unmasked
    # one does, gradients included (the candidate's through the sorted segment
    # sum, the pooling's through the packed weighted sum).
    query, keys, _ = _data(batch=5)
    pooling = AttentionSequencePooling(hidden_units=(6, 3))
    pooling(query, keys)
    _randomize(pooling)
    q, k = tf.constant(query), tf.constant(keys)
    results = []
    for mask in (None, np.ones(keys.shape[:2], bool)):
        with tf.GradientTape() as tape:
            tape.watch([q, k])
            out = pooling(q, k, mask=mask, training=True)
            loss = tf.reduce_sum(out * tf.range(1.0, 1.0 + DIM))
        variables = pooling.trainable_weights
        grads = tape.gradient(loss, [q, k] + variables)
        results.append([np.asarray(out)] + [np.asarray(g) for g in grads])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
