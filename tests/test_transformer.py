"""TransformerEncoderBlock and FeedForward against PyTorch's TransformerEncoderLayer
formula written out in NumPy."""

import math
from unittest import mock

import numpy as np
import pytest

from keras_attn.layers.transformer import FeedForward, TransformerEncoderBlock
from tests.harness import run_layer_test

pytestmark = pytest.mark.generation_neutral

erf = np.vectorize(math.erf)

D, H, FF = 8, 2, 16


def _randomize(layer, seed=0):
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(scale=0.5, size=w.shape).astype("float32"))


def _ln(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _act(name, x):
    if name == "relu":
        return np.maximum(x, 0)
    if name == "gelu_approximate":
        # Google BERT's modeling.gelu.
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def _torch_encoder_layer(
    block, x, key_padding=None, scales=(1, 1, 1, 1), eps=1e-5, weights=None
):
    """PyTorch TransformerEncoderLayer.forward in NumPy. `key_padding`: True = pad.
    `scales` stand in for the four dropouts: attention weights, after attention,
    after the activation, after the feed-forward. `weights`, a list, receives the
    attention weights (batch, heads, q, k)."""
    a = block.attention
    wq, bq = a.query_dense.kernel.numpy(), a.query_dense.bias.numpy()
    wk, bk = a.key_dense.kernel.numpy(), a.key_dense.bias.numpy()
    wv, bv = a.value_dense.kernel.numpy(), a.value_dense.bias.numpy()
    wo, bo = a.output_dense.kernel.numpy(), a.output_dense.bias.numpy()
    ff = block.feedforward
    w1, b1 = ff.intermediate_dense.kernel.numpy(), ff.intermediate_dense.bias.numpy()
    w2, b2 = ff.output_dense.kernel.numpy(), ff.output_dense.bias.numpy()
    g1, be1 = block.attention_norm.gamma.numpy(), block.attention_norm.beta.numpy()
    g2, be2 = block.feedforward_norm.gamma.numpy(), block.feedforward_norm.beta.numpy()
    s_attn, s_sa, s_act, s_ff = scales

    def sa_block(h):
        q = np.einsum("bsd,dhk->bshk", h, wq) + bq
        k = np.einsum("bsd,dhk->bshk", h, wk) + bk
        v = np.einsum("bsd,dhk->bshk", h, wv) + bv
        scores = np.einsum("bqhk,bshk->bhqs", q, k) / np.sqrt(q.shape[-1])
        if key_padding is not None:
            scores = np.where(key_padding[:, None, None, :], -np.inf, scores)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
        if weights is not None:
            weights.append(p)
        p = p * s_attn
        ctx = np.einsum("bhqs,bshk->bqhk", p, v)
        return (np.einsum("bqhk,hkd->bqd", ctx, wo) + bo) * s_sa

    def ff_block(h):
        hidden = _act(block.activation, h @ w1 + b1) * s_act
        return (hidden @ w2 + b2) * s_ff

    if block.normalize_first:
        x = x + sa_block(_ln(x, g1, be1, eps))
        return x + ff_block(_ln(x, g2, be2, eps))
    x = _ln(x + sa_block(x), g1, be1, eps)
    return _ln(x + ff_block(x), g2, be2, eps)


@pytest.mark.generation_specific
@pytest.mark.slow
def test_encoder_block_harness():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, D)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    run_layer_test(
        TransformerEncoderBlock,
        {"num_heads": H, "intermediate_dim": FF, "dropout": 0.1},
        {"inputs": x, "padding_mask": mask},
        (2, 5, D),
        expected_num_trainable_weights=16,
    )


@pytest.mark.generation_specific
@pytest.mark.slow
def test_encoder_block_harness_pre_ln_gelu():
    x = np.random.default_rng(1).normal(size=(2, 4, D)).astype("float32")
    run_layer_test(
        TransformerEncoderBlock,
        {
            "num_heads": H,
            "intermediate_dim": FF,
            "normalize_first": True,
            "activation": "gelu",
        },
        {"inputs": x},
        (2, 4, D),
        expected_num_trainable_weights=16,
        run_saved_model=False,
    )


@pytest.mark.parametrize("normalize_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_approximate"])
def test_encoder_block_matches_pytorch_formula(normalize_first, activation):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 6, D)).astype("float32")
    real = np.array([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4], bool)
    block = TransformerEncoderBlock(
        num_heads=H,
        intermediate_dim=FF,
        activation=activation,
        normalize_first=normalize_first,
    )
    block(x)
    _randomize(block)
    got = block(x, padding_mask=real).numpy()
    expected = _torch_encoder_layer(block, x.astype("float64"), key_padding=~real)
    np.testing.assert_allclose(got, expected, atol=2e-4, rtol=1e-4)
    # No mask: all positions attend everywhere.
    np.testing.assert_allclose(
        block(x).numpy(), _torch_encoder_layer(block, x.astype("float64")), atol=2e-4
    )


