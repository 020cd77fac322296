"""RelativeMultiHeadAttention (Transformer-XL)."""

import numpy as np
import pytest

from keras_attn.backend import tf
from keras_attn.layers.relative import RelativeMultiHeadAttention, rel_shift
from tests.harness import assert_mask_invariant, run_layer_test

pytestmark = pytest.mark.generation_neutral

D, H, K = 8, 2, 4


def _randomize(layer, seed=0):
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(scale=0.5, size=w.shape).astype("float32"))


def _explicit_scores(layer, x, memory=None, clamp_len=None):
    """AC + BD with the relative distance of every (i, j) written out."""
    context = x if memory is None else np.concatenate([memory, x], axis=1)
    m_len = 0 if memory is None else memory.shape[1]
    q = np.einsum("bsd,dhk->bshk", x, layer.query_dense.kernel.numpy())
    k = np.einsum("bsd,dhk->bshk", context, layer.key_dense.kernel.numpy())
    w_r = layer.position_kernel.numpy()
    u, v = layer.r_w_bias.numpy(), layer.r_r_bias.numpy()
    inv_freq = 1.0 / 10000 ** (np.arange(0, D, 2) / D)
    b, q_len, k_len = x.shape[0], x.shape[1], context.shape[1]
    scores = np.zeros((b, H, q_len, k_len))
    for i in range(q_len):
        for j in range(k_len):
            dist = m_len + i - j
            if clamp_len is not None:
                dist = np.clip(dist, -clamp_len, clamp_len)
            enc = np.concatenate([np.sin(dist * inv_freq), np.cos(dist * inv_freq)])
            r = np.einsum("d,dhk->hk", enc, w_r)
            ac = np.einsum("bhk,bhk->bh", q[:, i] + u, k[:, j])
            bd = np.einsum("bhk,hk->bh", q[:, i] + v, r)
            scores[:, :, i, j] = (ac + bd) / np.sqrt(K)
    return scores


def _softmax(scores, mask):
    scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_rel_shift_aligns_distances():
    q_len, k_len = 3, 5
    distances = np.arange(k_len - 1, -q_len, -1)  # column r: distance k_len - 1 - r
    full = np.broadcast_to(distances, (q_len, len(distances))).astype("float32")
    got = rel_shift(tf.constant(full), k_len).numpy()
    i, j = np.arange(q_len)[:, None], np.arange(k_len)[None, :]
    np.testing.assert_array_equal(got, (k_len - q_len) + i - j)


@pytest.mark.parametrize("with_memory", [False, True])
@pytest.mark.parametrize("clamp_len", [None, 2])
def test_ac_bd_golden(with_memory, clamp_len):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 4, D)).astype("float32")
    memory = rng.normal(size=(2, 3, D)).astype("float32") if with_memory else None
    layer = RelativeMultiHeadAttention(num_heads=H, key_dim=K, clamp_len=clamp_len)
    layer(x, memory=memory)
    _randomize(layer)
    for causal in (False, True):
        out, weights = layer(
            x, memory=memory, use_causal_mask=causal, return_attention_scores=True
        )
        scores = _explicit_scores(layer, x, memory, clamp_len)
        m_len = 0 if memory is None else 3
        i, j = np.arange(4)[:, None], np.arange(4 + m_len)[None, :]
        mask = (j <= i + m_len) if causal else np.ones_like(i + j, bool)
        expected = _softmax(scores, mask)
        np.testing.assert_allclose(weights.numpy(), expected, atol=1e-5)
        context = x if memory is None else np.concatenate([memory, x], 1)
        values = np.einsum("bsd,dhk->bshk", context, layer.value_dense.kernel.numpy())
        ctx = np.einsum("bhqk,bkhd->bqhd", expected, values)
        ref = np.einsum("bqhd,hde->bqe", ctx, layer.output_dense.kernel.numpy())
        np.testing.assert_allclose(out.numpy(), ref, atol=1e-4)


