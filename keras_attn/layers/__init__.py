"""Public keras_attn layers, one module per family."""

from keras_attn.layers.aoa import (
    AttentionOverAttention,
    CandidateSum,
    DocumentAttention,
)
from keras_attn.layers.attention import Attention, ContextAttentionPooling
from keras_attn.layers.autoint import InteractingLayer
from keras_attn.layers.dcn import FeatureCross
from keras_attn.layers.decoding import beam_search, greedy_search
from keras_attn.layers.din import AttentionSequencePooling, Dice, LocalActivationUnit
from keras_attn.layers.embedding import FactorizedEmbedding
from keras_attn.layers.field_embedding import FieldEmbedding
from keras_attn.layers.han import HierarchicalAttentionPooling
from keras_attn.layers.labels import PredictedLabel
from keras_attn.layers.mmoe import PLE, MMoE
from keras_attn.layers.multi_head import MultiHeadAttention, MultiHeadSelfAttention
from keras_attn.layers.per_sentence import PerSentence
from keras_attn.layers.pooling import (
    POOLINGS,
    SEQUENCE_POOLINGS,
    FieldSum,
    HistoryPooling,
    SequencePooling,
)
from keras_attn.layers.position import PositionEmbedding, SinusoidalPositionEncoding
from keras_attn.layers.relative import RelativeMultiHeadAttention
from keras_attn.layers.retrieval import BruteForceTopK, RetrievalTask, streaming_top_k
from keras_attn.layers.scores import SCORES, AttentionScore
from keras_attn.layers.seq2seq import (
    AttentionDecoder,
    BahdanauAttention,
    LuongAttention,
    Seq2SeqEncoder,
)
from keras_attn.layers.token_ids import PlaceholderMask, SegmentIds, TokenMask
from keras_attn.layers.transformer import (
    FeedForward,
    SharedTransformerEncoder,
    TransformerEncoderBlock,
)
from keras_attn.layers.wide import COMBINERS, TERM_WEIGHTINGS, NgramLinear

__all__ = [
    "COMBINERS",
    "POOLINGS",
    "SCORES",
    "SEQUENCE_POOLINGS",
    "TERM_WEIGHTINGS",
    "Attention",
    "AttentionOverAttention",
    "AttentionDecoder",
    "AttentionScore",
    "AttentionSequencePooling",
    "BahdanauAttention",
    "CandidateSum",
    "BruteForceTopK",
    "ContextAttentionPooling",
    "Dice",
    "DocumentAttention",
    "FactorizedEmbedding",
    "FeatureCross",
    "FeedForward",
    "FieldEmbedding",
    "FieldSum",
    "HierarchicalAttentionPooling",
    "HistoryPooling",
    "InteractingLayer",
    "LocalActivationUnit",
    "LuongAttention",
    "MMoE",
    "MultiHeadAttention",
    "MultiHeadSelfAttention",
    "NgramLinear",
    "PLE",
    "PerSentence",
    "PlaceholderMask",
    "PositionEmbedding",
    "PredictedLabel",
    "RelativeMultiHeadAttention",
    "SegmentIds",
    "Seq2SeqEncoder",
    "SequencePooling",
    "RetrievalTask",
    "SharedTransformerEncoder",
    "SinusoidalPositionEncoding",
    "TokenMask",
    "TransformerEncoderBlock",
    "beam_search",
    "greedy_search",
    "streaming_top_k",
]
