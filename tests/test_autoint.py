"""InteractingLayer (AutoInt): golden value, scaling, residual, masks, stacking."""

import math

import numpy as np
import pytest

from keras_attn.backend import keras
from keras_attn.layers import InteractingLayer
from tests.harness import assert_mask_invariant, run_layer_test

pytestmark = pytest.mark.generation_neutral


def _fields(batch=4, fields=6, dim=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(batch, fields, dim)).astype("float32")


def _softmax(z):
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def _autoint_np(x, kernels, heads, att, use_residual, scaling):
    """Song et al. (2019), eqs. 5-8: per head, a_mk = softmax_k(<W_q e_m, W_k e_k>),
    e~_m = concat_h sum_k a_mk W_v e_k; output ReLU(e~_m + W_res e_m)."""
    b, f, _ = x.shape
    q, k, v = (
        (x @ w).reshape(b, f, heads, att).transpose(0, 2, 1, 3) for w in kernels[:3]
    )
    scores = q @ k.transpose(0, 1, 3, 2)
    if scaling:
        scores /= math.sqrt(att)
    weights = _softmax(scores)  # (b, h, f, f)
    out = (weights @ v).transpose(0, 2, 1, 3).reshape(b, f, heads * att)
    if use_residual:
        out = out + x @ kernels[3]
    return np.maximum(out, 0), weights


@pytest.mark.generation_specific
@pytest.mark.slow
def test_harness_with_scores():
    run_layer_test(
        InteractingLayer,
        {"num_heads": 2, "key_dim": 4},
        {"inputs": _fields(batch=8)},
        expected_output_shape=((8, 6, 8), (8, 2, 6, 6)),
        expected_num_trainable_weights=4,
        call_kwargs={"return_attention_scores": True},
    )


@pytest.mark.generation_specific
@pytest.mark.slow
def test_harness_scaled_no_residual_with_mask():
    mask = np.ones((8, 6), bool)
    mask[:3, 4:] = False
    run_layer_test(
        InteractingLayer,
        {"num_heads": 3, "key_dim": 2, "use_residual": False, "scaling": True},
        {"inputs": _fields(batch=8), "mask": mask},
        expected_output_shape=(8, 6, 6),
        expected_num_trainable_weights=3,
    )


@pytest.mark.parametrize("use_residual", [True, False])
@pytest.mark.parametrize("scaling", [True, False])
def test_golden(use_residual, scaling):
    heads, att = 2, 3
    layer = InteractingLayer(
        num_heads=heads, key_dim=att, use_residual=use_residual, scaling=scaling
    )
    x = _fields()
    out, weights = layer(x, return_attention_scores=True)
    kernels = [np.asarray(k) for k in layer.kernels]
    expected, expected_weights = _autoint_np(
        x, kernels, heads, att, use_residual, scaling
    )
    np.testing.assert_allclose(
        np.asarray(weights), expected_weights, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)


def test_scaling_changes_the_weights():
    x = _fields()
    plain = InteractingLayer(scaling=False)
    _, w_plain = plain(x, return_attention_scores=True)
    scaled = InteractingLayer(scaling=True)
    scaled(x)
    for a, b in zip(scaled.kernels, plain.kernels):
        a.assign(b)
    _, w_scaled = scaled(x, return_attention_scores=True)
    assert not np.allclose(np.asarray(w_plain), np.asarray(w_scaled))


def test_mask_invariance_and_padded_fields():
    layer = InteractingLayer(num_heads=2, key_dim=4)
    x = _fields()
    mask = np.ones((4, 6), bool)
    mask[1, 3:] = False
    mask[2, 0] = False
    inputs = {"inputs": x, "mask": mask}
    assert_mask_invariant(layer, inputs, target="inputs", padded=~mask)
    out, weights = layer(x, mask=mask, return_attention_scores=True)
    assert np.all(np.asarray(out)[~mask] == 0)
    # No real field attends to a padded one.
    w = np.asarray(weights)
    assert np.all(w[1, :, :, 3:] == 0)
    np.testing.assert_allclose(w[1, :, :3].sum(-1), 1.0, rtol=1e-5)


@pytest.mark.generation_specific
def test_stacks_in_a_functional_model():
    inputs = keras.Input((39, 16))
    h = InteractingLayer(num_heads=2, key_dim=8)(inputs)
    h = InteractingLayer(num_heads=2, key_dim=8)(h)
    model = keras.Model(inputs, h)
    assert model(np.ones((2, 39, 16), "float32")).shape == (2, 39, 16)
    assert len(model.trainable_weights) == 8


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_heads": 0}, "num_heads=0"),
        ({"key_dim": -1}, "key_dim=-1"),
        ({"key_dim": 2.5}, "key_dim=2.5"),
    ],
)
def test_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        InteractingLayer(**kwargs)


def test_input_rank_error():
    with pytest.raises(ValueError, match=r"inputs.shape=\(2, 3\)"):
        InteractingLayer()(np.ones((2, 3), "float32"))


def test_att_dim_is_the_old_spelling_of_key_dim():
    x = _fields()
    new = InteractingLayer(num_heads=2, key_dim=3)
    with pytest.warns(DeprecationWarning, match="use `key_dim=`"):
        old = InteractingLayer(num_heads=2, att_dim=3)
    assert old.key_dim == new.key_dim == 3
    with pytest.warns(DeprecationWarning, match="InteractingLayer.att_dim"):
        assert old.att_dim == 3
    # A config saved before the rename still loads, with the same layer.
    config = {**new.get_config(), "att_dim": 3}
    del config["key_dim"]
    with pytest.warns(DeprecationWarning, match="att_dim"):
        restored = InteractingLayer.from_config(config)
    assert restored.get_config() == new.get_config()
    new(x), restored(x)
    for a, b in zip(restored.kernels, new.kernels):
        a.assign(b)
    np.testing.assert_array_equal(np.asarray(restored(x)), np.asarray(new(x)))
    with pytest.raises(ValueError, match="not both"):
        InteractingLayer(key_dim=3, att_dim=3)


def test_build_ctr_model_takes_att_dim_with_a_warning():
    import pandas as pd

    from keras_attn.features import infer_features
    from keras_attn.models import build_ctr_model

    df = pd.DataFrame({"a": ["x", "y"], "b": [1.0, 2.0], "click": [0, 1]})
    specs = infer_features(df, labels=["click"])
    with pytest.warns(DeprecationWarning, match="build_ctr_model"):
        model = build_ctr_model(specs, ["click"], interacting_layers=1, att_dim=3)
    assert model.interaction[0].key_dim == 3
    with pytest.raises(TypeError, match="unexpected keyword arguments: \\['atd'\\]"):
        build_ctr_model(specs, ["click"], atd=3)


@pytest.mark.generation_specific
def test_a_functional_call_returns_the_weights_too():
    # A symbolic call with return_attention_scores=True gives both tensors (Keras 3
    # reads the structure off compute_output_spec).
    layer = InteractingLayer(num_heads=2, key_dim=3)
    inputs = keras.Input(shape=(5, 4))
    out, weights = layer(inputs, return_attention_scores=True)
    assert tuple(weights.shape) == (None, 2, 5, 5)
    model = keras.Model(inputs, {"out": out, "weights": weights})
    x = _fields(batch=3, fields=5, dim=4)
    expected_out, expected_weights = layer(x, return_attention_scores=True)
    got = model(x)
    np.testing.assert_allclose(got["out"], expected_out, atol=1e-6)
    np.testing.assert_allclose(got["weights"], expected_weights, atol=1e-6)