@pytest.mark.parametrize("normalize_first", [False, True])
def test_dropout_placement(normalize_first):
    """Each dropout is replaced by a distinct scaling: the output matches PyTorch's
    formula only when each sits where PyTorch puts it."""
    x = np.random.default_rng(3).normal(size=(2, 5, D)).astype("float32")
    block = TransformerEncoderBlock(
        num_heads=H, intermediate_dim=FF, dropout=0.5, normalize_first=normalize_first
    )
    block(x)
    _randomize(block, seed=4)
    scales = (1.5, 0.5, 2.0, 0.25)
    layers = (
        block.attention.dropout_layer,
        block.attention_output_dropout,
        block.feedforward.dropout_layer,
        block.feedforward_output_dropout,
    )
    patches = [
        mock.patch.object(layer, "call", lambda t, training=None, s=s: t * s)
        for layer, s in zip(layers, scales)
    ]
    for p in patches:
        p.start()
    try:
        got = block(x, training=True).numpy()
    finally:
        for p in patches:
            p.stop()
    expected = _torch_encoder_layer(block, x.astype("float64"), scales=scales)
    np.testing.assert_allclose(got, expected, atol=2e-4, rtol=1e-4)
    # And the real dropout is active in training and off at inference.
    assert not np.allclose(block(x, training=True), block(x, training=False))
    np.testing.assert_allclose(
        block(x, training=False).numpy(),
        _torch_encoder_layer(block, x.astype("float64")),
        atol=2e-4,
    )


def test_padding_mask_invariance_and_attention_mask():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 6, D)).astype("float32")
    real = np.array([[1] * 6, [1] * 3 + [0] * 3], bool)
    block = TransformerEncoderBlock(num_heads=H, intermediate_dim=FF)
    base = block(x, padding_mask=real).numpy()
    noisy = np.where(real[..., None], x, rng.normal(scale=10, size=x.shape))
    moved = block(noisy.astype("float32"), padding_mask=real).numpy()
    np.testing.assert_allclose(moved[real], base[real], atol=1e-5)
    # An attention mask equal to the padding mask gives the same output.
    attention_mask = np.broadcast_to(real[:, None, :], (2, 6, 6))
    np.testing.assert_allclose(
        block(x, attention_mask=attention_mask).numpy(), base, atol=1e-5
    )
    # Causal: the output at position t ignores positions after t.
    causal = block(x, use_causal_mask=True).numpy()
    x2 = x.copy()
    x2[:, 4:] = rng.normal(size=x2[:, 4:].shape)
    causal2 = block(x2, use_causal_mask=True).numpy()
    np.testing.assert_allclose(causal[:, :4], causal2[:, :4], atol=1e-5)
    assert not np.allclose(causal[:, 4:], causal2[:, 4:])


def test_fully_masked_rows_are_finite():
    x = np.random.default_rng(6).normal(size=(2, 4, D)).astype("float32")
    real = np.array([[0, 0, 0, 0], [1, 1, 0, 0]], bool)
    out = TransformerEncoderBlock(num_heads=H, intermediate_dim=FF)(
        x, padding_mask=real
    )
    assert np.all(np.isfinite(out.numpy()))


@pytest.mark.parametrize("normalize_first", [False, True])
def test_encoder_block_returns_its_attention_weights(normalize_first):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 6, D)).astype("float32")
    real = np.array([[1] * 6, [1] * 4 + [0] * 2, [0] * 6], bool)
    block = TransformerEncoderBlock(
        num_heads=H, intermediate_dim=FF, normalize_first=normalize_first
    )
    block(x)
    _randomize(block, seed=6)
    out, weights = block(x, padding_mask=real, return_attention_scores=True)
    np.testing.assert_allclose(
        out.numpy(), block(x, padding_mask=real).numpy(), atol=1e-6
    )
    expected = []
    _torch_encoder_layer(
        block, x[:2].astype("float64"), key_padding=~real[:2], weights=expected
    )
    assert weights.shape == (3, H, 6, 6)
    np.testing.assert_allclose(weights.numpy()[:2], expected[0], atol=1e-5)
    # No real key at all: zero weights, not NaN or uniform.
    np.testing.assert_array_equal(weights.numpy()[2], 0.0)


@pytest.mark.parametrize("activation", ["gelu", "gelu_approximate"])
def test_feedforward_golden(activation):
    x = np.random.default_rng(7).normal(size=(2, 3, D)).astype("float32") * 2
    layer = FeedForward(intermediate_dim=FF, output_dim=5, activation=activation)
    got = layer(x).numpy()
    w1, b1 = layer.intermediate_dense.kernel.numpy(), layer.intermediate_dense.bias
    w2, b2 = layer.output_dense.kernel.numpy(), layer.output_dense.bias
    hidden = x @ w1 + b1.numpy()
    expected = _act(activation, hidden) @ w2 + b2.numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5)
    if activation == "gelu_approximate":
        # The two forms differ by up to ~1e-3 here: the test tells them apart.
        other = _act("gelu", hidden) @ w2 + b2.numpy()
        assert np.abs(other - expected).max() > 1e-4


@pytest.mark.generation_specific
@pytest.mark.slow
def test_feedforward_harness():
    x = np.random.default_rng(8).normal(size=(2, 3, D)).astype("float32")
    run_layer_test(
        FeedForward,
        {"intermediate_dim": FF, "dropout": 0.2},
        {"inputs": x},
        (2, 3, D),
        4,
        run_saved_model=False,
    )


def test_validation():
    with pytest.raises(ValueError, match="activation='tanh'"):
        TransformerEncoderBlock(num_heads=2, activation="tanh")
    with pytest.raises(ValueError, match="num_heads=0"):
        TransformerEncoderBlock(num_heads=0)
    with pytest.raises(ValueError, match="dropout=1.5"):
        TransformerEncoderBlock(num_heads=2, dropout=1.5)
    with pytest.raises(ValueError, match="layer_norm_epsilon=0"):
        TransformerEncoderBlock(num_heads=2, layer_norm_epsilon=0)
    with pytest.raises(ValueError, match="intermediate_dim=-1"):
        FeedForward(intermediate_dim=-1)
    with pytest.raises(ValueError, match=r"inputs.shape=\(2, 3, 7\), num_heads=2"):
        TransformerEncoderBlock(num_heads=2)(np.zeros((2, 3, 7), "float32"))
