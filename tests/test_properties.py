"""Property-based checks of every public layer (hypothesis).

For each layer of `keras_attn.layers.__all__`, random valid shapes, masks (with
all-False rows), dtype policies (float32, mixed_bfloat16, mixed_float16) and value
scales give finite outputs and finite gradients of the documented shape; random
invalid arguments give a `ValueError` that names the argument.

Under mixed_float16 the inputs stay within the range the README states (|x| <= 10
for the attention layers): float16 holds at most 65504, and a dot-product score of
two vectors of 8 entries of size 100 is 80,000.

Two examples per layer and policy by default (fast enough for CI, and derandomized
so a run is reproducible). More: `KERAS_ATTN_HYPOTHESIS=thorough` (200 random
examples per test), e.g.
`KERAS_ATTN_HYPOTHESIS=thorough python -m pytest tests/test_properties.py`.
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import keras_attn.layers as L
from keras_attn.backend import keras, tf

settings.register_profile(
    "ci",
    max_examples=2,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = os.environ.get("KERAS_ATTN_HYPOTHESIS", "ci")

POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
#: Value scales of the float inputs; float16 keeps to the documented range.
SCALES = {
    "float32": (1e-3, 1.0, 1e2),
    "mixed_bfloat16": (1e-3, 1.0, 1e2),
    "mixed_float16": (1e-3, 1.0, 10.0),
}


class Draw:
    """The one shape-building helper: draws sizes, tensors and masks."""

    def __init__(self, data, policy="float32"):
        self.data = data
        self.policy = policy
        self.scale = data.draw(st.sampled_from(SCALES[self.policy]), label="scale")
        self.batch = data.draw(st.integers(1, 3), label="batch")
        seed = data.draw(st.integers(0, 2**16), label="seed")
        self.rng = np.random.default_rng(seed)

    def size(self, low=1, high=5, label="size"):
        return self.data.draw(st.integers(low, high), label=label)

    def choice(self, options, label):
        return self.data.draw(st.sampled_from(list(options)), label=label)

    def x(self, *shape):
        """A float input `(batch, *shape)` at the drawn scale."""
        return (self.rng.normal(size=(self.batch, *shape)) * self.scale).astype(
            "float32"
        )

    def mask(self, *shape):
        """A boolean mask `(batch, *shape)`; the first row is all False when drawn."""
        mask = self.rng.random((self.batch, *shape)) < 0.7
        if self.data.draw(st.booleans(), label="empty row"):
            mask[0] = False
        return mask

    def ids(self, size, *shape):
        return self.rng.integers(0, size, size=(self.batch, *shape)).astype("int32")


def _seq(d):
    return d.size(label="length"), d.choice([4, 8], "dim")


def _attention(d):
    lq, dim = _seq(d)
    lk = d.size(label="k_len")
    score = d.choice(["dot", "scaled_dot", "general", "additive", "cosine"], "score")
    layer = L.Attention(score=score, dtype=d.policy)
    args = (d.x(lq, dim), d.x(lk, dim))
    kwargs = dict(query_mask=d.mask(lq), value_mask=d.mask(lk))
    return layer, args, kwargs, (d.batch, lq, dim)


def _score(d):
    lq, dim = _seq(d)
    lk = d.size(label="k_len")
    score = d.choice(["dot", "scaled_dot", "general", "additive", "cosine"], "score")
    layer = L.AttentionScore(score=score, dtype=d.policy)
    return layer, (d.x(lq, dim), d.x(lk, dim)), {}, (d.batch, lq, lk)


def _aoa(d):
    ld, dim = _seq(d)
    lq = d.size(label="q_len")
    kwargs = dict(document_mask=d.mask(ld), query_mask=d.mask(lq))
    layer = L.AttentionOverAttention(dtype=d.policy)
    return layer, (d.x(ld, dim), d.x(lq, dim)), kwargs, (d.batch, ld)


def _document_attention(d):
    ld, dim = _seq(d)
    lq = d.size(label="q_len")
    kwargs = dict(document_mask=d.mask(ld), query_mask=d.mask(lq))
    layer = L.DocumentAttention(dtype=d.policy)
    return layer, (d.x(ld, dim), d.x(lq, dim)), kwargs, (d.batch, ld)


def _din_pooling(d):
    length, dim = _seq(d)
    layer = L.AttentionSequencePooling(
        hidden_units=[4],
        weight_normalization=d.choice([False, True], "weight_normalization"),
        dtype=d.policy,
    )
    args = (d.x(dim), d.x(length, dim))
    return layer, args, dict(mask=d.mask(length)), (d.batch, dim)


def _local_unit(d):
    length, dim = _seq(d)
    layer = L.LocalActivationUnit(hidden_units=[4], dtype=d.policy)
    args = (d.x(dim), d.x(length, dim))
    return layer, args, dict(mask=d.mask(length)), (d.batch, length)


def _context_pooling(d):
    length, dim = _seq(d)
    layer = L.ContextAttentionPooling(units=4, dtype=d.policy)
    return layer, (d.x(length, dim),), dict(mask=d.mask(length)), (d.batch, dim)


def _han(d):
    sentences, dim = _seq(d)
    words = d.size(label="words")
    layer = L.HierarchicalAttentionPooling(units=4, dtype=d.policy)
    args = (d.x(sentences, words, dim),)
    return layer, args, dict(mask=d.mask(sentences, words)), (d.batch, dim)


def _dice(d):
    dim = d.choice([4, 8], "dim")
    return L.Dice(dtype=d.policy), (d.x(dim),), {}, (d.batch, dim)


def _factorized(d):
    length = d.size(label="length")
    layer = L.FactorizedEmbedding(10, 2, 4, dtype=d.policy)
    return layer, (d.ids(10, length),), {}, (d.batch, length, 4)


def _field_embedding(d):
    fields, numeric = d.size(1, 3, "fields"), d.size(0, 2, "numeric")
    sizes = [d.size(1, 6, f"vocabulary_{i}") for i in range(fields)]
    layer = L.FieldEmbedding(
        sizes,
        4,
        num_numeric=numeric,
        shared_table=d.choice([False, True], "shared_table"),
        dtype=d.policy,
    )
    ids = np.concatenate([d.ids(s, 1) for s in sizes], axis=1)  # (batch, fields)
    args = (ids, d.x(numeric)) if numeric else (ids,)
    return layer, args, {}, (d.batch, fields + numeric, 4)


def _feed_forward(d):
    length, dim = _seq(d)
    layer = L.FeedForward(intermediate_dim=8, dtype=d.policy)
    return layer, (d.x(length, dim),), {}, (d.batch, length, dim)


def _interacting(d):
    fields, dim = _seq(d)
    heads = d.choice([1, 2], "num_heads")
    layer = L.InteractingLayer(num_heads=heads, key_dim=4, dtype=d.policy)
    args = (d.x(fields, dim),)
    return layer, args, dict(mask=d.mask(fields)), (d.batch, fields, heads * 4)


def _feature_cross(d):
    fields, dim = _seq(d)
    layer = L.FeatureCross(
        num_layers=d.choice([1, 2], "num_layers"),
        projection_dim=d.choice([None, 3], "projection_dim"),
        dtype=d.policy,
    )
    return layer, (d.x(fields, dim),), dict(mask=d.mask(fields)), (d.batch, fields, dim)


def _history_pooling(d):
    length, dim = _seq(d)
    layer = L.HistoryPooling(
        pooling=d.choice(list(L.POOLINGS), "pooling"), units=4, dtype=d.policy
    )
    return layer, (d.x(length, dim),), dict(mask=d.mask(length)), (d.batch, dim)


def _retrieval_task(d):
    dim = d.choice([4, 8], "dim")
    layer = L.RetrievalTask(
        temperature=d.choice([None, 0.5], "temperature"),
        num_hard_negatives=d.choice([None, 1], "num_hard_negatives"),
        dtype=d.policy,
    )
    return layer, (d.x(dim), d.x(dim)), {}, ()


def _top_k(d):
    dim, candidates = d.choice([4, 8], "dim"), d.size(3, 9, "candidates")
    layer = L.BruteForceTopK(
        k=3, block_size=d.choice([None, 2], "block_size"), dtype=d.policy
    )
    others = (d.rng.normal(size=(candidates, dim)) * d.scale).astype("float32")
    return layer, (d.x(dim), others), {}, (d.batch, 3)


def _mmoe(d):
    dim = d.choice([4, 8], "dim")
    layer = L.MMoE(
        ["a", "b"],
        num_experts=2,
        expert_units=[4],
        gate=d.choice(["softmax", "attention"], "gate"),
        dtype=d.policy,
    )
    return layer, (d.x(dim),), {}, {"a": (d.batch, 4), "b": (d.batch, 4)}


def _ple(d):
    dim = d.choice([4, 8], "dim")
    layer = L.PLE(
        ["a", "b"],
        num_shared_experts=1,
        num_task_experts=1,
        num_levels=d.size(1, 2, "num_levels"),
        expert_units=[4],
        dtype=d.policy,
    )
    return layer, (d.x(dim),), {}, {"a": (d.batch, 4), "b": (d.batch, 4)}


def _multi_head(d):
    lq, dim = _seq(d)
    lk = d.size(label="k_len")
    layer = L.MultiHeadAttention(2, 4, dtype=d.policy)
    args = (d.x(lq, dim), d.x(lk, dim))
    kwargs = dict(query_mask=d.mask(lq), value_mask=d.mask(lk))
    return layer, args, kwargs, (d.batch, lq, dim)


def _self_attention(d):
    length, dim = _seq(d)
    layer = L.MultiHeadSelfAttention(2, 4, dtype=d.policy)
    return layer, (d.x(length, dim),), dict(mask=d.mask(length)), (d.batch, length, dim)


def _relative(d):
    length, dim = _seq(d)
    layer = L.RelativeMultiHeadAttention(2, 4, dtype=d.policy)
    kwargs = dict(mask=d.mask(length))
    if d.choice([False, True], "memory"):
        m_len = d.size(label="mem_len")
        kwargs.update(memory=d.x(m_len, dim), memory_mask=d.mask(m_len))
    return layer, (d.x(length, dim),), kwargs, (d.batch, length, dim)


def _position_embedding(d):
    length, dim = _seq(d)
    layer = L.PositionEmbedding(sequence_length=8, dtype=d.policy)
    kwargs = dict(start_index=d.size(0, 8 - length, "start_index"))
    return layer, (d.x(length, dim),), kwargs, (d.batch, length, dim)


def _sinusoidal(d):
    length, dim = _seq(d)
    layer = L.SinusoidalPositionEncoding(dtype=d.policy)
    kwargs = dict(start_index=d.size(0, 100, "start_index"))
    return layer, (d.x(length, dim),), kwargs, (d.batch, length, dim)


def _transformer_block(d):
    length, dim = _seq(d)
    layer = L.TransformerEncoderBlock(
        2,
        8,
        normalize_first=d.choice([False, True], "normalize_first"),
        dtype=d.policy,
    )
    kwargs = dict(padding_mask=d.mask(length))
    return layer, (d.x(length, dim),), kwargs, (d.batch, length, dim)


def _shared_encoder(d):
    length, dim = _seq(d)
    layer = L.SharedTransformerEncoder(
        num_layers=2, num_groups=1, num_heads=2, intermediate_dim=8, dtype=d.policy
    )
    kwargs = dict(padding_mask=d.mask(length))
    return layer, (d.x(length, dim),), kwargs, (d.batch, length, dim)


def _bahdanau(d):
    src, dim = _seq(d)
    layer = L.BahdanauAttention(units=d.choice([None, 4], "units"), dtype=d.policy)
    args = (d.x(dim), d.x(src, dim))  # the previous decoder state, the encoder states
    return layer, args, dict(value_mask=d.mask(src)), (d.batch, dim)


def _luong(d):
    src, dim = _seq(d)
    score = d.choice(["dot", "general", "concat"], "score")
    window = d.choice([None, 2], "window")
    layer = L.LuongAttention(score=score, window=window, dtype=d.policy)
    args = (d.x(dim), d.x(src, dim))
    return layer, args, dict(value_mask=d.mask(src)), (d.batch, dim)


def _attention_decoder(d):
    src, dim = _seq(d)
    tgt = d.size(label="tgt_len")
    layer = L.AttentionDecoder(
        vocabulary_size=7,
        units=4,
        cell=d.choice(["gru", "lstm"], "cell"),
        attention=d.choice(["luong", "bahdanau"], "attention"),
        dtype=d.policy,
    )
    target_ids = d.rng.integers(1, 7, size=(d.batch, tgt)).astype("int32")
    args = (target_ids, d.x(src, dim))
    return layer, args, dict(source_mask=d.mask(src)), (d.batch, tgt, 7)


def _sequence_pooling(d):
    length, dim = _seq(d)
    mode = d.choice(["cls", "mean", "max", "flatten"], "mode")
    layer = L.SequencePooling(mode, dtype=d.policy)
    width = length * dim if mode == "flatten" else dim
    return layer, (d.x(length, dim),), dict(mask=d.mask(length)), (d.batch, width)


def _field_sum(d):
    fields, units = d.size(1, 6, "fields"), d.size(1, 4, "units")
    return L.FieldSum(dtype=d.policy), (d.x(fields, units),), {}, (d.batch, units)


def _predicted_label(d):
    classes = d.size(2, 5, "classes")
    return L.PredictedLabel(dtype=d.policy), (d.x(classes),), {}, (d.batch,)


def _token_mask(d):
    sentences, words = d.size(label="sentences"), d.size(label="words")
    reduce_last = d.choice([False, True], "reduce_last")
    layer = L.TokenMask(reduce_last=reduce_last, dtype=d.policy)
    shape = (d.batch, sentences) if reduce_last else (d.batch, sentences, words)
    return layer, (d.ids(4, sentences, words),), {}, shape


def _segment_ids(d):
    length = d.size(label="length")
    return L.SegmentIds(dtype=d.policy), (d.ids(9, length),), {}, (d.batch, length)


def _placeholder_mask(d):
    length = d.size(label="length")
    layer = L.PlaceholderMask(d.size(0, 4, "placeholder_id"), dtype=d.policy)
    return layer, (d.ids(5, length),), {}, (d.batch, length)


def _per_sentence(d):
    sentences, dim = _seq(d)
    words = d.size(label="words")
    gru = keras.layers.GRU(3, return_sequences=True, dtype=d.policy)
    if d.choice([False, True], "bidirectional"):
        gru = keras.layers.Bidirectional(gru, dtype=d.policy)
    layer = L.PerSentence(gru, dtype=d.policy)
    shape = (d.batch, sentences, words, gru.compute_output_shape((1, words, dim))[-1])
    args = (d.x(sentences, words, dim),)
    return layer, args, dict(mask=d.mask(sentences, words)), shape


def _candidate_sum(d):
    length, candidates = d.size(label="length"), d.size(label="candidates")
    scores = np.abs(d.x(length))
    args = (scores, d.ids(6, length), d.ids(6, candidates))
    return L.CandidateSum(dtype=d.policy), args, {}, (d.batch, candidates)


def _ngram_linear(d):
    length, units = d.size(label="length"), d.size(1, 3, "units")
    layer = L.NgramLinear(
        units,
        num_buckets=16,
        combiner=d.choice(L.COMBINERS, "combiner"),
        term_weighting=d.choice(L.TERM_WEIGHTINGS, "term_weighting"),
        idf=d.choice([False, True], "idf"),
        use_bias=d.choice([False, True], "use_bias"),
        nb_ratio=d.choice([False, True], "nb_ratio"),
        dtype=d.policy,
    )
    layer.build((None, length))
    # A table away from its zero start, so the gradients and outputs carry values.
    layer.kernel.assign(d.rng.normal(size=layer.kernel.shape) * d.scale)
    return layer, (d.ids(17, length),), {}, (d.batch, units)


def _seq2seq_encoder(d):
    length = d.size(label="length")
    encoder = d.choice(["bigru", "transformer"], "encoder")
    layer = L.Seq2SeqEncoder(9, 4, encoder=encoder, dtype=d.policy)
    width = 8 if encoder == "bigru" else 4
    ids = d.ids(9, length)
    return layer, (ids,), {}, [(d.batch, length, width), (d.batch, length)]


CASES = {
    "Attention": _attention,
    "AttentionDecoder": _attention_decoder,
    "BahdanauAttention": _bahdanau,
    "LuongAttention": _luong,
    "AttentionOverAttention": _aoa,
    "AttentionScore": _score,
    "AttentionSequencePooling": _din_pooling,
    "CandidateSum": _candidate_sum,
    "ContextAttentionPooling": _context_pooling,
    "Dice": _dice,
    "DocumentAttention": _document_attention,
    "FactorizedEmbedding": _factorized,
    "FeatureCross": _feature_cross,
    "FeedForward": _feed_forward,
    "FieldEmbedding": _field_embedding,
    "BruteForceTopK": _top_k,
    "HierarchicalAttentionPooling": _han,
    "FieldSum": _field_sum,
    "HistoryPooling": _history_pooling,
    "InteractingLayer": _interacting,
    "LocalActivationUnit": _local_unit,
    "MMoE": _mmoe,
    "MultiHeadAttention": _multi_head,
    "MultiHeadSelfAttention": _self_attention,
    "NgramLinear": _ngram_linear,
    "PerSentence": _per_sentence,
    "PlaceholderMask": _placeholder_mask,
    "PredictedLabel": _predicted_label,
    "SegmentIds": _segment_ids,
    "Seq2SeqEncoder": _seq2seq_encoder,
    "SequencePooling": _sequence_pooling,
    "TokenMask": _token_mask,
    "PLE": _ple,
    "PositionEmbedding": _position_embedding,
    "RelativeMultiHeadAttention": _relative,
    "RetrievalTask": _retrieval_task,
    "SharedTransformerEncoder": _shared_encoder,
    "SinusoidalPositionEncoding": _sinusoidal,
    "TransformerEncoderBlock": _transformer_block,
}


def _public_layers():
    return sorted(n for n in L.__all__ if isinstance(getattr(L, n), type))


def test_every_public_layer_has_a_strategy():
    missing = sorted(set(_public_layers()) - set(CASES))
    assert not missing, f"public layers without a property strategy: {missing}"


def _finite(name, value):
    value = np.asarray(tf.cast(tf.convert_to_tensor(value), tf.float32))
    assert np.isfinite(value).all(), f"{name} is not finite"


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", sorted(CASES))
@settings(settings.get_profile(PROFILE))
@given(data=st.data())
def test_valid_inputs_give_finite_outputs_and_gradients(name, policy, data):
    d = Draw(data, policy)
    layer, args, kwargs, expected = CASES[name](d)
    floats = [tf.constant(a) for a in args if a.dtype == np.float32]
    tensors = [tf.constant(a) for a in args]
    with tf.GradientTape() as tape:
        tape.watch(floats)
        for t in tensors:
            if t.dtype == tf.float32:
                tape.watch(t)
        out = layer(*tensors, **kwargs)
        flat = tf.nest.flatten(out)
        loss = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float32)) for o in flat])
    if isinstance(expected, dict):
        assert sorted(out) == sorted(expected)
        for key, shape in expected.items():
            assert tuple(out[key].shape) == shape, key
    elif isinstance(expected, list):
        assert [tuple(o.shape) for o in flat] == expected
    else:
        assert tuple(flat[0].shape) == expected
    for i, o in enumerate(flat):
        _finite(f"{name} output {i} ({d.policy}, scale {d.scale})", o)
    sources = [t for t in tensors if t.dtype == tf.float32] + layer.trainable_weights
    grads = tape.gradient(loss, sources)
    for i, g in enumerate(grads):
        if g is not None:
            _finite(f"{name} gradient {i} ({d.policy}, scale {d.scale})", g)


#: (layer, constructor kwargs without the bad argument, argument, bad values).
INVALID = [
    (L.Attention, {}, "dropout", [1.5, -0.1, float("nan"), "0.1"]),
    (L.Attention, {}, "score", ["dotty", 3]),
    (L.AttentionScore, {}, "units", [0, -2, 1.5, True]),
    (L.AttentionDecoder, {"vocabulary_size": 5, "units": 4}, "cell", ["rnn", 1]),
    (
        L.AttentionDecoder,
        {"vocabulary_size": 5, "units": 4},
        "input_feeding",
        ["no", 1],
    ),
    (L.BahdanauAttention, {}, "use_bias", ["yes", 0]),
    (L.LuongAttention, {}, "window", [0, 1.5, True]),
    (L.AttentionSequencePooling, {}, "hidden_units", [[], [0], [2.5], "8"]),
    (L.AttentionSequencePooling, {}, "weight_normalization", ["no", 1]),
    (L.ContextAttentionPooling, {}, "units", [0, None, 2.0]),
    (L.Dice, {}, "epsilon", [0.0, -1.0, float("nan"), float("inf")]),
    (L.Dice, {}, "momentum", [1.0, float("nan")]),
    (
        L.FactorizedEmbedding,
        {"embedding_dim": 2, "hidden_dim": 4},
        "vocabulary_size",
        [0, 2.0, True],
    ),
    (L.FeatureCross, {}, "projection_dim", [0, -1, 1.5, True]),
    (L.FeatureCross, {}, "num_layers", [0, None, 2.0]),
    (L.FeedForward, {}, "intermediate_dim", [0, -1, 1.5]),
    (L.HistoryPooling, {}, "pooling", ["max", 1]),
    (L.RetrievalTask, {}, "temperature", [0.0, -1.0, float("inf")]),
    (L.RetrievalTask, {}, "num_hard_negatives", [0, 1.5]),
    (L.BruteForceTopK, {}, "k", [0, 2.5, None]),
    (L.FieldEmbedding, {"embedding_dim": 4}, "vocabulary_sizes", [[0], [2.5], "3"]),
    (L.HierarchicalAttentionPooling, {}, "units", [0, 1.5]),
    (L.InteractingLayer, {}, "num_heads", [0, 1.5]),
    (L.InteractingLayer, {}, "scaling", ["yes", 0]),
    (L.LocalActivationUnit, {}, "dropout", [1.0, float("inf")]),
    (L.MMoE, {"tasks": ["a"]}, "num_experts", [0, 2.5]),
    (L.MultiHeadAttention, {"num_heads": 2}, "key_dim", [0, 1.5]),
    (
        L.MultiHeadAttention,
        {"num_heads": 2, "key_dim": 4},
        "disagreement_weight",
        [-1.0, float("nan")],
    ),
    (L.MultiHeadSelfAttention, {"num_heads": 2}, "key_dim", [0, None]),
    (L.PLE, {"tasks": ["a"]}, "num_levels", [0, 1.5]),
    (L.PositionEmbedding, {}, "sequence_length", [0, 2.5]),
    (
        L.RelativeMultiHeadAttention,
        {"num_heads": 2, "key_dim": 4},
        "max_wavelength",
        [1.0, float("nan"), float("inf")],
    ),
    (L.SharedTransformerEncoder, {}, "num_layers", [0, 1.5]),
    (L.SinusoidalPositionEncoding, {}, "max_wavelength", [0.5, float("nan")]),
    (
        L.TransformerEncoderBlock,
        {"num_heads": 2, "intermediate_dim": 8},
        "normalize_first",
        ["no", 1],
    ),
    (
        L.TransformerEncoderBlock,
        {"num_heads": 2, "intermediate_dim": 8},
        "layer_norm_epsilon",
        [0.0, float("inf")],
    ),
    (L.SequencePooling, {}, "mode", ["sum", 1]),
    (L.PredictedLabel, {}, "class_names", ["pos", 3, b"neg"]),
    (L.TokenMask, {}, "reduce_last", ["yes", 1]),
    (L.PlaceholderMask, {}, "placeholder_id", [-1, 1.5, True]),
    (L.PerSentence, {}, "layer", [None, "gru", 3]),
    (L.NgramLinear, {}, "units", [0, 1.5, True]),
    (L.NgramLinear, {"units": 2}, "combiner", ["max", 1]),
    (L.NgramLinear, {"units": 2}, "term_weighting", ["tfidf", None]),
    (L.Seq2SeqEncoder, {"vocabulary_size": 5, "units": 4}, "encoder", ["lstm", 1]),
]


#: The cloze heads have no constructor arguments of their own: they are checked on
#: bad inputs instead.
CLOZE_HEADS = ("AttentionOverAttention", "DocumentAttention")
#: Layers without constructor arguments of their own.
NO_ARGUMENTS = {*CLOZE_HEADS, "CandidateSum", "FieldSum", "SegmentIds"}


def test_every_public_layer_has_an_invalid_argument_case():
    covered = {cls.__name__ for cls, *_ in INVALID} | NO_ARGUMENTS
    missing = sorted(set(_public_layers()) - covered)
    assert not missing, f"public layers without an invalid-argument case: {missing}"


@pytest.mark.parametrize(
    "cls, kwargs, arg, values",
    INVALID,
    ids=[f"{c.__name__}-{a}" for c, _, a, _ in INVALID],
)
@settings(settings.get_profile(PROFILE))
@given(data=st.data())
def test_invalid_arguments_name_the_argument(cls, kwargs, arg, values, data):
    value = data.draw(st.sampled_from(values), label=arg)
    with pytest.raises(ValueError, match=rf"`{arg}`.*Received: .*{arg}="):
        cls(**kwargs, **{arg: value})


@pytest.mark.parametrize("name", CLOZE_HEADS)
@settings(settings.get_profile(PROFILE))
@given(data=st.data())
def test_cloze_heads_name_a_bad_input(name, data):
    d = Draw(data)
    rank = d.choice([2, 4], "rank")
    document = np.ones((2,) * rank, "float32")
    with pytest.raises(ValueError, match=r"`document` and `query` must have shapes"):
        getattr(L, name)()(document, d.x(3, 2))
