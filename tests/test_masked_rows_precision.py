"""Fully masked rows give zeros and nothing is NaN, in float32, mixed_float16 and
mixed_bfloat16, for every attention layer (`harness.assert_masked_rows`).

A row whose mask has no real position (an empty history, an empty sentence, a
padded-out sequence) must give zero attention weights, and pooling layers a zero
vector, never NaN: the masked softmax normalizes in float32 and blanks masked
scores with the dtype's own minimum. (`AttentionSequencePooling` has its own
policy-parametrized test in test_din.py.)
"""

import numpy as np
import pytest

from keras_attn.layers import (
    Attention,
    AttentionOverAttention,
    ContextAttentionPooling,
    DocumentAttention,
    HierarchicalAttentionPooling,
    InteractingLayer,
    MultiHeadAttention,
    RelativeMultiHeadAttention,
    TransformerEncoderBlock,
)
from tests.harness import assert_masked_rows

RNG = np.random.default_rng(17)
D = 8


def _x(*shape):
    return RNG.normal(size=shape).astype("float32")


def _mask(batch, length, empty_row=1, real=3):
    """Rows with `real` real positions, row `empty_row` with none."""
    mask = np.zeros((batch, length), bool)
    mask[:, :real] = True
    mask[empty_row] = False
    return mask


SCORES = {"return_attention_scores": True}

CASES = {
    # (layer, kwargs, inputs, {output index: fully masked rows}, call kwargs)
    "attention": (
        Attention,
        {},
        {"query": _x(2, 3, D), "value": _x(2, 5, D), "value_mask": _mask(2, 5)},
        {0: (1,), 1: (1,)},
        SCORES,
    ),
    "attention_additive": (
        Attention,
        {"score": "additive", "units": 4},
        {"query": _x(2, 3, D), "value": _x(2, 5, D), "value_mask": _mask(2, 5)},
        {0: (1,), 1: (1,)},
        SCORES,
    ),
    "context_pooling": (
        ContextAttentionPooling,
        {"units": 4},
        {"inputs": _x(3, 5, D), "mask": _mask(3, 5, empty_row=2)},
        {0: (2,), 1: (2,)},
        SCORES,
    ),
    "multi_head": (
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 4},
        {"query": _x(2, 3, D), "value": _x(2, 5, D), "value_mask": _mask(2, 5)},
        {1: (1,)},  # the weights; the output is the projection's bias there
        SCORES,
    ),
    "multi_head_local": (
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 4, "window": 2},
        {"query": _x(2, 5, D), "value": _x(2, 5, D), "value_mask": _mask(2, 5)},
        {1: (1,)},
        SCORES,
    ),
    "relative": (
        RelativeMultiHeadAttention,
        {"num_heads": 2, "key_dim": 4},
        {"inputs": _x(2, 5, D), "mask": _mask(2, 5)},
        {1: (1,)},
        SCORES,
    ),
    "encoder_block": (
        TransformerEncoderBlock,
        {"num_heads": 2, "intermediate_dim": 16},
        {"inputs": _x(2, 5, D), "padding_mask": _mask(2, 5)},
        {1: (1,)},  # the block's output keeps its residual path: finite only
        SCORES,
    ),
    "encoder_block_pre_norm": (
        TransformerEncoderBlock,
        {"num_heads": 2, "intermediate_dim": 16, "normalize_first": True},
        {"inputs": _x(2, 5, D), "padding_mask": _mask(2, 5)},
        {1: (1,)},
        SCORES,
    ),
    "han": (
        HierarchicalAttentionPooling,
        {"units": 4},
        {
            "inputs": _x(2, 3, 4, D),
            "mask": np.stack([_mask(3, 4, empty_row=1), np.zeros((3, 4), bool)]),
        },
        # Document 1 has no real word; document 0's sentence 1 is empty.
        {0: (1,)},
        None,
    ),
    "interacting": (
        InteractingLayer,
        {"num_heads": 2, "key_dim": 4},
        {"inputs": _x(2, 4, D), "mask": _mask(2, 4)},
        {0: (1,)},
        None,
    ),
    "aoa": (
        AttentionOverAttention,
        {},
        {
            "document": _x(2, 5, D),
            "query": _x(2, 3, D),
            "document_mask": _mask(2, 5),
            "query_mask": np.ones((2, 3), bool),
        },
        {0: (1,)},
        None,
    ),
    "document_attention": (
        DocumentAttention,
        {},
        {
            "document": _x(2, 5, D),
            "query": _x(2, 3, D),
            "document_mask": _mask(2, 5),
            "query_mask": np.array([[True, False, False], [False, True, True]]),
        },
        {0: (1,)},
        None,
    ),
    "document_attention_empty_query": (
        DocumentAttention,
        {},
        {
            "document": _x(2, 5, D),
            "query": _x(2, 3, D),
            "document_mask": np.ones((2, 5), bool),
            "query_mask": np.array([[True, False, False], [False, False, False]]),
        },
        {0: (1,)},
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fully_masked_rows_give_zeros_under_every_policy(case):
    layer_cls, kwargs, inputs, zero_rows, call_kwargs = CASES[case]
    assert_masked_rows(layer_cls, kwargs, inputs, zero_rows, call_kwargs)
