"""Public keras_attn layers, one module per family."""

from keras_attn.layers.attention import Attention, ContextAttentionPooling
from keras_attn.layers.multi_head import MultiHeadAttention, MultiHeadSelfAttention
from keras_attn.layers.scores import SCORES, AttentionScore

__all__ = [
    "SCORES",
    "Attention",
    "AttentionScore",
    "ContextAttentionPooling",
    "MultiHeadAttention",
    "MultiHeadSelfAttention",
]
