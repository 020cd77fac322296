"""FeatureCross (DCN-v2): the paper's formula in NumPy, full and low rank and the
mixture of low-rank experts, the layer harness, masks, the peers on the same
weights (TFRS's `Cross` and DeepCTR's `CrossNetMix` under Keras 2, keras-rs'
`FeatureCross` under Keras 3 when installed), and `CTRModel` with a cross in its
`interaction` list."""

import numpy as np
import pandas as pd
import pytest

from keras_attn.backend import KERAS_3, keras
from keras_attn.features import infer_features
from keras_attn.layers import FeatureCross, InteractingLayer
from keras_attn.models import CTRModel, build_ctr_model
from tests.harness import assert_mask_invariant, run_layer_test


def _x(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def dcn_v2_np(x0, weights, x=None):
    """Wang et al. (2021), eq. 1: x_{l+1} = x_0 * (W_l x_l + b_l) + x_l, with
    W_l = U_l V_l^T in the low-rank form (eq. 2); row vectors, so W x is x @ W."""
    x = x0 if x is None else x
    for layer in weights:
        *kernels, bias = layer
        w = kernels[0] if len(kernels) == 1 else kernels[0] @ kernels[1]
        x = x0 * (x @ w + bias) + x
    return x


def _weights(layer):
    """[(kernel(s)..., bias)] per cross layer, as NumPy."""
    return [
        [np.asarray(k) for k in kernels] + [np.asarray(layer.biases[i])]
        for i, kernels in enumerate(layer.kernels)
    ]


@pytest.mark.generation_neutral
@pytest.mark.parametrize("projection_dim", [None, 3])
def test_equals_the_dcn_v2_formula(projection_dim):
    layer = FeatureCross(
        num_layers=3,
        projection_dim=projection_dim,
        bias_initializer="random_normal",
    )
    x0, x = _x(5, 12), _x(5, 12, seed=1)
    got = np.asarray(layer(x0))
    np.testing.assert_allclose(
        got, dcn_v2_np(x0, _weights(layer)), rtol=1e-5, atol=1e-5
    )
    # Starting from another x (a cross after a cross).
    np.testing.assert_allclose(
        np.asarray(layer(x0, x=x)),
        dcn_v2_np(x0, _weights(layer), x),
        rtol=1e-5,
        atol=1e-5,
    )
    sizes = [w.shape for w in layer.kernels[0]]
    assert sizes == ([(12, 12)] if projection_dim is None else [(12, 3), (3, 12)])


def dcn_mix_np(x0, layers, g=np.tanh):
    """Wang et al. (2021), section 5.2 (DCN-Mix), per layer: x_{l+1} = x_0 *
    (sum_i G_i(x_l) E_i(x_l) + b_l) + x_l, E_i(x) = U_i g(C_i g(V_i^T x)),
    G = softmax(x W_g) over the experts; row vectors, so V_i^T x is x @ V_i and
    C_i h is h @ C_i here. `layers`: [(gate (d, k), V (k, d, r), C (k, r, r),
    U (k, r, d), b (d,))]."""
    x = x0.astype("float64")
    x0 = x
    for gate, down, middle, up, bias in layers:
        logits = x @ gate
        gates = np.exp(logits - logits.max(-1, keepdims=True))
        gates /= gates.sum(-1, keepdims=True)
        mixed = 0.0
        for i in range(gate.shape[1]):
            expert = g(g(x @ down[i]) @ middle[i]) @ up[i]
            mixed = mixed + gates[:, i : i + 1] * expert
        x = x0 * (mixed + bias) + x
    return x


def _random_weights(layer, seed=3, scale=0.4):
    rng = np.random.default_rng(seed)
    layer.set_weights(
        [rng.normal(scale=scale, size=w.shape).astype("float32") for w in layer.weights]
    )
    # [(gate, V, C, U, b)] per layer, in the layer's order.
    values = [np.asarray(w, "float64") for w in layer.get_weights()]
    return [values[i : i + 5] for i in range(0, len(values), 5)]


@pytest.mark.generation_neutral
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_mixture_equals_the_dcn_mix_formula(activation):
    layer = FeatureCross(
        num_layers=2, projection_dim=3, num_experts=4, activation=activation
    )
    x0 = _x(5, 12)
    layer(x0)
    layers = _random_weights(layer)
    g = np.tanh if activation == "tanh" else (lambda v: np.maximum(v, 0.0))
    np.testing.assert_allclose(
        np.asarray(layer(x0)), dcn_mix_np(x0, layers, g), rtol=1e-6, atol=1e-6
    )
    assert [tuple(w.shape) for w in layer.weights[:5]] == [
        (12, 4),
        (4, 12, 3),
        (4, 3, 3),
        (4, 3, 12),
        (12,),
    ]
    # Fields: crossed as the flat vector, padded fields zero.
    fields = _x(5, 3, 4, seed=2)
    mask = np.array([[1, 1, 1], [1, 0, 1], [0, 0, 0], [1, 1, 0], [0, 1, 1]], bool)
    expected = dcn_mix_np((fields * mask[..., None]).reshape(5, 12), layers, g)
    np.testing.assert_allclose(
        np.asarray(layer(fields, mask=mask)),
        expected.reshape(5, 3, 4) * mask[..., None],
        rtol=1e-6,
        atol=1e-6,
    )
    assert_mask_invariant(
        layer, {"inputs": fields, "mask": mask}, target="inputs", padded=~mask
    )


@pytest.mark.generation_neutral
@pytest.mark.parametrize("num_experts", [1, None])
def test_one_expert_is_the_plain_cross_with_its_weights(num_experts):
    plain = FeatureCross(num_layers=2, projection_dim=3, name="cross")
    one = FeatureCross(
        num_layers=2, projection_dim=3, num_experts=num_experts, name="cross"
    )
    x0 = _x(4, 6)
    plain(x0)
    one(x0)
    assert [(w.name, tuple(w.shape)) for w in one.weights] == [
        (w.name, tuple(w.shape)) for w in plain.weights
    ]
    one.set_weights(plain.get_weights())
    np.testing.assert_array_equal(np.asarray(one(x0)), np.asarray(plain(x0)))
    assert one.get_config()["num_experts"] == 1


@pytest.mark.generation_neutral
def test_fields_are_crossed_as_one_flat_vector_and_padding_stays_zero():
    layer = FeatureCross(num_layers=2, bias_initializer="random_normal")
    fields = _x(4, 3, 5)
    flat = np.asarray(layer(fields)).reshape(4, 15)
    np.testing.assert_allclose(
        flat, dcn_v2_np(fields.reshape(4, 15), _weights(layer)), rtol=1e-5, atol=1e-5
    )
    mask = np.array([[1, 1, 1], [1, 0, 1], [0, 0, 0], [1, 1, 0]], bool)
    out = np.asarray(layer(fields, mask=mask))
    assert np.all(out[~mask] == 0)
    expected = dcn_v2_np((fields * mask[..., None]).reshape(4, 15), _weights(layer))
    np.testing.assert_allclose(
        out, expected.reshape(4, 3, 5) * mask[..., None], rtol=1e-5, atol=1e-5
    )
    assert_mask_invariant(
        layer, {"inputs": fields, "mask": mask}, target="inputs", padded=~mask
    )


@pytest.mark.slow
@pytest.mark.parametrize("projection_dim", [None, 2])
def test_harness_flat(projection_dim):
    run_layer_test(
        FeatureCross,
        {"num_layers": 2, "projection_dim": projection_dim},
        {"inputs": _x(8, 6)},
        expected_output_shape=(8, 6),
        expected_num_trainable_weights=4 if projection_dim is None else 6,
    )


@pytest.mark.slow
def test_harness_mixture():
    run_layer_test(
        FeatureCross,
        {"num_layers": 2, "projection_dim": 2, "num_experts": 3, "activation": "relu"},
        {"inputs": _x(8, 6)},
        expected_output_shape=(8, 6),
        expected_num_trainable_weights=10,
    )


@pytest.mark.slow
def test_harness_mixture_fields_with_mask_and_regularizers():
    mask = np.ones((8, 4), bool)
    mask[:2, 3:] = False
    run_layer_test(
        FeatureCross,
        {
            "num_layers": 1,
            "projection_dim": 2,
            "num_experts": 2,
            "kernel_regularizer": "l2",
            "bias_regularizer": "l2",
        },
        {"inputs": _x(8, 4, 3), "mask": mask},
        expected_output_shape=(8, 4, 3),
        expected_num_trainable_weights=5,
        # The three expert kernels and the bias; the gate is not regularized.
        expected_num_losses=4,
    )


@pytest.mark.slow
def test_harness_fields_with_mask_and_regularizers():
    mask = np.ones((8, 4), bool)
    mask[:2, 3:] = False
    run_layer_test(
        FeatureCross,
        {
            "num_layers": 1,
            "projection_dim": 3,
            "kernel_regularizer": "l2",
            "bias_regularizer": "l2",
        },
        {"inputs": _x(8, 4, 3), "mask": mask},
        expected_output_shape=(8, 4, 3),
        expected_num_trainable_weights=3,
        expected_num_losses=3,
    )


@pytest.mark.generation_neutral
def test_bad_arguments_and_shapes_name_the_argument():
    with pytest.raises(ValueError, match="`num_layers` must be a positive"):
        FeatureCross(num_layers=0)
    with pytest.raises(ValueError, match="`projection_dim` must be a positive"):
        FeatureCross(projection_dim=0)
    with pytest.raises(ValueError, match="`num_experts` must be a positive"):
        FeatureCross(projection_dim=2, num_experts=0)
    with pytest.raises(
        ValueError, match="`projection_dim` must be a positive integer when"
    ):
        FeatureCross(num_experts=4)
    with pytest.raises(ValueError, match="`activation` must be a Keras activation"):
        FeatureCross(projection_dim=2, num_experts=2, activation="no_such")
    with pytest.raises(ValueError, match="`use_bias` must be a bool"):
        FeatureCross(use_bias="yes")
    with pytest.raises(ValueError, match=r"`inputs` must have shape \(batch, dim\)"):
        FeatureCross()(_x(2, 3, 4, 5))
    with pytest.raises(ValueError, match="`x` must have the shape of `inputs`"):
        FeatureCross()(_x(2, 6), x=_x(2, 5))


@pytest.mark.skipif(KERAS_3, reason="tensorflow-recommenders needs Keras 2")
@pytest.mark.parametrize("projection_dim", [None, 4])
def test_equals_tfrs_cross_with_the_same_weights(projection_dim):
    tfrs = pytest.importorskip("tensorflow_recommenders")
    x0 = _x(6, 10)
    ours = FeatureCross(
        num_layers=2, projection_dim=projection_dim, bias_initializer="random_normal"
    )
    ours(x0)
    theirs = [tfrs.layers.dcn.Cross(projection_dim=projection_dim) for _ in range(2)]
    x = x0
    for layer, kernels, bias in zip(theirs, ours.kernels, ours.biases):
        layer(x0, x)
        # TFRS: Dense(last_dim) or Dense(r, no bias) then Dense(last_dim).
        layer.set_weights([np.asarray(k) for k in kernels] + [np.asarray(bias)])
        x = layer(x0, x)
    np.testing.assert_allclose(
        np.asarray(ours(x0)), np.asarray(x), rtol=1e-5, atol=1e-5
    )


@pytest.mark.skipif(KERAS_3, reason="DeepCTR needs Keras 2")
def test_mixture_equals_deepctr_cross_net_mix_with_the_same_weights():
    pytest.importorskip("deepctr")
    from deepctr.layers.interaction import CrossNetMix

    x0 = _x(6, 10)
    theirs = CrossNetMix(low_rank=3, num_experts=4, layer_num=2, seed=0)
    theirs(x0)
    rng = np.random.default_rng(4)
    theirs.set_weights(
        [rng.normal(scale=0.4, size=w.shape).astype("float32") for w in theirs.weights]
    )
    # DeepCTR: U (k, d, r), V (k, d, r), C (k, r, r) per layer, one Dense(1) gate
    # per expert shared by the layers, bias (d, 1) per layer; column vectors.
    ours = FeatureCross(num_layers=2, projection_dim=3, num_experts=4)
    ours(x0)
    gate = np.concatenate([np.asarray(g.kernel) for g in theirs.gating], axis=1)
    values = []
    for i in range(2):
        values += [
            gate,
            np.asarray(theirs.V_list[i]),
            np.transpose(np.asarray(theirs.C_list[i]), (0, 2, 1)),
            np.transpose(np.asarray(theirs.U_list[i]), (0, 2, 1)),
            np.asarray(theirs.bias[i])[:, 0],
        ]
    ours.set_weights(values)
    np.testing.assert_allclose(
        np.asarray(ours(x0)), np.asarray(theirs(x0)), rtol=1e-5, atol=1e-5
    )


@pytest.mark.skipif(not KERAS_3, reason="keras-rs is a Keras 3 library")
def test_equals_keras_rs_feature_cross_with_the_same_weights():
    keras_rs = pytest.importorskip("keras_rs", reason="keras-rs is not installed")
    x0 = _x(6, 10)
    ours = FeatureCross(num_layers=1, projection_dim=4, bias_initializer="ones")
    theirs = keras_rs.layers.FeatureCross(projection_dim=4)
    theirs(x0)
    ours(x0)
    down, up = ours.kernels[0]
    theirs.set_weights([np.asarray(down), np.asarray(up), np.asarray(ours.biases[0])])
    np.testing.assert_allclose(
        np.asarray(ours(x0)), np.asarray(theirs(x0)), rtol=1e-5, atol=1e-5
    )


def _frame():
    rng = np.random.default_rng(0)
    n = 64
    return pd.DataFrame(
        {
            "city": rng.choice(["a", "b", "c"], n),
            "device": rng.choice(["x", "y"], n),
            "age": rng.normal(40, 10, n),
            "click": rng.integers(0, 2, n),
        }
    )


@pytest.mark.slow
def test_ctr_model_takes_a_cross_beside_an_interacting_layer(tmp_path):
    df = _frame()
    specs = infer_features(df, labels=["click"])
    model = CTRModel(
        specs,
        ["click"],
        embedding_dim=4,
        interaction=[InteractingLayer(num_heads=1, key_dim=4), FeatureCross(2, 3)],
    )
    assert isinstance(model.interaction[1], FeatureCross)
    model.compile("adam", loss="binary_crossentropy")
    rows = {c: df[c].to_numpy() for c in ["city", "device", "age"]}
    model.fit(rows, df["click"].to_numpy(), epochs=1, batch_size=16, verbose=0)
    path = str(tmp_path / "dcn.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    assert isinstance(reloaded.interaction[1], FeatureCross)
    assert reloaded.interaction[1].projection_dim == 3
    np.testing.assert_allclose(
        reloaded.predict(rows, verbose=0)["click"],
        model.predict(rows, verbose=0)["click"],
        rtol=1e-5,
        atol=1e-6,
    )


def test_build_ctr_model_spells_dcn_v2():
    df = _frame()
    specs = infer_features(df, labels=["click"])
    model = build_ctr_model(
        specs, ["click"], embedding_dim=4, cross_layers=2, cross_projection_dim=2
    )
    (cross,) = model.interaction
    assert (cross.num_layers, cross.projection_dim) == (2, 2)
    # Three fields of 4: the cross works on their flat 12-vector.
    assert [tuple(w.shape) for w in cross.kernels[0]] == [(12, 2), (2, 12)]
    model = build_ctr_model(
        specs,
        ["click"],
        embedding_dim=4,
        cross_layers=1,
        cross_projection_dim=2,
        cross_num_experts=3,
    )
    (cross,) = model.interaction
    assert cross.num_experts == 3
    assert [tuple(w.shape) for w in cross.kernels[0]] == [
        (3, 12, 2),
        (3, 2, 2),
        (3, 2, 12),
    ]
    with pytest.raises(ValueError, match="`cross_projection_dim` must be a positive"):
        build_ctr_model(specs, ["click"], cross_layers=1, cross_num_experts=2)
    with pytest.raises(ValueError, match="`cross_layers` must be a non-negative"):
        build_ctr_model(specs, ["click"], cross_layers=-1)
