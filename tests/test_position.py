"""SinusoidalPositionEncoding and PositionEmbedding."""

import numpy as np
import pytest

from keras_attn.backend import tf
from keras_attn.layers.position import PositionEmbedding, SinusoidalPositionEncoding
from tests.harness import run_layer_test

pytestmark = pytest.mark.generation_neutral


def _numpy_sinusoid(length, dim, base=10000.0, start=0):
    pe = np.zeros((length, dim))
    for pos in range(length):
        for k in range(dim):
            i = k // 2
            angle = (pos + start) / base ** (2 * i / dim)
            pe[pos, k] = np.sin(angle) if k % 2 == 0 else np.cos(angle)
    return pe


@pytest.mark.generation_specific
@pytest.mark.slow
def test_sinusoidal_harness():
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    run_layer_test(SinusoidalPositionEncoding, {}, {"inputs": x}, (2, 5, 8), 0)


@pytest.mark.parametrize("dim", [8, 7])
def test_sinusoidal_golden(dim):
    x = np.zeros((2, 11, dim), "float32")
    got = SinusoidalPositionEncoding()(x).numpy()
    expected = _numpy_sinusoid(11, dim)
    np.testing.assert_allclose(got[0], expected, atol=1e-5)
    np.testing.assert_allclose(got[1], expected, atol=1e-5)


def test_sinusoidal_start_index_and_unseen_lengths():
    layer = SinusoidalPositionEncoding(max_wavelength=100.0)
    layer(np.zeros((1, 4, 6), "float32"))
    got = layer(np.zeros((1, 3, 6), "float32"), start_index=5).numpy()[0]
    np.testing.assert_allclose(got, _numpy_sinusoid(3, 6, 100.0, start=5), atol=1e-5)
    long = layer(np.zeros((1, 3000, 6), "float32")).numpy()[0]
    np.testing.assert_allclose(
        long[2990:], _numpy_sinusoid(3000, 6, 100.0)[2990:], atol=1e-3
    )


def test_sinusoidal_dynamic_length():
    layer = SinusoidalPositionEncoding()
    fn = tf.function(
        layer, input_signature=[tf.TensorSpec((None, None, 4), tf.float32)]
    )
    np.testing.assert_allclose(
        fn(tf.zeros((1, 9, 4))).numpy()[0], _numpy_sinusoid(9, 4), atol=1e-5
    )


def test_sinusoidal_validation():
    with pytest.raises(ValueError, match="max_wavelength=1"):
        SinusoidalPositionEncoding(max_wavelength=1)
    with pytest.raises(ValueError, match=r"inputs.shape=\(2, 5\)"):
        SinusoidalPositionEncoding()(np.zeros((2, 5), "float32"))


@pytest.mark.generation_specific
@pytest.mark.slow
def test_position_embedding_harness():
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    run_layer_test(
        PositionEmbedding, {"sequence_length": 7}, {"inputs": x}, (2, 5, 8), 1
    )


def test_position_embedding_golden():
    layer = PositionEmbedding(sequence_length=6)
    out = layer(np.zeros((3, 4, 5), "float32")).numpy()
    table = layer.position_embeddings.numpy()
    np.testing.assert_allclose(out, np.broadcast_to(table[:4], (3, 4, 5)))
    shifted = layer(np.zeros((1, 2, 5), "float32"), start_index=4).numpy()[0]
    np.testing.assert_allclose(shifted, table[4:6])


def test_position_embedding_too_long():
    layer = PositionEmbedding(sequence_length=6)
    layer(np.zeros((1, 6, 5), "float32"))
    with pytest.raises(ValueError, match="past the layer's sequence_length=6"):
        layer(np.zeros((1, 7, 5), "float32"))
    with pytest.raises(ValueError, match="start_index=3"):
        layer(np.zeros((1, 4, 5), "float32"), start_index=3)
    fn = tf.function(
        layer, input_signature=[tf.TensorSpec((None, None, 5), tf.float32)]
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="sequence_length=6"):
        fn(tf.zeros((1, 8, 5)))


def test_position_embedding_validation():
    with pytest.raises(ValueError, match="sequence_length=0"):
        PositionEmbedding(sequence_length=0)
