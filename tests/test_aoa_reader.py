"""build_aoa_reader: the Attention-over-Attention cloze reader."""

import numpy as np
import pytest

from keras_attn.backend import keras, tf
from keras_attn.layers import CandidateSum
from keras_attn.models import build_aoa_reader

pytestmark = pytest.mark.generation_neutral


def _feeds(doc, query, cands):
    return {
        "document_ids": np.array(doc, "int32"),
        "query_ids": np.array(query, "int32"),
        "candidate_ids": np.array(cands, "int32"),
    }


def test_candidate_sum_matches_numpy():
    rng = np.random.default_rng(0)
    scores = rng.random((3, 6)).astype("float32")
    doc = rng.integers(0, 5, size=(3, 6))
    cands = rng.integers(0, 5, size=(3, 4))
    expected = np.array(
        [
            [scores[b][doc[b] == c].sum() if c != 0 else 0.0 for c in cands[b]]
            for b in range(3)
        ]
    )
    got = CandidateSum()(scores, doc, cands).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_reader_sums_aoa_scores_and_ignores_padding():
    reader = build_aoa_reader(20, embedding_dim=8, units=4)
    feeds = _feeds([[3, 4, 5, 3, 6]], [[4, 7, 8]], [[3, 5, 9]])
    out = reader(feeds)
    probs = out["probabilities"].numpy()
    scores_model = keras.Model(reader.inputs, reader.attention_over_attention.output)
    s = np.asarray(scores_model(feeds))[0]
    np.testing.assert_allclose(probs[0], [s[0] + s[3], s[2], 0.0], rtol=1e-5)
    np.testing.assert_allclose(s.sum(), 1.0, rtol=1e-5)
    assert out["label"].numpy()[0] == probs[0].argmax()
    padded = _feeds([[3, 4, 5, 3, 6, 0, 0]], [[4, 7, 8, 0]], [[3, 5, 9, 0]])
    np.testing.assert_allclose(
        reader(padded)["probabilities"].numpy()[0, :3], probs[0], atol=1e-6
    )


def test_reader_fit_step_lowers_loss():
    reader = build_aoa_reader(20, embedding_dim=8, units=4, dropout=0.0)
    reader.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss={"probabilities": "sparse_categorical_crossentropy"},
    )
    rng = np.random.default_rng(0)
    doc = rng.integers(1, 20, size=(16, 8))
    cands = doc[:, :3].copy()
    query = np.concatenate([doc[:, :1], rng.integers(1, 20, size=(16, 2))], axis=1)
    y = np.zeros(16, "int32")  # the candidate that also appears in the query
    ds = tf.data.Dataset.from_tensor_slices(
        (_feeds(doc, query, cands), {"probabilities": y, "label": y})
    ).batch(8)
    losses = reader.fit(ds, epochs=5, verbose=0).history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
