"""AttentionOverAttention (Cui et al. 2017) and DocumentAttention (Kadlec et al.
2016), the cloze readers' heads."""

import numpy as np
import pytest

from keras_attn.layers.aoa import AttentionOverAttention, DocumentAttention
from tests.harness import assert_mask_invariant, run_layer_test

pytestmark = pytest.mark.generation_neutral


def _softmax(x, mask, axis):
    x = np.where(mask, x, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(axis, keepdims=True))
        p = e / e.sum(axis, keepdims=True)
    return np.where(mask, np.nan_to_num(p), 0.0)


def _aoa(doc, query, doc_mask, query_mask):
    m = np.einsum("bid,bjd->bij", doc, query)
    pair = doc_mask[:, :, None] & query_mask[:, None, :]
    alpha = _softmax(m, pair, axis=1)
    beta = _softmax(m, pair, axis=2)
    out = np.zeros(doc.shape[:2])
    for b in range(doc.shape[0]):
        real = doc_mask[b]
        if real.any():
            beta_bar = beta[b][real].mean(0)  # over real document words only
            out[b] = alpha[b] @ beta_bar
    return out, alpha, beta


def _data(seed=0):
    rng = np.random.default_rng(seed)
    doc = rng.normal(size=(3, 7, 4)).astype("float32")
    query = rng.normal(size=(3, 3, 4)).astype("float32")
    doc_mask = np.arange(7)[None] < np.array([[7], [4], [0]])
    query_mask = np.arange(3)[None] < np.array([[3], [2], [2]])
    return doc, query, doc_mask, query_mask


@pytest.mark.generation_specific
@pytest.mark.slow
def test_aoa_harness():
    doc, query, doc_mask, query_mask = _data()
    run_layer_test(
        AttentionOverAttention,
        {},
        {
            "document": doc,
            "query": query,
            "document_mask": doc_mask,
            "query_mask": query_mask,
        },
        [(3, 7), (3, 7, 3), (3, 7, 3)],
        expected_num_trainable_weights=0,
        call_kwargs={"return_attention_scores": True},
    )


def test_aoa_golden():
    doc, query, doc_mask, query_mask = _data(1)
    s, alpha, beta = AttentionOverAttention()(
        doc,
        query,
        document_mask=doc_mask,
        query_mask=query_mask,
        return_attention_scores=True,
    )
    s_ref, alpha_ref, beta_ref = _aoa(doc, query, doc_mask, query_mask)
    np.testing.assert_allclose(alpha.numpy(), alpha_ref, atol=1e-5)
    np.testing.assert_allclose(beta.numpy(), beta_ref, atol=1e-5)
    np.testing.assert_allclose(s.numpy(), s_ref, atol=1e-5)
    # s is a distribution over the real document words; an empty document is zeros.
    np.testing.assert_allclose(s.numpy()[:2].sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(s.numpy()[2], np.zeros(7))
    assert np.all(s.numpy()[1, 4:] == 0)


def test_aoa_without_masks():
    doc, query, _, _ = _data(2)
    ones_d, ones_q = np.ones(doc.shape[:2], bool), np.ones(query.shape[:2], bool)
    s = AttentionOverAttention()(doc, query).numpy()
    np.testing.assert_allclose(s, _aoa(doc, query, ones_d, ones_q)[0], atol=1e-5)


def test_aoa_mask_invariance():
    doc, query, doc_mask, query_mask = _data(3)
    layer = AttentionOverAttention()
    inputs = {
        "document": doc,
        "query": query,
        "document_mask": doc_mask,
        "query_mask": query_mask,
    }
    assert_mask_invariant(layer, inputs, "document", ~doc_mask)
    assert_mask_invariant(layer, inputs, "query", ~query_mask)


def test_aoa_validation():
    with pytest.raises(ValueError, match=r"document.shape=\(2, 5, 4\), query.shape"):
        AttentionOverAttention()(
            np.zeros((2, 5, 4), "float32"), np.zeros((2, 3, 6), "float32")
        )
    with pytest.raises(ValueError, match="query_mask"):
        AttentionOverAttention()(
            np.zeros((2, 5, 4), "float32"),
            np.zeros((2, 3, 4), "float32"),
            query_mask=np.ones((2, 4), bool),
        )


# DocumentAttention: the Attention Sum Reader's head (Kadlec et al. 2016).


def _document_attention(doc, query, doc_mask, query_mask):
    out = np.zeros(doc.shape[:2])
    for b in range(doc.shape[0]):
        if not doc_mask[b].any() or not query_mask[b].any():
            continue
        q = query[b][query_mask[b]].mean(0)  # the mean of the marked positions
        logits = doc[b] @ q
        e = np.exp(logits - logits[doc_mask[b]].max()) * doc_mask[b]
        out[b] = e / e.sum()
    return out


@pytest.mark.generation_specific
@pytest.mark.slow
def test_document_attention_harness():
    doc, query, doc_mask, query_mask = _data()
    run_layer_test(
        DocumentAttention,
        {},
        {
            "document": doc,
            "query": query,
            "document_mask": doc_mask,
            "query_mask": query_mask,
        },
        (3, 7),
        expected_num_trainable_weights=0,
    )


def test_document_attention_golden():
    doc, query, doc_mask, _ = _data(4)
    # Row 1 pools two query positions, row 2 has an empty document.
    query_mask = np.array([[False, True, False], [True, False, True], [True] * 3])
    s = DocumentAttention()(
        doc, query, document_mask=doc_mask, query_mask=query_mask
    ).numpy()
    np.testing.assert_allclose(
        s, _document_attention(doc, query, doc_mask, query_mask), atol=1e-5
    )
    np.testing.assert_allclose(s[:2].sum(-1), 1.0, atol=1e-5)
    assert np.all(s[1, 4:] == 0) and np.all(s[2] == 0)
    # Without masks: every position of both, the query's plain mean.
    ones_d, ones_q = np.ones(doc.shape[:2], bool), np.ones(query.shape[:2], bool)
    np.testing.assert_allclose(
        DocumentAttention()(doc, query).numpy(),
        _document_attention(doc, query, ones_d, ones_q),
        atol=1e-5,
    )


def test_document_attention_empty_query_gives_zeros():
    doc, query, doc_mask, _ = _data(5)
    query_mask = np.array([[True, False, False], [False] * 3, [False] * 3])
    s = DocumentAttention()(
        doc, query, document_mask=np.ones_like(doc_mask), query_mask=query_mask
    ).numpy()
    assert np.isfinite(s).all() and np.all(s[1:] == 0)
    np.testing.assert_allclose(s[0].sum(), 1.0, atol=1e-5)


def test_document_attention_mask_invariance():
    doc, query, doc_mask, _ = _data(6)
    query_mask = np.array([[True, False, False], [False, True, True], [True] * 3])
    inputs = {
        "document": doc,
        "query": query,
        "document_mask": doc_mask,
        "query_mask": query_mask,
    }
    layer = DocumentAttention()
    assert_mask_invariant(layer, inputs, "document", ~doc_mask)
    assert_mask_invariant(layer, inputs, "query", ~query_mask)


def test_document_attention_validation():
    with pytest.raises(ValueError, match=r"document.shape=\(2, 5, 4\), query.shape"):
        DocumentAttention()(
            np.zeros((2, 5, 4), "float32"), np.zeros((2, 3, 6), "float32")
        )
    with pytest.raises(ValueError, match="document_mask"):
        DocumentAttention()(
            np.zeros((2, 5, 4), "float32"),
            np.zeros((2, 3, 4), "float32"),
            document_mask=np.ones((2, 4), bool),
        )
