"""Public keras_attn layers, one module per family."""

from keras_attn.layers.aoa import AttentionOverAttention, DocumentAttention
from keras_attn.layers.attention import Attention, ContextAttentionPooling
from keras_attn.layers.autoint import InteractingLayer
from keras_attn.layers.dcn import FeatureCross
from keras_attn.layers.din import AttentionSequencePooling, Dice, LocalActivationUnit
from keras_attn.layers.embedding import FactorizedEmbedding
from keras_attn.layers.field_embedding import FieldEmbedding
from keras_attn.layers.han import HierarchicalAttentionPooling
from keras_attn.layers.mmoe import PLE, MMoE
from keras_attn.layers.multi_head import MultiHeadAttention, MultiHeadSelfAttention
from keras_attn.layers.pooling import POOLINGS, HistoryPooling
from keras_attn.layers.position import PositionEmbedding, SinusoidalPositionEncoding
from keras_attn.layers.relative import RelativeMultiHeadAttention
from keras_attn.layers.retrieval import BruteForceTopK, RetrievalTask, streaming_top_k
from keras_attn.layers.scores import SCORES, AttentionScore
from keras_attn.layers.seq2seq import (
    AttentionDecoder,
    BahdanauAttention,
    LuongAttention,
)
from keras_attn.layers.transformer import (
    FeedForward,
    SharedTransformerEncoder,
    TransformerEncoderBlock,
)

__all__ = [
    "POOLINGS",
    "SCORES",
    "Attention",
    "AttentionOverAttention",
    "AttentionDecoder",
    "AttentionScore",
    "AttentionSequencePooling",
    "BahdanauAttention",
    "BruteForceTopK",
    "ContextAttentionPooling",
    "Dice",
    "DocumentAttention",
    "FactorizedEmbedding",
    "FeatureCross",
    "FeedForward",
    "FieldEmbedding",
    "HierarchicalAttentionPooling",
    "HistoryPooling",
    "InteractingLayer",
    "LocalActivationUnit",
    "LuongAttention",
    "MMoE",
    "MultiHeadAttention",
    "MultiHeadSelfAttention",
    "PLE",
    "PositionEmbedding",
    "RelativeMultiHeadAttention",
    "RetrievalTask",
    "SharedTransformerEncoder",
    "SinusoidalPositionEncoding",
    "TransformerEncoderBlock",
    "streaming_top_k",
]
