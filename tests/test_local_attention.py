"""Local (windowed) attention: MultiHeadAttention(window=w)."""

import numpy as np
import pytest

from keras_attn.backend import tf
from keras_attn.layers.multi_head import MultiHeadAttention, MultiHeadSelfAttention
from tests.harness import assert_mask_invariant, run_layer_test

pytestmark = pytest.mark.generation_neutral


def _band(n, w, causal=False):
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    band = np.abs(i - j) <= w
    return band & (j <= i) if causal else band


def _pair(window, **kwargs):
    """A local layer and a global one with the same weights."""
    local = MultiHeadAttention(num_heads=2, key_dim=4, window=window, **kwargs)
    dense = MultiHeadAttention(num_heads=2, key_dim=4, **kwargs)
    return local, dense


@pytest.mark.parametrize(
    "n, w, causal", [(10, 3, False), (12, 4, False), (7, 2, True), (9, 1, True)]
)
def test_local_equals_masked_global(n, w, causal):
    rng = np.random.default_rng(n + w)
    x = rng.normal(size=(2, n, 8)).astype("float32")
    real = np.arange(n)[None] < np.array([[n], [n - 3]])
    local, dense = _pair(w)
    local(x, x)
    dense(x, x)
    dense.set_weights(local.get_weights())
    out, weights = local(
        x,
        x,
        query_mask=real,
        value_mask=real,
        use_causal_mask=causal,
        return_attention_scores=True,
    )
    band = np.broadcast_to(_band(n, w, causal), (2, n, n))
    ref_out, ref_weights = dense(
        x,
        x,
        query_mask=real,
        value_mask=real,
        attention_mask=band,
        return_attention_scores=True,
    )
    np.testing.assert_allclose(weights.numpy(), ref_weights.numpy(), atol=1e-6)
    np.testing.assert_allclose(out.numpy(), ref_out.numpy(), atol=1e-5)
    assert np.all(weights.numpy()[:, :, ~_band(n, w, causal)] == 0)


@pytest.mark.parametrize("w", [6, 9, 50])
def test_local_equals_global_when_window_covers_everything(w):
    n = 6
    rng = np.random.default_rng(w)
    x = rng.normal(size=(2, n, 8)).astype("float32")
    real = np.array([[1] * 6, [1] * 4 + [0] * 2], bool)
    local, dense = _pair(w)
    local(x, x)
    dense(x, x)
    dense.set_weights(local.get_weights())
    for causal in (False, True):
        np.testing.assert_allclose(
            local(x, x, value_mask=real, use_causal_mask=causal).numpy(),
            dense(x, x, value_mask=real, use_causal_mask=causal).numpy(),
            atol=1e-5,
        )
    # The same with a length unknown while tracing.
    spec = tf.TensorSpec((None, None, 8), tf.float32)
    fn = tf.function(lambda t: local(t, t), input_signature=[spec])
    np.testing.assert_allclose(fn(x).numpy(), dense(x, x).numpy(), atol=1e-5)


def test_no_quadratic_tensor_in_the_graph():
    n, w = 512, 16
    layer = MultiHeadSelfAttention(num_heads=2, key_dim=4, window=w)
    spec = tf.TensorSpec((1, n, 8), tf.float32)
    fn = tf.function(lambda t: layer(t, use_causal_mask=True), input_signature=[spec])
    graph = fn.get_concrete_function().graph
    largest = 0
    for op in graph.get_operations():
        for out in op.outputs:
            shape = out.shape
            if shape.rank is not None and shape.is_fully_defined():
                largest = max(largest, shape.num_elements())
    # The banded scores, (1, blocks, heads, w, 2 w) when causal, are the biggest.
    assert largest == 2 * n * 2 * w
    assert largest < n * n / 4


def test_local_mask_invariance_and_fully_masked_rows():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 9, 8)).astype("float32")
    real = np.arange(9)[None] < np.array([[9], [5]])
    layer = MultiHeadSelfAttention(num_heads=2, key_dim=4, window=2)
    assert_mask_invariant(layer, {"inputs": x, "mask": real}, "inputs", ~real)
    # Keys 0..3 padded: query 0 (window 0..2) has no real key left.
    value_mask = np.ones((2, 9), bool)
    value_mask[:, :4] = False
    out, weights = MultiHeadAttention(num_heads=2, key_dim=4, window=2)(
        x, x, value_mask=value_mask, return_attention_scores=True
    )
    assert np.all(np.isfinite(out.numpy()))
    np.testing.assert_array_equal(weights.numpy()[:, :, :2], 0.0)
    np.testing.assert_allclose(weights.numpy()[:, :, 2:].sum(-1), 1.0, atol=1e-6)


@pytest.mark.generation_specific
@pytest.mark.slow
def test_local_attention_harness():
    x = np.random.default_rng(4).normal(size=(2, 7, 8)).astype("float32")
    mask = np.arange(7)[None] < np.array([[7], [4]])
    run_layer_test(
        MultiHeadSelfAttention,
        {"num_heads": 2, "key_dim": 4, "window": 2},
        {"inputs": x, "mask": mask},
        [(2, 7, 8), (2, 2, 7, 7)],
        expected_num_trainable_weights=8,
        call_kwargs={"return_attention_scores": True, "use_causal_mask": True},
    )


def test_local_validation():
    with pytest.raises(ValueError, match="window=0"):
        MultiHeadAttention(num_heads=2, key_dim=4, window=0)
    layer = MultiHeadAttention(num_heads=2, key_dim=4, window=2)
    x = np.zeros((2, 5, 8), "float32")
    with pytest.raises(ValueError, match="attention_mask"):
        layer(x, x, attention_mask=np.ones((2, 5, 5), bool))
    with pytest.raises(ValueError, match=r"query.shape=\(2, 5, 8\), key.shape=\(2, 6"):
        layer(x, np.zeros((2, 6, 8), "float32"))