def test_segment_by_segment_equals_whole_text():
    rng = np.random.default_rng(2)
    text = rng.normal(size=(2, 10, D)).astype("float32")
    layer = RelativeMultiHeadAttention(num_heads=H, key_dim=K)
    layer(text)
    _randomize(layer, seed=3)
    whole = layer(text, use_causal_mask=True).numpy()
    second = layer(text[:, 6:], memory=text[:, :6], use_causal_mask=True).numpy()
    np.testing.assert_allclose(second, whole[:, 6:], atol=1e-5)


def test_no_gradient_through_memory():
    rng = np.random.default_rng(4)
    x = tf.constant(rng.normal(size=(1, 3, D)).astype("float32"))
    memory = tf.constant(rng.normal(size=(1, 2, D)).astype("float32"))
    layer = RelativeMultiHeadAttention(num_heads=H, key_dim=K)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, memory])
        loss = tf.reduce_sum(layer(x, memory=memory) ** 2)
    assert tape.gradient(loss, memory) is None
    assert tape.gradient(loss, x) is not None


def test_masks_invariance_and_fully_masked_rows():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 5, D)).astype("float32")
    memory = rng.normal(size=(2, 3, D)).astype("float32")
    mask = np.arange(5)[None] < np.array([[5], [3]])
    memory_mask = np.arange(3)[None] < np.array([[1], [0]])
    layer = RelativeMultiHeadAttention(num_heads=H, key_dim=K)
    inputs = {"inputs": x, "memory": memory, "mask": mask, "memory_mask": memory_mask}
    assert_mask_invariant(layer, inputs, "inputs", ~mask)
    assert_mask_invariant(layer, inputs, "memory", ~memory_mask)
    _, weights = layer(
        x,
        memory=memory,
        mask=mask,
        memory_mask=memory_mask,
        return_attention_scores=True,
    )
    w = weights.numpy()
    np.testing.assert_array_equal(w[1, :, 3:], 0.0)  # padded queries: no weights
    np.testing.assert_array_equal(w[1][..., :3], 0.0)  # empty memory: no weight
    np.testing.assert_allclose(w[1, :, :3].sum(-1), 1.0, atol=1e-6)
    empty = layer(x, mask=np.zeros((2, 5), bool))
    assert np.all(np.isfinite(empty.numpy()))


@pytest.mark.generation_specific
@pytest.mark.slow
def test_relative_harness():
    rng = np.random.default_rng(6)
    run_layer_test(
        RelativeMultiHeadAttention,
        {"num_heads": H, "key_dim": K, "clamp_len": 4, "dropout": 0.1},
        {
            "inputs": rng.normal(size=(2, 5, D)).astype("float32"),
            "memory": rng.normal(size=(2, 3, D)).astype("float32"),
            "mask": np.arange(5)[None] < np.array([[5], [2]]),
        },
        [(2, 5, D), (2, H, 5, 8)],
        expected_num_trainable_weights=7,
        call_kwargs={"return_attention_scores": True, "use_causal_mask": True},
    )


def test_relative_validation():
    with pytest.raises(ValueError, match="clamp_len=0"):
        RelativeMultiHeadAttention(num_heads=2, key_dim=2, clamp_len=0)
    with pytest.raises(ValueError, match="key_dim=None"):
        RelativeMultiHeadAttention(num_heads=2, key_dim=None)
    with pytest.raises(ValueError, match="max_wavelength=0.5"):
        RelativeMultiHeadAttention(num_heads=2, key_dim=2, max_wavelength=0.5)
    with pytest.raises(ValueError, match=r"inputs.shape=\(1, 3, 7\)"):
        RelativeMultiHeadAttention(num_heads=2, key_dim=2)(np.zeros((1, 3, 7), "f"))
    with pytest.raises(ValueError, match=r"memory.shape=\(1, 2, 6\)"):
        RelativeMultiHeadAttention(num_heads=2, key_dim=2)(
            np.zeros((1, 3, 8), "float32"), memory=np.zeros((1, 2, 6), "float32")
        )
