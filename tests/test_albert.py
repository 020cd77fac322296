"""FactorizedEmbedding and SharedTransformerEncoder (ALBERT)."""

import numpy as np
import pytest

from keras_attn.layers.embedding import FactorizedEmbedding
from keras_attn.layers.transformer import (
    SharedTransformerEncoder,
    TransformerEncoderBlock,
)
from tests.harness import run_layer_test

pytestmark = pytest.mark.generation_neutral


@pytest.mark.generation_specific
@pytest.mark.slow
def test_factorized_embedding_harness():
    ids = np.array([[1, 5, 0], [3, 2, 9]], "int32")
    run_layer_test(
        FactorizedEmbedding,
        {"vocabulary_size": 10, "embedding_dim": 3, "hidden_dim": 8},
        {"inputs": ids},
        (2, 3, 8),
        3,
    )


def test_factorized_embedding_golden_and_params():
    layer = FactorizedEmbedding(
        vocabulary_size=1000, embedding_dim=16, hidden_dim=128, mask_zero=True
    )
    ids = np.array([[4, 999, 0, 0], [1, 2, 3, 0]])
    got = layer(ids).numpy()
    table, kernel = layer.embeddings.numpy(), layer.kernel.numpy()
    np.testing.assert_allclose(got, table[ids] @ kernel + layer.bias.numpy(), atol=1e-5)
    # V·E + E·H + H instead of V·H.
    assert layer.count_params() == 1000 * 16 + 16 * 128 + 128
    np.testing.assert_array_equal(layer.compute_mask(ids), ids != 0)
    assert FactorizedEmbedding(10, 4, 8).compute_mask(ids) is None


def test_factorized_embedding_validation():
    with pytest.raises(ValueError, match="vocabulary_size=0"):
        FactorizedEmbedding(vocabulary_size=0, embedding_dim=2, hidden_dim=4)
    with pytest.raises(ValueError, match="embedding_dim=None"):
        FactorizedEmbedding(vocabulary_size=5, embedding_dim=None, hidden_dim=4)
    with pytest.raises(ValueError, match="hidden_dim=2.5"):
        FactorizedEmbedding(vocabulary_size=5, embedding_dim=2, hidden_dim=2.5)


@pytest.mark.generation_specific
@pytest.mark.slow
def test_shared_encoder_harness():
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1] * 5], bool)
    run_layer_test(
        SharedTransformerEncoder,
        {"num_layers": 4, "num_groups": 2, "num_heads": 2, "intermediate_dim": 16},
        {"inputs": x, "padding_mask": mask},
        (2, 5, 8),
        expected_num_trainable_weights=32,
    )


def test_shared_stack_has_one_blocks_parameters():
    x = np.zeros((1, 4, 16), "float32")
    shared = SharedTransformerEncoder(num_layers=12, num_heads=4, intermediate_dim=32)
    shared(x)
    block = TransformerEncoderBlock(num_heads=4, intermediate_dim=32)
    block(x)
    assert shared.count_params() == block.count_params()
    grouped = SharedTransformerEncoder(
        num_layers=12, num_groups=3, num_heads=4, intermediate_dim=32
    )
    grouped(x)
    assert grouped.count_params() == 3 * block.count_params()
    groups = [grouped.group_of_layer(i) for i in range(12)]
    assert groups == [0] * 4 + [1] * 4 + [2] * 4


def test_shared_stack_applies_the_block_repeatedly():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 8)).astype("float32")
    real = np.array([[1] * 5, [1, 1, 1, 0, 0]], bool)
    shared = SharedTransformerEncoder(
        num_layers=3, num_heads=2, intermediate_dim=16, dropout=0.0
    )
    got = shared(x, padding_mask=real).numpy()
    block = shared.blocks[0]
    expected = x
    for _ in range(3):
        expected = block(expected, padding_mask=real)
    np.testing.assert_allclose(got, expected.numpy(), atol=1e-5)
    # Changing padded inputs leaves the real positions alone.
    noisy = np.where(real[..., None], x, rng.normal(scale=10, size=x.shape))
    moved = shared(noisy.astype("float32"), padding_mask=real).numpy()
    np.testing.assert_allclose(moved[real], got[real], atol=1e-5)


def test_shared_encoder_validation():
    with pytest.raises(ValueError, match="num_groups=5, num_layers=4"):
        SharedTransformerEncoder(num_layers=4, num_groups=5)
    with pytest.raises(ValueError, match="num_layers=0"):
        SharedTransformerEncoder(num_layers=0)
    with pytest.raises(ValueError, match="activation='swish'"):
        SharedTransformerEncoder(activation="swish")
