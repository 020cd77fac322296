"""Disagreement regularization (Li et al., EMNLP 2018) on MultiHeadAttention."""

import numpy as np
import pytest

from keras_attn.backend import keras, tf
from keras_attn.layers.multi_head import MultiHeadAttention, MultiHeadSelfAttention
from tests.harness import run_layer_test

pytestmark = pytest.mark.generation_neutral

D = 4


def _layer(disagreement, rotate, weight=1.0, **kwargs):
    """Two heads with equal query/key kernels; value heads equal, or rotated by 90°
    (so at every position head 1's value is orthogonal to head 0's)."""
    layer = MultiHeadAttention(
        num_heads=2,
        key_dim=2,
        disagreement=disagreement,
        disagreement_weight=weight,
        **kwargs,
    )
    x = np.zeros((1, 3, D), "float32")
    layer(x, x)
    rng = np.random.default_rng(0)
    qk = rng.normal(size=(D, 1, 2)).astype("float32")
    base = rng.normal(size=(D, 2)).astype("float32")
    second = base @ np.array([[0, 1], [-1, 0]], "float32") if rotate else base
    value = np.stack([base, second], axis=1)
    layer.query_dense.kernel.assign(np.concatenate([qk, qk], axis=1))
    layer.key_dense.kernel.assign(np.concatenate([qk, qk * 2], axis=1))
    layer.value_dense.kernel.assign(value)
    return layer


def _loss(layer, x, **kwargs):
    out = layer(x, x, return_attention_scores=True, **kwargs)
    assert len(layer.losses) == 1
    return float(layer.losses[0]), out


@pytest.mark.parametrize("disagreement", ["subspace", "output"])
def test_identical_vs_orthogonal_heads(disagreement):
    x = np.random.default_rng(1).normal(size=(2, 5, D)).astype("float32")
    same = _layer(disagreement, rotate=False)
    ortho = _layer(disagreement, rotate=True)
    if disagreement == "output":
        # Output heads are orthogonal only when both heads weigh positions alike.
        for layer in (same, ortho):
            layer.key_dense.kernel.assign(layer.query_dense.kernel)
    # Mean of cos over the 4 pairs (i, j): identical 1, orthogonal (1 + 1 + 0 + 0) / 4.
    np.testing.assert_allclose(_loss(same, x)[0], 1.0, atol=1e-5)
    np.testing.assert_allclose(_loss(ortho, x)[0], 0.5, atol=1e-5)
    scaled = _layer(disagreement, rotate=True, weight=0.3)
    if disagreement == "output":
        scaled.key_dense.kernel.assign(scaled.query_dense.kernel)
    np.testing.assert_allclose(_loss(scaled, x)[0], 0.15, atol=1e-5)


def _position_similarity(weights, query_valid):
    # 1/H² Σ_ij Σ_k A^i_qk A^j_qk, averaged over the real queries.
    h = weights.shape[1]
    per_query = np.einsum("biqk,bjqk->bq", weights, weights) / h**2
    return per_query[query_valid].mean()


def test_position_formula_and_masks():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 6, D)).astype("float32")
    real = np.arange(6)[None] < np.array([[6], [3]])
    layer = MultiHeadAttention(num_heads=3, key_dim=2, disagreement="position")
    loss, (_, weights) = _loss(layer, x, query_mask=real, value_mask=real)
    np.testing.assert_allclose(
        loss, _position_similarity(weights.numpy(), real), atol=1e-6
    )
    # Heads that attend to disjoint positions: only the i == j terms remain.
    one_hot = np.zeros((1, 2, 4, 4))
    one_hot[0, 0, :, 0] = 1
    one_hot[0, 1, :, 1] = 1
    assert _position_similarity(one_hot, np.ones((1, 4), bool)) == 0.5
    same = _layer("position", rotate=False)
    same.key_dense.kernel.assign(same.query_dense.kernel)
    loss, (_, weights) = _loss(same, x)
    w = weights.numpy()
    np.testing.assert_allclose(loss, (w[:, 0] ** 2).sum(-1).mean(), atol=1e-6)


