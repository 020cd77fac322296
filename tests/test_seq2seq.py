"""BahdanauAttention, LuongAttention and AttentionDecoder: the papers' formulas in
NumPy, masks, greedy and beam-search decoding, the harness, export, bad input."""

import itertools
import os
import tempfile

import numpy as np
import pytest

from keras_attn.backend import tf
from keras_attn.layers import AttentionDecoder, BahdanauAttention, LuongAttention
from tests.harness import assert_mask_invariant, run_layer_test
from tests.tf_only import call_in_tensorflow_only_process

pytestmark = pytest.mark.generation_neutral

RNG = np.random.default_rng(16)
STATE = RNG.normal(size=(3, 8)).astype("float32")  # one decoder state per row
STATES = RNG.normal(size=(3, 2, 8)).astype("float32")  # two queries per row
SOURCE = RNG.normal(size=(3, 5, 6)).astype("float32")  # encoder states
SOURCE_MASK = np.array(
    [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [0, 0, 0, 0, 0]], bool
)  # the last row has no real position


def _softmax(x, mask):
    x = np.where(mask, x, -np.inf)
    m = np.max(x, -1, keepdims=True)
    e = np.where(mask, np.exp(x - np.where(np.isfinite(m), m, 0)), 0.0)
    s = e.sum(-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _np_additive(scorer, q, k, bias=True):
    # Bahdanau et al. 2015, eq. (6): e_ij = vᵀ tanh(W s_{i-1} + U h_j).
    hidden = (q @ scorer.query_kernel.numpy())[..., :, None, :] + (
        k @ scorer.key_kernel.numpy()
    )[..., None, :, :]
    if bias:
        hidden += scorer.bias.numpy()
    return np.tanh(hidden) @ scorer.score_kernel.numpy()


def _np_luong_scores(layer, q, k):
    # Luong et al. 2015, eq. (8) and the location score a_t = softmax(W_a h_t).
    scorer = layer.scorer
    if layer.score == "dot":
        return np.einsum("bqd,bkd->bqk", q, k)
    if layer.score == "general":
        return np.einsum("bqd,de,bke->bqk", q, scorer.kernel.numpy(), k)
    if layer.score == "location":
        return (q @ scorer.kernel.numpy() + scorer.bias.numpy())[..., : k.shape[1]]
    return _np_additive(scorer, q, k, bias=False)  # concat


def _np_luong(layer, q, k, mask):
    scores = _np_luong_scores(layer, q, k)
    if layer.window is None:
        weights = _softmax(scores, mask[:, None, :])
    else:
        # Luong et al. 2015, eqs. (9)-(10): local-p.
        length = mask.sum(-1)[:, None]
        hidden = np.tanh(q @ layer.position_kernel.numpy())
        p = length * _sigmoid(hidden @ layer.position_score.numpy())  # (b, q)
        s = np.arange(1, k.shape[1] + 1)[None, None, :]
        window = (np.abs(s - p[..., None]) <= layer.window) & mask[:, None, :]
        sigma = layer.window / 2
        gaussian = np.exp(-((s - p[..., None]) ** 2) / (2 * sigma**2))
        weights = _softmax(scores, window) * gaussian
    return np.einsum("bqs,bsd->bqd", weights, k), weights


# BahdanauAttention ----------------------------------------------------------------


def test_bahdanau_matches_the_paper_formula():
    layer = BahdanauAttention(units=4, bias_initializer="random_normal")
    context, weights = layer(STATE, SOURCE, value_mask=SOURCE_MASK)
    scores = _np_additive(layer.scorer, STATE[:, None], SOURCE)[:, 0]
    expected_w = _softmax(scores, SOURCE_MASK)
    np.testing.assert_allclose(weights.numpy(), expected_w, atol=1e-6)
    np.testing.assert_allclose(
        context.numpy(), np.einsum("bs,bsd->bd", expected_w, SOURCE), atol=1e-5
    )
    # A source without real positions: zero weights and a zero context, not NaN.
    np.testing.assert_array_equal(weights.numpy()[2], 0.0)
    np.testing.assert_array_equal(context.numpy()[2], 0.0)
    # Several queries at once give each query's single-query result.
    many, many_w = layer(STATES, SOURCE, value_mask=SOURCE_MASK)
    one, one_w = layer(STATES[:, 1], SOURCE, value_mask=SOURCE_MASK)
    np.testing.assert_allclose(many.numpy()[:, 1], one.numpy(), atol=1e-6)
    np.testing.assert_allclose(many_w.numpy()[:, 1], one_w.numpy(), atol=1e-6)


# LuongAttention -------------------------------------------------------------------


@pytest.mark.parametrize(
    "score,window",
    [
        ("dot", None),
        ("general", None),
        ("location", None),
        ("concat", None),
        ("general", 1),
        ("dot", 2),
    ],
)
def test_luong_matches_the_paper_formula(score, window):
    query = STATES[..., :6] if score == "dot" else STATES
    layer = LuongAttention(
        score=score, units=5, window=window, bias_initializer="random_normal"
    )
    context, weights = layer(query, SOURCE, value_mask=SOURCE_MASK)
    expected_c, expected_w = _np_luong(layer, query, SOURCE, SOURCE_MASK)
    np.testing.assert_allclose(weights.numpy(), expected_w, atol=1e-6)
    np.testing.assert_allclose(context.numpy(), expected_c, atol=1e-5)
    np.testing.assert_array_equal(weights.numpy()[2], 0.0)
    np.testing.assert_array_equal(context.numpy()[2], 0.0)
    assert np.all(np.isfinite(weights.numpy()))


def test_local_p_window_zeroes_positions_outside_it():
    source = RNG.normal(size=(2, 12, 6)).astype("float32")
    layer = LuongAttention(score="general", window=2)
    _, weights = layer(STATES[:2], source)
    p = layer.aligned_position(tf.constant(STATES[:2]), tf.constant(source)).numpy()
    s = np.arange(1, 13)[None, None, :]
    outside = np.abs(s - p[..., None]) > 2
    assert outside.any() and (~outside).any()
    np.testing.assert_array_equal(weights.numpy()[outside], 0.0)
    assert np.all(weights.numpy()[~outside] > 0)
    # p_t lies in [0, S]; the Gaussian makes the weights sum to less than one.
    assert np.all((p >= 0) & (p <= 12))
    assert np.all(weights.numpy().sum(-1) < 1.0)


@pytest.mark.parametrize(
    "layer",
    [
        lambda: BahdanauAttention(units=4),
        lambda: LuongAttention(score="general"),
        lambda: LuongAttention(score="concat", window=2),
    ],
)
def test_padded_source_positions_change_nothing(layer):
    inputs = {"query": STATES, "value": SOURCE, "value_mask": SOURCE_MASK}
    assert_mask_invariant(layer(), inputs, "value", ~SOURCE_MASK)


def test_attention_bad_arguments():
    with pytest.raises(ValueError, match=r"`score` must be one of.*'additive'"):
        LuongAttention(score="additive")
    with pytest.raises(ValueError, match="`window` must be a positive integer.*0"):
        LuongAttention(window=0)
    with pytest.raises(ValueError, match="`units` must be a positive integer.*-2"):
        BahdanauAttention(units=-2)
    with pytest.raises(ValueError, match=r"`value_mask` must have shape .*\(3, 4\)"):
        BahdanauAttention()(STATE, SOURCE, value_mask=np.ones((3, 4), bool))
    with pytest.raises(ValueError, match=r"value.shape=\(3, 6\)"):
        LuongAttention()(STATE, SOURCE[:, 0])


# AttentionDecoder: teacher forcing against NumPy ----------------------------------

VOCAB = 9
TARGET_IDS = np.array([[1, 4, 5, 7], [1, 3, 3, 8], [1, 6, 2, 2]], "int32")


def _np_gru(x, h, cell):
    # Keras' GRU with reset_after=True: gates z, r, candidate, in that order.
    kernel, recurrent, bias = (w.numpy() for w in cell.weights)
    xz, xr, xh = np.split(x @ kernel + bias[0], 3, axis=-1)
    hz, hr, hh = np.split(h @ recurrent + bias[1], 3, axis=-1)
    z, r = _sigmoid(xz + hz), _sigmoid(xr + hr)
    return z * h + (1 - z) * np.tanh(xh + r * hh)


def _np_lstm(x, state, cell):
    kernel, recurrent, bias = (w.numpy() for w in cell.weights)
    h, c = state
    i, f, g, o = np.split(x @ kernel + h @ recurrent + bias, 4, axis=-1)
    c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    return _sigmoid(o) * np.tanh(c), c


def _np_decoder(decoder, ids, source, mask):
    """Teacher forcing written out from the papers, with the layer's weights."""
    emb = decoder.embedding.embeddings.numpy()
    units = decoder.units
    count = np.maximum(mask.sum(-1, keepdims=True), 1)
    mean = (source * mask[..., None]).sum(1) / count
    bridge = np.tanh(
        mean @ decoder.bridge_dense.kernel.numpy() + decoder.bridge_dense.bias.numpy()
    )
    h, c = bridge[:, :units], bridge[:, units:]
    feed = np.zeros((len(ids), units), "float32")
    out_w, out_b = decoder.output_dense.kernel.numpy(), decoder.output_dense.bias
    logits, weights = [], []
    for t in range(ids.shape[1]):
        e = emb[ids[:, t]]
        if decoder.attention == "none":
            # The control: s_t = cell(e, s_{t-1}), logits from s_t alone.
            if decoder.cell_type == "gru":
                h = _np_gru(e, h, decoder.cell)
            else:
                h, c = _np_lstm(e, (h, c), decoder.cell)
            features, a = h, np.zeros(mask.shape, "float32")
        elif decoder.attention == "bahdanau":
            # Bahdanau: attend with s_{t-1}, then s_t = cell([e; c_t], s_{t-1}).
            scores = _np_additive(decoder.attention_layer.scorer, h[:, None], source)
            a = _softmax(scores[:, 0], mask)
            ctx = np.einsum("bs,bsd->bd", a, source)
            x = np.concatenate([e, ctx], -1)
            if decoder.cell_type == "gru":
                h = _np_gru(x, h, decoder.cell)
            else:
                h, c = _np_lstm(x, (h, c), decoder.cell)
            features = np.concatenate([h, ctx], -1)
        else:
            # Luong with input feeding: h_t = cell([e; h̃_{t-1}]), then attend with h_t.
            x = np.concatenate([e, feed], -1)
            if decoder.cell_type == "gru":
                h = _np_gru(x, h, decoder.cell)
            else:
                h, c = _np_lstm(x, (h, c), decoder.cell)
            ctx, a = _np_luong(decoder.attention_layer, h[:, None], source, mask)
            ctx, a = ctx[:, 0], a[:, 0]
            wc = decoder.attention_dense.kernel.numpy()
            feed = features = np.tanh(np.concatenate([ctx, h], -1) @ wc)
        logits.append(features @ out_w + out_b.numpy())
        weights.append(a)
    return np.stack(logits, 1), np.stack(weights, 1)


@pytest.mark.parametrize(
    "attention,cell,score",
    [
        ("luong", "gru", "general"),
        ("bahdanau", "lstm", None),
        ("luong", "lstm", "dot"),
        ("none", "lstm", None),
        ("none", "gru", None),
    ],
)
def test_teacher_forced_decoder_matches_numpy(attention, cell, score):
    units = 6 if score == "dot" else 7
    decoder = AttentionDecoder(
        VOCAB, units, embedding_dim=4, cell=cell, attention=attention, score=score
    )
    logits, weights = decoder(
        TARGET_IDS, SOURCE, source_mask=SOURCE_MASK, return_attention_scores=True
    )
    expected_logits, expected_weights = _np_decoder(
        decoder, TARGET_IDS, SOURCE, SOURCE_MASK
    )
    np.testing.assert_allclose(weights.numpy(), expected_weights, atol=1e-5)
    np.testing.assert_allclose(logits.numpy(), expected_logits, atol=1e-4)
    np.testing.assert_array_equal(weights.numpy()[2], 0.0)  # empty source


def test_decoder_padded_source_positions_change_nothing():
    decoder = AttentionDecoder(VOCAB, 6, attention="luong", window=2)
    inputs = {
        "target_ids": TARGET_IDS,
        "encoder_states": SOURCE,
        "source_mask": SOURCE_MASK,
    }
    assert_mask_invariant(
        decoder,
        inputs,
        "encoder_states",
        ~SOURCE_MASK,
        call_kwargs={"return_attention_scores": True},
    )


# Decoding -------------------------------------------------------------------------


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _teacher_forced_greedy(decoder, source, mask, start, end, max_length):
    """Step-by-step greedy with the teacher-forced call fed its own outputs."""
    batch = len(source)
    ids = np.full((batch, 1), start, "int32")
    out = np.zeros((batch, max_length), "int32")
    lengths = np.zeros(batch, "int32")
    scores = np.zeros(batch)
    finished = np.zeros(batch, bool)
    for t in range(max_length):
        logits = decoder(ids, source, source_mask=mask).numpy()[:, -1]
        log_p = _log_softmax(logits.astype("float64"))
        nxt = np.argmax(log_p[:, 1:], -1) + 1  # id 0 (padding) is never generated
        for b in range(batch):
            if not finished[b]:
                out[b, t], lengths[b] = nxt[b], t + 1
                scores[b] += log_p[b, nxt[b]]
                finished[b] = nxt[b] == end
        ids = np.concatenate([ids, nxt[:, None].astype("int32")], 1)
    return out, lengths, scores


def _decoder_for_decoding():
    decoder = AttentionDecoder(VOCAB, 8, attention="luong", score="general")
    decoder(TARGET_IDS, SOURCE, source_mask=SOURCE_MASK)
    return decoder


def test_greedy_decode_equals_teacher_forced_argmax_fed_its_outputs():
    decoder = _decoder_for_decoding()
    start, max_length = 1, 6
    # Pick an end token the free run reaches in row 0, so ending is exercised.
    free, _, _ = _teacher_forced_greedy(
        decoder, SOURCE, SOURCE_MASK, start, -1, max_length
    )
    end = int(free[0, 2])
    ids, lengths, scores = _teacher_forced_greedy(
        decoder, SOURCE, SOURCE_MASK, start, end, max_length
    )
    assert lengths[0] <= 3
    out = decoder.decode(SOURCE, SOURCE_MASK, start, end, max_length)
    np.testing.assert_array_equal(out["token_ids"].numpy(), ids)
    np.testing.assert_array_equal(out["lengths"].numpy(), lengths)
    np.testing.assert_allclose(out["scores"].numpy(), scores, atol=1e-4)
    # Each step's weights are the teacher-forced weights along the decoded ids.
    inputs = np.concatenate([np.full((3, 1), start), ids[:, :-1]], 1)
    _, weights = decoder(
        inputs.astype("int32"),
        SOURCE,
        source_mask=SOURCE_MASK,
        return_attention_scores=True,
    )
    steps = np.arange(max_length)[None, :] < lengths[:, None]
    expected = np.where(steps[..., None], weights.numpy(), 0.0)
    np.testing.assert_allclose(out["attention_weights"].numpy(), expected, atol=1e-5)


def test_beam_search_of_width_one_equals_greedy():
    decoder = _decoder_for_decoding()
    greedy = decoder.decode(SOURCE, SOURCE_MASK, 1, 3, 6)
    beam = decoder.beam_search(SOURCE, SOURCE_MASK, 1, 3, 6, beam_width=1)
    for key in ("token_ids", "lengths"):
        np.testing.assert_array_equal(beam[key].numpy(), greedy[key].numpy())
    for key in ("scores", "attention_weights"):
        np.testing.assert_allclose(beam[key].numpy(), greedy[key].numpy(), atol=1e-5)


def test_decoder_without_attention_decodes_with_zero_weights():
    decoder = AttentionDecoder(VOCAB, 8, attention="none", cell="lstm")
    decoder(TARGET_IDS, SOURCE, source_mask=SOURCE_MASK)
    greedy = decoder.decode(SOURCE, SOURCE_MASK, 1, 3, 6)
    beam = decoder.beam_search(SOURCE, SOURCE_MASK, 1, 3, 6, beam_width=1)
    np.testing.assert_array_equal(beam["token_ids"].numpy(), greedy["token_ids"])
    wide = decoder.decode(SOURCE, SOURCE_MASK, 1, 3, 6, beam_width=3)
    for out in (greedy, wide):
        assert out["attention_weights"].shape == (3, 6, 5)
        np.testing.assert_array_equal(out["attention_weights"].numpy(), 0.0)
    # The source still matters, through the initial state.
    other = decoder(TARGET_IDS, SOURCE[::-1], source_mask=SOURCE_MASK[::-1])
    assert not np.allclose(other.numpy()[0], decoder(TARGET_IDS, SOURCE).numpy()[0])


def test_beam_search_is_batch_parallel_and_scores_its_output():
    decoder = _decoder_for_decoding()
    out = decoder.decode(SOURCE, SOURCE_MASK, 1, 3, 5, beam_width=3, length_penalty=1)
    for b in range(3):
        row = decoder.decode(
            SOURCE[b : b + 1], SOURCE_MASK[b : b + 1], 1, 3, 5, 3, length_penalty=1
        )
        np.testing.assert_array_equal(row["token_ids"][0], out["token_ids"][b])
    # The score is the log-probability of the returned ids under teacher forcing.
    ids, lengths = out["token_ids"].numpy(), out["lengths"].numpy()
    inputs = np.concatenate([np.ones((3, 1), "int32"), ids[:, :-1]], 1)
    log_p = _log_softmax(decoder(inputs, SOURCE, source_mask=SOURCE_MASK).numpy())
    picked = np.take_along_axis(log_p, ids[..., None], -1)[..., 0]
    expected = np.where(np.arange(5)[None] < lengths[:, None], picked, 0).sum(-1)
    np.testing.assert_allclose(out["scores"].numpy(), expected, atol=1e-4)


PAD, START, END, A, B, C, D = range(7)


class MarkovDecoder(AttentionDecoder):
    """An AttentionDecoder whose next-token distribution is a fixed table indexed
    by the previous token, so sequence probabilities are known exactly."""

    def __init__(self, table, **kwargs):
        super().__init__(vocabulary_size=len(table), units=2, **kwargs)
        table = np.asarray(table, "float64") + 1e-9
        self.table = tf.constant(
            np.log(table / table.sum(-1, keepdims=True)), "float32"
        )

    def _decode_step(self, tokens, carry, encoder_states, source_mask):
        weights = tf.zeros(tf.shape(encoder_states)[:2], encoder_states.dtype)
        return tf.gather(self.table, tokens), carry, weights


def _table(rows):
    table = np.zeros((7, 7))
    table[:, END] = 1.0  # from anywhere else: end
    for prev, probs in rows.items():
        table[prev] = 0.0
        for token, p in probs.items():
            table[prev, token] = p
    return table


# Greedy takes A (0.5) and then C (0.4): 0.2. B (0.4) then C (0.9) gives 0.36.
GREEDY_TRAP = _table(
    {
        START: {A: 0.5, B: 0.4, END: 0.1},
        A: {C: 0.4, D: 0.3, END: 0.3},
        B: {C: 0.9, END: 0.1},
    }
)
# [END] has 0.4; [A, B, END] has 0.6·0.6·0.9 = 0.324 but is three tokens long.
LENGTH_TRAP = _table(
    {START: {END: 0.4, A: 0.6}, A: {B: 0.6, END: 0.4}, B: {END: 0.9, C: 0.1}}
)


def _best_by_brute_force(table, max_length, alpha):
    """Every sequence up to max_length, ranked by log P / ((5 + len) / 6)^alpha."""
    log_table = np.log((table + 1e-9) / (table + 1e-9).sum(-1, keepdims=True))
    best, best_score = None, -np.inf
    for n in range(1, max_length + 1):
        for seq in itertools.product(range(1, 7), repeat=n):
            if END in seq[:-1] or (n < max_length and seq[-1] != END):
                continue
            prev = (START,) + seq[:-1]
            log_p = sum(log_table[p, s] for p, s in zip(prev, seq))
            score = log_p / ((5 + n) / 6) ** alpha
            if score > best_score:
                best, best_score = list(seq), score
    return best


def _decode_markov(table, beam_width, alpha=0.0, max_length=4):
    decoder = MarkovDecoder(table, bridge=False)
    source = np.zeros((2, 3, 4), "float32")
    decoder(np.ones((2, 1), "int32"), source)
    return decoder.decode(
        source, None, START, END, max_length, beam_width, length_penalty=alpha
    )


def test_beam_search_finds_what_greedy_misses():
    assert _best_by_brute_force(GREEDY_TRAP, 4, 0.0) == [B, C, END]
    greedy = _decode_markov(GREEDY_TRAP, beam_width=1)
    np.testing.assert_array_equal(greedy["token_ids"], [[A, C, END, PAD]] * 2)
    beam = _decode_markov(GREEDY_TRAP, beam_width=2)
    np.testing.assert_array_equal(beam["token_ids"], [[B, C, END, PAD]] * 2)
    np.testing.assert_array_equal(beam["lengths"], [3, 3])
    np.testing.assert_allclose(beam["scores"], np.log(0.36), atol=1e-5)
    np.testing.assert_allclose(greedy["scores"], np.log(0.2), atol=1e-5)


def test_length_normalization_changes_the_choice():
    assert _best_by_brute_force(LENGTH_TRAP, 4, 0.0) == [END]
    assert _best_by_brute_force(LENGTH_TRAP, 4, 2.0) == [A, B, END]
    plain = _decode_markov(LENGTH_TRAP, beam_width=2, alpha=0.0)
    np.testing.assert_array_equal(plain["token_ids"], [[END, PAD, PAD, PAD]] * 2)
    np.testing.assert_array_equal(plain["lengths"], [1, 1])
    normalized = _decode_markov(LENGTH_TRAP, beam_width=2, alpha=2.0)
    np.testing.assert_array_equal(normalized["token_ids"], [[A, B, END, PAD]] * 2)
    np.testing.assert_array_equal(normalized["lengths"], [3, 3])
    # The score is the log-probability, unnormalized.
    np.testing.assert_allclose(normalized["scores"], np.log(0.324), atol=1e-5)


@pytest.mark.parametrize("beam_width", [1, 3])
def test_a_sequence_without_end_stops_at_max_length(beam_width):
    table = _table({START: {A: 1.0}, A: {A: 0.9, END: 0.1}})
    out = _decode_markov(table, beam_width=beam_width, max_length=3)
    np.testing.assert_array_equal(out["token_ids"], [[A, A, A]] * 2)
    np.testing.assert_array_equal(out["lengths"], [3, 3])
    np.testing.assert_allclose(out["scores"], np.log(0.81), atol=1e-5)


def test_decoder_bad_arguments():
    with pytest.raises(ValueError, match="`attention` must be one of"):
        AttentionDecoder(VOCAB, 4, attention="transformer")
    with pytest.raises(ValueError, match="`cell` must be one of.*'rnn'"):
        AttentionDecoder(VOCAB, 4, cell="rnn")
    with pytest.raises(ValueError, match=r"`score` must be one of \['additive'\]"):
        AttentionDecoder(VOCAB, 4, attention="bahdanau", score="dot")
    with pytest.raises(ValueError, match='`window`.*attention="luong"'):
        AttentionDecoder(VOCAB, 4, attention="bahdanau", window=2)
    with pytest.raises(ValueError, match='`window`.*attention="luong".*none'):
        AttentionDecoder(VOCAB, 4, attention="none", window=2)
    with pytest.raises(ValueError, match=r'`score` must be None.*"none".*general'):
        AttentionDecoder(VOCAB, 4, attention="none", score="general")
    with pytest.raises(ValueError, match=r"needs `bridge=True`.*bridge=False"):
        AttentionDecoder(VOCAB, 4, attention="none", bridge=False)
    with pytest.raises(ValueError, match=r'score="dot" needs.*units=4'):
        AttentionDecoder(VOCAB, 4, score="dot")(TARGET_IDS, SOURCE)
    decoder = _decoder_for_decoding()
    with pytest.raises(ValueError, match=r"`start_token` must be .*\[1, 9\).*0"):
        decoder.decode(SOURCE, SOURCE_MASK, start_token=0)
    with pytest.raises(ValueError, match=r"`end_token` must be .*end_token=9"):
        decoder.decode(SOURCE, SOURCE_MASK, end_token=9)
    with pytest.raises(ValueError, match="`beam_width` must be a positive integer"):
        decoder.decode(SOURCE, SOURCE_MASK, beam_width=0)
    with pytest.raises(ValueError, match="`length_penalty` must be a float >= 0"):
        decoder.decode(SOURCE, SOURCE_MASK, beam_width=2, length_penalty=-1.0)
    with pytest.raises(ValueError, match=r"`source_mask` must have shape"):
        decoder.decode(SOURCE, np.ones((3, 4), bool))


# The harness and the exported decoder ---------------------------------------------


@pytest.mark.generation_specific
@pytest.mark.slow
def test_bahdanau_attention_harness():
    run_layer_test(
        BahdanauAttention,
        {"units": 4},
        {"query": STATE, "value": SOURCE, "value_mask": SOURCE_MASK},
        expected_output_shape=[(3, 6), (3, 5)],
        expected_num_trainable_weights=4,
    )


@pytest.mark.generation_specific
@pytest.mark.slow
def test_luong_attention_harness():
    run_layer_test(
        LuongAttention,
        {"score": "general", "window": 2},
        {"query": STATES, "value": SOURCE, "value_mask": SOURCE_MASK},
        expected_output_shape=[(3, 2, 6), (3, 2, 5)],
        expected_num_trainable_weights=3,
    )


@pytest.mark.generation_specific
@pytest.mark.slow
@pytest.mark.parametrize(
    "kwargs,num_weights,saved_model",
    [
        # embedding, cell (3), W_a, W_c, bridge (2), output (2)
        ({"attention": "luong", "cell": "gru"}, 10, True),
        # embedding, cell (3), additive score (4), bridge (2), output (2); its
        # SavedModel is the exported-decoder test's.
        ({"attention": "bahdanau", "cell": "lstm", "dropout": 0.1}, 12, False),
    ],
)
def test_attention_decoder_harness(kwargs, num_weights, saved_model):
    run_layer_test(
        AttentionDecoder,
        {"vocabulary_size": VOCAB, "units": 6, **kwargs},
        {
            "target_ids": TARGET_IDS,
            "encoder_states": SOURCE,
            "source_mask": SOURCE_MASK,
        },
        expected_output_shape=[(3, 4, VOCAB), (3, 4, 5)],
        expected_num_trainable_weights=num_weights,
        call_kwargs={"return_attention_scores": True},
        run_saved_model=saved_model,
        atol=1e-4,
    )


class _DecodeModule(tf.Module):
    def __init__(self, decoder, dim):
        super().__init__()
        self.decoder = decoder
        self.serve = tf.function(
            self._serve,
            autograph=False,  # explicit tf.while_loop: nothing to convert
            input_signature=[
                tf.TensorSpec([None, None, dim], tf.float32, name="encoder_states"),
                tf.TensorSpec([None, None], tf.bool, name="source_mask"),
            ],
        )

    def _serve(self, encoder_states, source_mask):
        return self.decoder.decode(
            encoder_states, source_mask, 1, 3, 6, beam_width=3, length_penalty=0.6
        )


@pytest.mark.generation_specific
@pytest.mark.slow
def test_exported_decoder_decodes_in_a_tensorflow_only_process():
    decoder = AttentionDecoder(VOCAB, 8, attention="bahdanau", cell="lstm")
    decoder(TARGET_IDS, SOURCE, source_mask=SOURCE_MASK)
    module = _DecodeModule(decoder, dim=6)
    # A longer source than the decoder was built with: the signature's shapes are open.
    longer = np.concatenate([SOURCE, SOURCE[:, :2]], 1)
    longer_mask = np.concatenate([SOURCE_MASK, SOURCE_MASK[:, :2]], 1)
    expected = {k: v.numpy() for k, v in module.serve(longer, longer_mask).items()}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "decoder")
        tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
        got = call_in_tensorflow_only_process(
            path, {"encoder_states": longer, "source_mask": longer_mask}
        )
    assert set(got) == {"token_ids", "lengths", "scores", "attention_weights"}
    for key, value in expected.items():
        np.testing.assert_allclose(got[key], value, atol=1e-5, err_msg=key)
