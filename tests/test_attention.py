"""Attention and ContextAttentionPooling: formulas, masks, the harness, bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_attn.backend import keras
from keras_attn.layers import Attention, ContextAttentionPooling
from tests.harness import assert_mask_invariant, run_layer_test

pytestmark = pytest.mark.generation_neutral

RNG = np.random.default_rng(3)
Q = RNG.normal(size=(3, 4, 6)).astype("float32")
V = RNG.normal(size=(3, 5, 6)).astype("float32")
VALUE_MASK = np.array(
    [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]], bool
)  # the last row has no real position


def _softmax(x, mask):
    x = np.where(mask, x, -np.inf)
    m = np.max(x, -1, keepdims=True)
    e = np.where(mask, np.exp(x - np.where(np.isfinite(m), m, 0)), 0.0)
    s = e.sum(-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def test_dot_attention_matches_formula_with_masks():
    layer = Attention(score="dot")
    query_mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]], bool)
    out, weights = layer(
        Q, V, query_mask=query_mask, value_mask=VALUE_MASK, return_attention_scores=True
    )
    expected_w = _softmax(np.einsum("bqd,bkd->bqk", Q, V), VALUE_MASK[:, None, :])
    expected_w *= query_mask[:, :, None]
    np.testing.assert_allclose(weights.numpy(), expected_w, atol=1e-6)
    np.testing.assert_allclose(
        out.numpy(), np.einsum("bqk,bkd->bqd", expected_w, V), atol=1e-5
    )
    # Fully padded value row and padded queries: zeros, not NaN, not uniform.
    np.testing.assert_array_equal(out.numpy()[2], 0.0)
    np.testing.assert_array_equal(out.numpy()[0, 3], 0.0)


def test_key_differs_from_value():
    k = RNG.normal(size=(3, 5, 6)).astype("float32")
    out = Attention(score="scaled_dot")(Q, V, key=k).numpy()
    w = _softmax(np.einsum("bqd,bkd->bqk", Q, k) / np.sqrt(6), np.ones((1, 1, 5), bool))
    np.testing.assert_allclose(out, np.einsum("bqk,bkd->bqd", w, V), atol=1e-5)


def test_causal_mask():
    x = RNG.normal(size=(2, 4, 6)).astype("float32")
    _, weights = Attention()(x, x, use_causal_mask=True, return_attention_scores=True)
    np.testing.assert_array_equal(np.triu(weights.numpy()[0], k=1), 0.0)
    np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, atol=1e-6)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000), score=st.sampled_from(["dot", "additive", "general"]))
def test_padded_values_change_nothing(seed, score):
    layer = Attention(score=score)
    inputs = {"query": Q, "value": V, "value_mask": VALUE_MASK}
    assert_mask_invariant(layer, inputs, "value", ~VALUE_MASK, seed=seed)


@pytest.mark.generation_specific
def test_mask_from_embedding_mask_zero_is_used():
    ids = keras.Input((5,), dtype="int32")
    q_in = keras.Input((4, 6))
    embedding = keras.layers.Embedding(10, 6, mask_zero=True)
    attention = Attention()
    model = keras.Model([q_in, ids], attention(q_in, embedding(ids)))
    tokens = np.array([[3, 4, 0, 0, 0], [1, 2, 3, 0, 0], [5, 6, 7, 8, 9]])
    values = embedding(tokens)
    explicit = attention(Q, values, value_mask=tokens != 0).numpy()
    unmasked = attention(Q, values, value_mask=np.ones_like(tokens, bool)).numpy()
    got = model([Q, tokens]).numpy()
    np.testing.assert_allclose(got, explicit, atol=1e-6)
    assert not np.allclose(got[:2], unmasked[:2])


@pytest.mark.generation_specific
@pytest.mark.slow
def test_attention_harness():
    run_layer_test(
        Attention,
        {"score": "additive", "units": 8, "dropout": 0.1},
        {"query": Q, "value": V, "value_mask": VALUE_MASK},
        expected_output_shape=[(3, 4, 6), (3, 4, 5)],
        expected_num_trainable_weights=4,
        call_kwargs={"return_attention_scores": True},
    )


def test_attention_bad_arguments():
    with pytest.raises(ValueError, match="`score` must be one of"):
        Attention(score="luong")
    with pytest.raises(ValueError, match=r"`dropout` must be a float in \[0, 1\).*1.5"):
        Attention(dropout=1.5)
    with pytest.raises(ValueError, match=r"`value_mask` must have shape .*\(3, 4\)"):
        Attention()(Q, V, value_mask=np.ones((3, 4), bool))


# ContextAttentionPooling ---------------------------------------------------------


def _np_context_pooling(layer, h, mask):
    w, b, u = layer.kernel.numpy(), layer.bias.numpy(), layer.context.numpy()
    scores = np.tanh(h @ w + b) @ u
    a = _softmax(scores, mask)
    return np.einsum("...t,...td->...d", a, h), a


def test_context_pooling_matches_formula():
    layer = ContextAttentionPooling(units=5, bias_initializer="random_normal")
    out, weights = layer(V, mask=VALUE_MASK, return_attention_scores=True)
    exp_out, exp_w = _np_context_pooling(layer, V, VALUE_MASK)
    np.testing.assert_allclose(weights.numpy(), exp_w, atol=1e-6)
    np.testing.assert_allclose(out.numpy(), exp_out, atol=1e-5)
    np.testing.assert_array_equal(out.numpy()[2], 0.0)


def test_context_pooling_pools_every_sentence_of_4d_input():
    docs = RNG.normal(size=(2, 3, 5, 6)).astype("float32")
    mask = np.ones((2, 3, 5), bool)
    mask[0, 1] = False  # an empty sentence
    mask[1, :, 2:] = False
    layer = ContextAttentionPooling(units=4)
    out = layer(docs, mask=mask).numpy()
    assert out.shape == (2, 3, 6)
    for d in range(2):
        for s in range(3):
            ref, _ = _np_context_pooling(layer, docs[d, s], mask[d, s])
            np.testing.assert_allclose(out[d, s], ref, atol=1e-5)
    np.testing.assert_array_equal(out[0, 1], 0.0)
    sentence_mask = layer.compute_mask(docs, mask).numpy()
    np.testing.assert_array_equal(sentence_mask, [[1, 0, 1], [1, 1, 1]])


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000))
def test_context_pooling_padded_steps_change_nothing(seed):
    layer = ContextAttentionPooling(units=4)
    inputs = {"inputs": V, "mask": VALUE_MASK}
    assert_mask_invariant(layer, inputs, "inputs", ~VALUE_MASK, seed=seed)


@pytest.mark.generation_specific
@pytest.mark.slow
@pytest.mark.parametrize(("value_transform", "weights"), [(None, 3), ("nonlinear", 5)])
def test_context_pooling_harness(value_transform, weights):
    run_layer_test(
        ContextAttentionPooling,
        {"units": 8, "value_transform": value_transform},
        {"inputs": V, "mask": VALUE_MASK},
        expected_output_shape=[(3, 6), (3, 5)],
        expected_num_trainable_weights=weights,
        call_kwargs={"return_attention_scores": True},
    )


@pytest.mark.parametrize("value_transform", ["linear", "nonlinear"])
def test_context_pooling_value_transform_matches_formula(value_transform):
    layer = ContextAttentionPooling(
        units=5, bias_initializer="random_normal", value_transform=value_transform
    )
    out, weights = layer(V, mask=VALUE_MASK, return_attention_scores=True)
    # The scores still come from the raw states; only what is pooled changes.
    _, exp_w = _np_context_pooling(layer, V, VALUE_MASK)
    values = V @ layer.value_kernel.numpy() + layer.value_bias.numpy()
    if value_transform == "nonlinear":
        values = np.tanh(values)
    np.testing.assert_allclose(weights.numpy(), exp_w, atol=1e-6)
    np.testing.assert_allclose(
        out.numpy(), np.einsum("bt,btd->bd", exp_w, values), atol=1e-5
    )
    np.testing.assert_array_equal(out.numpy()[2], 0.0)  # no real step: zeros
    # A different value transform gives a different output from the same weights.
    assert np.abs(out.numpy()[:2] - np.einsum("bt,btd->bd", exp_w, V)[:2]).max() > 1e-3


def test_context_pooling_value_transform_config_and_validation():
    layer = ContextAttentionPooling(units=4, use_bias=False, value_transform="linear")
    out = layer(V)
    assert layer.value_bias is None and len(layer.trainable_weights) == 3
    clone = ContextAttentionPooling.from_config(layer.get_config())
    assert clone.get_config()["value_transform"] == "linear"
    clone(V)
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(clone(V).numpy(), out.numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="`value_transform` must be one of.*'tanh'"):
        ContextAttentionPooling(units=4, value_transform="tanh")


def test_context_pooling_bad_arguments():
    with pytest.raises(ValueError, match="`units` must be a positive integer.*-1"):
        ContextAttentionPooling(units=-1)
    with pytest.raises(ValueError, match=r"inputs.shape=\(3, 6\)"):
        ContextAttentionPooling(units=2)(V[:, 0])
    with pytest.raises(ValueError, match=r"`mask` must have shape"):
        ContextAttentionPooling(units=2)(V, mask=np.ones((3, 4), bool))


@pytest.mark.generation_specific
def test_context_pooling_passes_sentence_mask_in_a_functional_model():
    # (batch, sentences, words) ids -> Embedding(mask_zero) -> word pooling gives the
    # sentence mask, which the sentence-level pooling must then use.
    ids = keras.Input((3, 4), dtype="int32")
    words = keras.layers.Embedding(20, 6, mask_zero=True)(ids)
    word_pool = ContextAttentionPooling(units=4)
    sentence_pool = ContextAttentionPooling(units=4)
    model = keras.Model(ids, sentence_pool(word_pool(words)))
    tokens = np.array([[[1, 2, 0, 0], [0, 0, 0, 0], [3, 0, 0, 0]]] * 2)
    emb = model.layers[1](tokens)
    sentences = word_pool(emb, mask=tokens != 0)
    expected = sentence_pool(sentences, mask=(tokens != 0).any(-1)).numpy()
    np.testing.assert_allclose(model(tokens).numpy(), expected, atol=1e-6)
