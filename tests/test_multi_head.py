"""MultiHeadAttention / MultiHeadSelfAttention: equality with Keras' own layer, the
formula, masks, the harness, bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_attn.backend import keras
from keras_attn.layers import MultiHeadAttention, MultiHeadSelfAttention
from tests.harness import assert_mask_invariant, run_layer_test

pytestmark = pytest.mark.generation_neutral

RNG = np.random.default_rng(11)
Q = RNG.normal(size=(3, 4, 8)).astype("float32")
V = RNG.normal(size=(3, 6, 8)).astype("float32")
VALUE_MASK = np.array([[1] * 6, [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]], bool)


def _copy_from_keras(ours, theirs):
    mine, ref = ours.get_weights(), theirs.get_weights()
    assert [w.shape for w in mine] == [w.shape for w in ref]
    ours.set_weights(ref)


@pytest.mark.generation_specific
@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_heads": 2, "key_dim": 4},
        {"num_heads": 3, "key_dim": 5, "value_dim": 2, "output_shape": 7},
        {"num_heads": 2, "key_dim": 4, "use_bias": False},
    ],
)
def test_same_output_as_keras_multi_head_attention(kwargs):
    ref = keras.layers.MultiHeadAttention(
        bias_initializer="random_normal" if kwargs.get("use_bias", True) else "zeros",
        **kwargs,
    )
    ours = MultiHeadAttention(**kwargs)
    key = RNG.normal(size=V.shape).astype("float32")
    attention_mask = np.broadcast_to(VALUE_MASK[:, None, :], (3, 4, 6))
    expected, expected_w = ref(
        Q, V, key=key, attention_mask=attention_mask, return_attention_scores=True
    )
    ours(Q, V, key=key)
    _copy_from_keras(ours, ref)
    got, got_w = ours(
        Q, V, key=key, value_mask=VALUE_MASK, return_attention_scores=True
    )
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-5)
    np.testing.assert_allclose(got_w.numpy(), expected_w.numpy(), atol=1e-5)


@pytest.mark.generation_specific
def test_same_output_as_keras_with_causal_mask():
    x = RNG.normal(size=(2, 5, 8)).astype("float32")
    ref = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    ours = MultiHeadSelfAttention(num_heads=2, key_dim=4)
    expected = ref(x, x, use_causal_mask=True)
    ours(x)
    _copy_from_keras(ours, ref)
    np.testing.assert_allclose(
        ours(x, use_causal_mask=True).numpy(), expected.numpy(), atol=1e-5
    )


def test_matches_formula_in_numpy():
    layer = MultiHeadAttention(num_heads=2, key_dim=3, bias_initializer="random_normal")
    out, weights = layer(Q, V, value_mask=VALUE_MASK, return_attention_scores=True)
    wq, bq, wk, bk, wv, bv, wo, bo = layer.get_weights()
    q = np.einsum("bqd,dhe->bqhe", Q, wq) + bq
    k = np.einsum("bsd,dhe->bshe", V, wk) + bk
    v = np.einsum("bsd,dhe->bshe", V, wv) + bv
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(3)
    scores = np.where(VALUE_MASK[:, None, None, :], scores, -np.inf)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    ctx = np.einsum("bhqk,bkhd->bqhd", w, v)
    expected = np.einsum("bqhd,hdo->bqo", ctx, wo) + bo
    np.testing.assert_allclose(weights.numpy(), w, atol=1e-6)
    np.testing.assert_allclose(out.numpy(), expected, atol=1e-5)


def test_fully_padded_query_rows_give_zero_weights_and_bias_output():
    layer = MultiHeadAttention(num_heads=2, key_dim=4, bias_initializer="random_normal")
    query_mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]], bool)
    out, weights = layer(
        Q, V, query_mask=query_mask, value_mask=VALUE_MASK, return_attention_scores=True
    )
    assert np.all(np.isfinite(out.numpy()))
    np.testing.assert_array_equal(weights.numpy()[2], 0.0)
    np.testing.assert_array_equal(weights.numpy()[1, :, 2:], 0.0)
    bias = layer.output_dense.get_weights()[1]
    np.testing.assert_allclose(out.numpy()[2], np.broadcast_to(bias, (4, 8)), atol=1e-6)


def test_explicit_attention_mask_combines_with_padding():
    attention_mask = np.ones((3, 4, 6), bool)
    attention_mask[:, 0, 0] = False
    _, w = MultiHeadAttention(num_heads=2, key_dim=4)(
        Q,
        V,
        value_mask=VALUE_MASK,
        attention_mask=attention_mask,
        return_attention_scores=True,
    )
    w = w.numpy()
    np.testing.assert_array_equal(w[:, :, 0, 0], 0.0)
    np.testing.assert_array_equal(w[1, :, :, 3:], 0.0)
    np.testing.assert_allclose(w[0].sum(-1), 1.0, atol=1e-6)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000))
def test_padded_positions_change_nothing(seed):
    layer = MultiHeadSelfAttention(num_heads=2, key_dim=4)
    x = np.concatenate([Q, Q[:, :2]], axis=1)  # (3, 6, 8)
    inputs = {"inputs": x, "mask": VALUE_MASK}
    assert_mask_invariant(layer, inputs, "inputs", ~VALUE_MASK, seed=seed)


@pytest.mark.generation_specific
def test_self_attention_reads_the_keras_mask():
    ids = keras.Input((6,), dtype="int32")
    embedding = keras.layers.Embedding(20, 8, mask_zero=True)
    attention = MultiHeadSelfAttention(num_heads=2, key_dim=4)
    model = keras.Model(ids, attention(embedding(ids)))
    tokens = np.where(VALUE_MASK, RNG.integers(1, 20, size=(3, 6)), 0)
    explicit = attention(embedding(tokens), mask=tokens != 0).numpy()
    np.testing.assert_allclose(model(tokens).numpy(), explicit, atol=1e-6)


@pytest.mark.generation_specific
@pytest.mark.slow
def test_multi_head_attention_harness():
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 4, "value_dim": 3, "dropout": 0.1},
        {"query": Q, "value": V, "value_mask": VALUE_MASK},
        expected_output_shape=[(3, 4, 8), (3, 2, 4, 6)],
        expected_num_trainable_weights=8,
        call_kwargs={"return_attention_scores": True},
    )


@pytest.mark.generation_specific
@pytest.mark.slow
def test_multi_head_self_attention_harness():
    run_layer_test(
        MultiHeadSelfAttention,
        {"num_heads": 2, "key_dim": 4, "output_shape": 5},
        {"inputs": V, "mask": VALUE_MASK},
        expected_output_shape=(3, 6, 5),
        expected_num_trainable_weights=8,
        call_kwargs={"use_causal_mask": True},
    )


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"num_heads": 0, "key_dim": 4}, r"`num_heads` must be a positive integer.*=0"),
        ({"num_heads": 2, "key_dim": -3}, r"`key_dim` must be a positive.*=-3"),
        ({"num_heads": 2, "key_dim": 4, "value_dim": 0}, r"`value_dim`.*=0"),
        ({"num_heads": 2, "key_dim": 4, "dropout": -0.1}, r"`dropout`.*-0.1"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(**kwargs)


def test_bad_shapes_name_both_values():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    with pytest.raises(ValueError, match=r"`value_mask` must have shape .*\(3, 5\)"):
        layer(Q, V, value_mask=np.ones((3, 5), bool))
    with pytest.raises(ValueError, match=r"key.shape=\(3, 5, 8\).*value.shape=\(3, 6"):
        MultiHeadAttention(num_heads=2, key_dim=4)(Q, V, key=V[:, :5])
    with pytest.raises(ValueError, match=r"query.shape=\(3, 8\)"):
        MultiHeadAttention(num_heads=2, key_dim=4)(Q[:, 0], V)
