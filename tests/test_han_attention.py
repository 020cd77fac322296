"""HierarchicalAttentionPooling: HAN word and sentence attention."""

import numpy as np
import pytest

from keras_attn.layers.han import HierarchicalAttentionPooling
from tests.harness import assert_mask_invariant, run_layer_test

pytestmark = pytest.mark.generation_neutral

B, S, W, D = 3, 4, 5, 6


def _data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(B, S, W, D)).astype("float32")
    lengths = np.array([[5, 3, 0, 2], [1, 0, 0, 0], [0, 0, 0, 0]])
    mask = np.arange(W)[None, None, :] < lengths[..., None]
    return x, mask


def _pool(x, mask, kernel, bias, context):
    scores = np.tanh(x @ kernel + bias) @ context
    scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights = weights / weights.sum(-1, keepdims=True)
    weights = np.where(mask, np.nan_to_num(weights), 0.0)
    return (weights[..., None] * x).sum(-2), weights


@pytest.mark.generation_specific
@pytest.mark.slow
def test_han_harness():
    x, mask = _data()
    run_layer_test(
        HierarchicalAttentionPooling,
        {"units": 7, "sentence_units": 3, "dropout": 0.1},
        {"inputs": x, "mask": mask},
        [(B, D), (B, S, W), (B, S)],
        expected_num_trainable_weights=6,
        call_kwargs={"return_attention_scores": True},
    )


def test_han_golden_with_empty_sentences_and_documents():
    x, mask = _data(1)
    layer = HierarchicalAttentionPooling(units=7)
    doc, word_w, sent_w = layer(x, mask=mask, return_attention_scores=True)
    wa, sa = layer.word_attention, layer.sentence_attention
    sentences, word_ref = _pool(
        x, mask, wa.kernel.numpy(), wa.bias.numpy(), wa.context.numpy()
    )
    sentence_mask = mask.any(-1)
    doc_ref, sent_ref = _pool(
        sentences, sentence_mask, sa.kernel.numpy(), sa.bias.numpy(), sa.context.numpy()
    )
    np.testing.assert_allclose(word_w.numpy(), word_ref, atol=1e-5)
    np.testing.assert_allclose(sent_w.numpy(), sent_ref, atol=1e-5)
    np.testing.assert_allclose(doc.numpy(), doc_ref, atol=1e-5)
    # The empty sentence gets no weight; the empty document is exactly zero.
    assert sent_w.numpy()[0, 2] == 0 and sent_w.numpy()[1, 1:].sum() == 0
    np.testing.assert_array_equal(doc.numpy()[2], np.zeros(D))
    np.testing.assert_allclose(sent_w.numpy()[:2].sum(-1), 1.0, atol=1e-6)
    assert np.all(np.isfinite(doc.numpy()))


def test_han_sentence_mask_and_invariance():
    x, mask = _data(2)
    layer = HierarchicalAttentionPooling(units=4)
    sentence_mask = np.array([[1, 0, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]], bool)
    _, _, sent_w = layer(
        x, mask=mask, sentence_mask=sentence_mask, return_attention_scores=True
    )
    assert sent_w.numpy()[0, 1] == 0 and sent_w.numpy()[0, 0] > 0
    padded = ~(mask & sentence_mask[..., None])
    assert_mask_invariant(
        layer,
        {"inputs": x, "mask": mask, "sentence_mask": sentence_mask},
        "inputs",
        padded,
    )


def test_han_nonlinear_values_golden_and_config():
    x, mask = _data(3)
    layer = HierarchicalAttentionPooling(
        units=4, bias_initializer="random_normal", value_transform="nonlinear"
    )
    doc = layer(x, mask=mask).numpy()
    wa, sa = layer.word_attention, layer.sentence_attention
    assert wa.value_transform == sa.value_transform == "nonlinear"

    def pool(h, m, level):
        _, w = _pool(
            h, m, level.kernel.numpy(), level.bias.numpy(), level.context.numpy()
        )
        v = np.tanh(h @ level.value_kernel.numpy() + level.value_bias.numpy())
        return (w[..., None] * v).sum(-2)

    doc_ref = pool(pool(x, mask, wa), mask.any(-1), sa)
    np.testing.assert_allclose(doc, doc_ref, atol=1e-5)
    np.testing.assert_array_equal(doc[2], np.zeros(D))  # the empty document
    config = layer.get_config()
    assert config["value_transform"] == "nonlinear"
    assert HierarchicalAttentionPooling.from_config(config).value_transform == (
        "nonlinear"
    )
    with pytest.raises(ValueError, match="value_transform='relu'"):
        HierarchicalAttentionPooling(units=3, value_transform="relu")


def test_han_has_no_python_loop_over_sentences():
    # One word-attention call covers every sentence: its weights are shared, and a
    # document with many sentences traces the same ops as one with few.
    layer = HierarchicalAttentionPooling(units=4)
    layer(np.zeros((1, 50, 3, D), "float32"))
    assert len(layer.trainable_weights) == 6


def test_han_validation():
    with pytest.raises(ValueError, match="units=0"):
        HierarchicalAttentionPooling(units=0)
    with pytest.raises(ValueError, match="dropout=-0.1"):
        HierarchicalAttentionPooling(units=3, dropout=-0.1)
    with pytest.raises(ValueError, match=r"inputs.shape=\(2, 3, 4\)"):
        HierarchicalAttentionPooling(units=3)(np.zeros((2, 3, 4), "float32"))
    layer = HierarchicalAttentionPooling(units=3)
    with pytest.raises(ValueError, match="sentence_mask"):
        layer(np.zeros((2, 3, 4, 5), "float32"), sentence_mask=np.ones((2, 4), bool))