@pytest.mark.parametrize("disagreement", ["subspace", "position", "output"])
def test_local_and_global_agree(disagreement):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 9, D)).astype("float32")
    real = np.arange(9)[None] < np.array([[9], [6]])
    local = MultiHeadSelfAttention(
        num_heads=2, key_dim=2, window=2, disagreement=disagreement
    )
    dense = MultiHeadSelfAttention(num_heads=2, key_dim=2, disagreement=disagreement)
    local(x)
    dense(x)
    dense.set_weights(local.get_weights())
    local(x, mask=real)
    band = np.abs(np.arange(9)[:, None] - np.arange(9)[None]) <= 2
    dense(x, mask=real, attention_mask=np.broadcast_to(band, (2, 9, 9)))
    np.testing.assert_allclose(
        float(local.losses[0]), float(dense.losses[0]), atol=1e-6
    )


@pytest.mark.generation_specific
@pytest.mark.slow
def test_disagreement_harness():
    x = np.random.default_rng(4).normal(size=(2, 5, D)).astype("float32")
    mask = np.arange(5)[None] < np.array([[5], [2]])
    run_layer_test(
        MultiHeadSelfAttention,
        {"num_heads": 2, "key_dim": 2, "disagreement": "output"},
        {"inputs": x, "mask": mask},
        (2, 5, D),
        expected_num_trainable_weights=8,
        expected_num_losses=1,
        run_saved_model=False,
    )


def _head_similarity(layer, x):
    values = np.einsum("bsd,dhk->bshk", x, layer.value_dense.kernel.numpy())
    unit = values / np.linalg.norm(values, axis=-1, keepdims=True)
    cos = np.einsum("bshk,bsgk->bshg", unit, unit)
    off_diagonal = ~np.eye(layer.num_heads, dtype=bool)
    return cos[..., off_diagonal].mean()


@pytest.mark.slow
def test_training_makes_heads_less_alike():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(64, 6, 8)).astype("float32")
    y = rng.normal(size=(64, 1)).astype("float32")

    def train(weight):
        keras.utils.set_random_seed(1)
        attention = MultiHeadSelfAttention(
            num_heads=4,
            key_dim=4,
            disagreement="subspace" if weight else None,
            disagreement_weight=weight,
        )
        inputs = keras.Input((6, 8))
        hidden = attention(inputs)
        pooled = keras.layers.GlobalAveragePooling1D()(hidden)
        model = keras.Model(inputs, keras.layers.Dense(1)(pooled))
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
        # Start both from the same, deliberately alike heads.
        kernel = attention.value_dense.kernel.numpy()
        attention.value_dense.kernel.assign(
            np.repeat(kernel[:, :1], 4, axis=1) + 0.05 * kernel
        )
        before = _head_similarity(attention, x)
        model.fit(x, y, epochs=30, batch_size=32, verbose=0)
        return before, _head_similarity(attention, x)

    before, plain = train(0.0)
    before_reg, regularized = train(1.0)
    np.testing.assert_allclose(before, before_reg, atol=1e-6)
    assert before > 0.9
    assert regularized < plain - 0.3, (before, plain, regularized)


def test_disagreement_validation():
    with pytest.raises(ValueError, match="disagreement='heads'"):
        MultiHeadAttention(num_heads=2, key_dim=2, disagreement="heads")
    with pytest.raises(ValueError, match="disagreement_weight=-1"):
        MultiHeadAttention(
            num_heads=2, key_dim=2, disagreement="output", disagreement_weight=-1
        )
    layer = MultiHeadAttention(num_heads=2, key_dim=2)
    x = tf.zeros((1, 3, D))
    layer(x, x)
    assert layer.losses == []
