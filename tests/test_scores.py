"""AttentionScore: every score against its formula in NumPy, the harness, bad input."""

import numpy as np
import pytest

from keras_attn.layers import SCORES, AttentionScore
from tests.harness import run_layer_test

pytestmark = pytest.mark.generation_neutral

RNG = np.random.default_rng(7)
Q = RNG.normal(size=(2, 3, 4)).astype("float32")
K = RNG.normal(size=(2, 5, 4)).astype("float32")
K6 = RNG.normal(size=(2, 5, 6)).astype("float32")


def _numpy_score(layer, score, q, k):
    if score == "dot":
        return np.einsum("bqd,bkd->bqk", q, k)
    if score == "scaled_dot":
        return np.einsum("bqd,bkd->bqk", q, k) / np.sqrt(k.shape[-1])
    if score == "cosine":
        qn = q / np.linalg.norm(q, axis=-1, keepdims=True)
        kn = k / np.linalg.norm(k, axis=-1, keepdims=True)
        return np.einsum("bqd,bkd->bqk", qn, kn)
    if score == "general":
        w = layer.kernel.numpy()
        return np.einsum("bqd,de,bke->bqk", q, w, k)
    if score == "additive":
        w1, w2 = layer.query_kernel.numpy(), layer.key_kernel.numpy()
        b, v = layer.bias.numpy(), layer.score_kernel.numpy()
        out = np.zeros((q.shape[0], q.shape[1], k.shape[1]), "float64")
        for n in range(q.shape[0]):
            for i in range(q.shape[1]):
                for j in range(k.shape[1]):
                    out[n, i, j] = v @ np.tanh(w1.T @ q[n, i] + w2.T @ k[n, j] + b)
        return out
    if score == "location":
        w, b = layer.kernel.numpy(), layer.bias.numpy()
        return (np.einsum("bqd,dl->bql", q, w) + b)[..., : k.shape[1]]
    raise AssertionError(score)


@pytest.mark.parametrize("score", SCORES)
def test_score_matches_formula(score):
    layer = AttentionScore(score=score, bias_initializer="random_normal")
    key = K6 if score in ("general", "additive", "location") else K
    got = layer(Q, key).numpy()
    assert got.shape == (2, 3, 5)
    np.testing.assert_allclose(got, _numpy_score(layer, score, Q, key), atol=1e-5)


def test_cosine_is_bounded_and_zero_vectors_stay_finite():
    layer = AttentionScore(score="cosine")
    k = K.copy()
    k[0, 0] = 0.0
    got = layer(Q, k).numpy()
    assert np.all(np.isfinite(got)) and np.all(np.abs(got) <= 1 + 1e-6)
    np.testing.assert_allclose(got[0, :, 0], 0.0)


def test_location_covers_shorter_keys_and_rejects_longer():
    layer = AttentionScore(score="location", max_length=5)
    assert layer(Q, K[:, :3]).shape == (2, 3, 3)
    with pytest.raises(ValueError, match="max_length=5"):
        layer(Q, np.zeros((2, 7, 4), "float32"))


@pytest.mark.generation_specific
@pytest.mark.slow
@pytest.mark.parametrize(
    "score,weights", [("scaled_dot", 0), ("additive", 4), ("general", 1)]
)
def test_harness(score, weights):
    key = K if score == "scaled_dot" else K6
    run_layer_test(
        AttentionScore,
        {"score": score, "units": 8},
        {"query": Q, "key": key},
        expected_output_shape=(2, 3, 5),
        expected_num_trainable_weights=weights,
        run_fit=weights > 0,
    )


def test_unknown_score():
    with pytest.raises(ValueError, match=r"`score` must be one of .*score='bahdanau'"):
        AttentionScore(score="bahdanau")


@pytest.mark.parametrize("arg", ["units", "max_length"])
def test_non_positive_sizes(arg):
    with pytest.raises(ValueError, match=rf"`{arg}` must be a positive integer.*=0"):
        AttentionScore(**{arg: 0})


@pytest.mark.parametrize("score", ["dot", "scaled_dot", "cosine"])
def test_mismatched_dims_name_both_shapes(score):
    with pytest.raises(
        ValueError, match=r"query.shape=\(2, 3, 4\).*key.shape=\(2, 5, 6\)"
    ):
        AttentionScore(score=score)(Q, K6)
