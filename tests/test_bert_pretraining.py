"""BERT pretraining: the tf.data pipeline (pairs, packing, masking) and the model
(tied MLM head, NSP head, losses), a short pretraining run, fine-tuning, saving."""

import math

import numpy as np
import pytest

from keras_attn.backend import keras, tf
from keras_attn.models.bert_pretraining import (
    BertPretrainer,
    MaskedLMAccuracy,
    MaskedLMLoss,
    build_bert_pretrainer,
    compile_bert_pretrainer,
)
from keras_attn.models.text import (
    build_bert,
    build_bert_classifier,
    compile_text_classifier,
)
from keras_attn.text import Tokenizer, build_vocabulary, load_review_sample
from keras_attn.text.pretraining import (
    mask_tokens,
    pack_document_windows,
    pretraining_dataset,
)

pytestmark = pytest.mark.generation_neutral

V, MASK_ID, SPECIAL = 1000, 4, (1, 2, 3)  # [PAD]=0, [CLS]/[SEP]/[UNK]-like ids


def _tolerance(p, n, sds=4.0):
    """`sds` binomial standard deviations of a proportion `p` over `n` trials."""
    return sds * math.sqrt(p * (1 - p) / n)


def _batch(rows=128, length=128, seed=0):
    """Packed-looking ids: [CLS]=1, ordinary ids, [SEP]=2 inside, padding at the end."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, V, size=(rows, length))
    lengths = rng.integers(length // 2, length + 1, size=rows)
    for row, n in enumerate(lengths):
        ids[row, 0] = 1
        ids[row, n // 2] = 2
        ids[row, n - 1] = 2
        ids[row, n:] = 0
    return ids.astype("int32")


# --- masking -------------------------------------------------------------------


def test_masking_statistics():
    ids = _batch()
    new, positions, labels = (
        t.numpy() for t in mask_tokens(ids, V, MASK_ID, SPECIAL, 128, seed=(3, 4))
    )
    candidates = (ids > 4).sum(axis=1)
    used = labels != 0
    # The count per row is round(15%) of the candidates; over all rows the rate
    # must sit within the binomial spread of 15% (a looser check than exact).
    np.testing.assert_array_equal(used.sum(1), np.round(candidates * 0.15))
    rate = used.sum() / candidates.sum()
    assert abs(rate - 0.15) < _tolerance(0.15, candidates.sum())
    rows = np.broadcast_to(np.arange(len(ids))[:, None], positions.shape)
    original = ids[rows[used], positions[used]]
    # Specials and padding are never selected; labels are the original ids.
    assert (original > 4).all()
    np.testing.assert_array_equal(labels[used], original)
    # Positions are distinct and sorted, unused slots are 0 at the end.
    for row in range(len(ids)):
        chosen = positions[row][used[row]]
        assert (np.diff(chosen) > 0).all()
        assert (positions[row][~used[row]] == 0).all()
    # Outside the selection nothing changes.
    selected = np.zeros_like(ids, bool)
    selected[rows[used], positions[used]] = True
    np.testing.assert_array_equal(new[~selected], ids[~selected])
    # 80% [MASK], 10% random, 10% unchanged.
    replaced = new[rows[used], positions[used]]
    n = used.sum()
    share_mask = (replaced == MASK_ID).mean()
    share_same = (replaced == original).mean()
    share_random = 1 - share_mask - share_same
    assert abs(share_mask - 0.8) < _tolerance(0.8, n)
    assert abs(share_same - 0.1) < _tolerance(0.1, n)
    assert abs(share_random - 0.1) < _tolerance(0.1, n)
    # A random replacement is an ordinary id, never padding or a special token.
    assert (replaced[replaced != MASK_ID] > 4).all()


def test_max_predictions_and_zero_rate():
    ids = _batch(rows=16)
    _, positions, labels = mask_tokens(ids, V, MASK_ID, SPECIAL, max_predictions=5)
    candidates = (ids > 4).sum(axis=1)
    assert positions.shape == (16, 5)
    np.testing.assert_array_equal(
        (labels.numpy() != 0).sum(1), np.minimum(5, np.round(candidates * 0.15))
    )
    new, _, labels = mask_tokens(ids, V, MASK_ID, SPECIAL, 5, mask_rate=0.0)
    assert not labels.numpy().any()
    np.testing.assert_array_equal(new.numpy(), ids)
    # One candidate and a small rate: still one prediction.
    one = np.array([[1, 7, 2, 0, 0, 0]], "int32")
    _, _, labels = mask_tokens(one, V, MASK_ID, SPECIAL, 3)
    assert labels.numpy().tolist() == [[7, 0, 0]]


def test_masking_is_seeded():
    ids = _batch(rows=8)
    a = [t.numpy() for t in mask_tokens(ids, V, MASK_ID, SPECIAL, 20, seed=(1, 2))]
    b = [t.numpy() for t in mask_tokens(ids, V, MASK_ID, SPECIAL, 20, seed=(1, 2))]
    c = [t.numpy() for t in mask_tokens(ids, V, MASK_ID, SPECIAL, 20, seed=(1, 3))]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[1], c[1])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mask_rate": 1.5}, "mask_rate"),
        ({"mask_token_rate": -0.1}, "mask_token_rate"),
        ({"mask_token_rate": 0.9, "random_token_rate": 0.2}, "at most 1"),
        ({"max_predictions": 0}, "max_predictions"),
        ({"max_predictions": 200}, "sequence length"),
    ],
)
def test_mask_tokens_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mask_tokens(_batch(rows=2), V, MASK_ID, SPECIAL, **kwargs)


# --- sentence pairs ----------------------------------------------------------


def _toy_corpus(num_docs=24, words=None, seed=0):
    """Documents of recognizable sentences `dK sJ [wJ ...] .` (doc K, sentence J)."""
    rng = np.random.default_rng(seed)
    docs, sizes = [], []
    for k in range(num_docs):
        n = int(rng.integers(3, 9))
        sentences = []
        for j in range(n):
            extra = "" if words is None else " w" * int(words[(k + j) % len(words)])
            sentences.append(f"d{k} s{j}{extra} .")
        docs.append(" ".join(sentences))
        sizes.append(n)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "w"]
    vocab += [f"d{k}" for k in range(num_docs)] + [f"s{j}" for j in range(9)]
    return docs, sizes, Tokenizer(vocab, method="word")


def _segments(tokenizer, token_ids, segment_ids):
    """The token strings of segments A and B of each packed row."""
    out = []
    for ids, seg in zip(token_ids, segment_ids):
        words = [tokenizer.vocabulary[i] for i in ids]
        assert words[0] == "[CLS]"
        length = int((ids != 0).sum())
        first_sep = words.index("[SEP]")
        assert words[length - 1] == "[SEP]"
        assert seg[: first_sep + 1].tolist() == [0] * (first_sep + 1)
        assert seg[first_sep + 1 : length].tolist() == [1] * (length - first_sep - 1)
        assert not seg[length:].any()
        out.append((words[1:first_sep], words[first_sep + 1 : length - 1]))
    return out


def _sentences(words):
    """`[(doc, sentence), ...]` of a segment's words."""
    return [
        (int(w[1:]), int(n[1:]))
        for w, n in zip(words, words[1:])
        if w.startswith("d") and n.startswith("s")
    ]


def _pairs(docs, tokenizer, **kwargs):
    kwargs = {
        "sequence_length": 40,
        "batch_size": 16,
        "max_predictions": 4,
        "mask_rate": 0.0,
        **kwargs,
    }
    token_ids, segment_ids, is_next = [], [], []
    for x, y in pretraining_dataset(docs, tokenizer, **kwargs):
        assert not x["masked_positions"].numpy().any()
        token_ids.append(x["token_ids"].numpy())
        segment_ids.append(x["segment_ids"].numpy())
        is_next.append(y["nsp"].numpy())
    return (np.concatenate(t) for t in (token_ids, segment_ids, is_next))


@pytest.mark.parametrize("per_segment", [1, 2])
def test_nsp_pairs_by_construction(per_segment):
    docs, sizes, tokenizer = _toy_corpus()
    token_ids, segment_ids, is_next = _pairs(
        docs, tokenizer, sentences_per_segment=per_segment, documents_per_chunk=6
    )
    # One pair per run of 2n consecutive sentences of a document.
    assert len(is_next) == sum(s - 2 * per_segment + 1 for s in sizes)
    for (a, b), label in zip(_segments(tokenizer, token_ids, segment_ids), is_next):
        a, b = _sentences(a), _sentences(b)
        assert len(a) == len(b) == per_segment
        doc = a[0][0]
        # Each segment is consecutive sentences of one document.
        for segment in (a, b):
            assert [d for d, _ in segment] == [segment[0][0]] * per_segment
            assert [s for _, s in segment] == list(
                range(segment[0][1], segment[0][1] + per_segment)
            )
        if label == 1:
            assert b[0] == (doc, a[-1][1] + 1)
        else:
            assert b[0][0] != doc
    share = is_next.mean()
    assert abs(share - 0.5) < _tolerance(0.5, len(is_next))


@pytest.mark.slow
def test_truncation_follows_bert():
    lengths = [1, 9, 3, 14, 6, 2, 11]
    docs, _, tokenizer = _toy_corpus(num_docs=10, words=lengths, seed=1)
    length = 14
    token_ids, segment_ids, _ = _pairs(docs, tokenizer, sequence_length=length)
    checked = 0

    def sentence(words):
        doc, index = int(words[0][1:]), int(words[1][1:])
        return words[:2] + ["w"] * lengths[(doc + index) % len(lengths)] + ["."]

    for a, b in _segments(tokenizer, token_ids, segment_ids):
        # Rebuild the full sentences and truncate them as BERT's loop does.
        full_a, full_b = sentence(a), sentence(b)
        ta, tb = list(full_a), list(full_b)
        while len(ta) + len(tb) > length - 3:
            (ta if len(ta) > len(tb) else tb).pop()
        assert (a, b) == (ta, tb)
        checked += len(full_a) + len(full_b) > length - 3
    assert checked > 5  # the case under test happened


@pytest.mark.slow
def test_dataset_shapes_dtypes_and_seed():
    docs, _, tokenizer = _toy_corpus(num_docs=8)
    kwargs = {"sequence_length": 24, "batch_size": 8, "max_predictions": 4}
    ds = pretraining_dataset(docs, tokenizer, seed=5, **kwargs)
    x, y = next(iter(ds))
    assert sorted(x) == ["masked_positions", "segment_ids", "token_ids"]
    assert sorted(y) == ["mlm", "nsp"]
    assert x["token_ids"].shape == (8, 24) and x["segment_ids"].shape == (8, 24)
    assert x["masked_positions"].shape == (8, 4) and y["mlm"].shape == (8, 4)
    assert y["nsp"].shape == (8,)
    for t in (*x.values(), *y.values()):
        assert t.dtype == tf.int32
    first = [b for b in pretraining_dataset(docs, tokenizer, seed=5, **kwargs)]
    again = [b for b in pretraining_dataset(docs, tokenizer, seed=5, **kwargs)]
    other = [b for b in pretraining_dataset(docs, tokenizer, seed=6, **kwargs)]
    flat = [tf.nest.flatten(b) for b in (first, again, other)]
    assert all(np.array_equal(p, q) for p, q in zip(flat[0], flat[1]))
    assert not all(np.array_equal(p, q) for p, q in zip(flat[0], flat[2]))
    # A dataset of strings works as a list does.
    from_ds = pretraining_dataset(
        tf.data.Dataset.from_tensor_slices(docs), tokenizer, seed=5, **kwargs
    )
    assert all(
        np.array_equal(p, q) for p, q in zip(flat[0], tf.nest.flatten(list(from_ds)))
    )
    # Several epochs: fresh masks on the second pass.
    two = list(pretraining_dataset(docs, tokenizer, num_epochs=2, seed=5, **kwargs))
    assert len(two) >= 2 * len(first) - 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sequence_length": 3}, "sequence_length"),
        ({"batch_size": 0}, "batch_size"),
        ({"next_sentence_rate": 2.0}, "next_sentence_rate"),
        ({"mask_rate": -0.5}, "mask_rate"),
        ({"max_predictions": 50, "sequence_length": 20}, "max_predictions"),
        ({"sentences_per_segment": 0}, "sentences_per_segment"),
        ({"num_epochs": 0}, "num_epochs"),
        ({"seed": "x"}, "seed"),
    ],
)
def test_dataset_validation(kwargs, match):
    docs, _, tokenizer = _toy_corpus(num_docs=3)
    with pytest.raises(ValueError, match=match):
        pretraining_dataset(docs, tokenizer, **kwargs)


def test_dataset_rejects_bad_corpus_and_vocabulary():
    docs, _, tokenizer = _toy_corpus(num_docs=3)
    with pytest.raises(ValueError, match="corpus"):
        pretraining_dataset("one string", tokenizer)
    with pytest.raises(ValueError, match="corpus"):
        pretraining_dataset([], tokenizer)
    plain = Tokenizer(["[PAD]", "[UNK]", "a"], method="word")
    with pytest.raises(ValueError, match="MASK"):
        pretraining_dataset(docs, plain)


# --- single-segment windows (MLM only) ---------------------------------------


def test_document_windows_cover_each_document_once_in_order():
    docs, _, tokenizer = _toy_corpus(num_docs=7, words=[0, 5, 2], seed=2)
    docs = docs + [""]  # an empty document gives no window
    length = 9
    out = pack_document_windows(docs, tokenizer, length)
    token_ids, segment_ids = out["token_ids"].numpy(), out["segment_ids"].numpy()
    assert token_ids.shape[1] == length and not segment_ids.any()
    assert out["is_next"].numpy().tolist() == [1] * len(token_ids)
    cls, sep = tokenizer.token_id("[CLS]"), tokenizer.token_id("[SEP]")
    rows = iter(token_ids.tolist())
    for doc in docs:
        words = doc.split()
        expected = [tokenizer.vocabulary.index(w) for w in words]
        # The document's windows, in order, give back its tokens, each once.
        got = []
        while len(got) < len(expected):
            row = [i for i in next(rows) if i]
            assert row[0] == cls and row[-1] == sep and len(row) <= length
            assert len(row) - 2 == min(length - 2, len(expected) - len(got))
            got += row[1:-1]
        assert got == expected
    assert next(rows, None) is None
    # The first window of a document is what the classifier's tokenizer gives.
    wordpiece = Tokenizer("bert-base-uncased", sequence_length=6)
    text = ["A wonderful, moving film. I loved every minute!"]
    first = pack_document_windows(text, wordpiece, 6)["token_ids"][:1]
    np.testing.assert_array_equal(first, wordpiece(tf.constant(text)))


def test_mlm_only_dataset_masks_the_windows():
    docs, _, tokenizer = _toy_corpus(num_docs=10, words=[3, 1], seed=3)
    kwargs = {"sequence_length": 10, "batch_size": 4, "max_predictions": 3}
    windows = pack_document_windows(docs, tokenizer, 10)["token_ids"].numpy()
    plain = list(
        pretraining_dataset(
            docs, tokenizer, sentence_pairs=False, mask_rate=0.0, **kwargs
        )
    )
    ids = np.concatenate([x["token_ids"].numpy() for x, _ in plain])
    # The same windows (shuffled), one segment each, no NSP.
    assert sorted(map(tuple, ids)) == sorted(map(tuple, windows))
    for x, y in plain:
        assert not x["segment_ids"].numpy().any()
        assert y["nsp"].numpy().all()
    # The same seed: the same windows in the same order, now masked.
    masked = pretraining_dataset(docs, tokenizer, sentence_pairs=False, **kwargs)
    for (clean, _), (x, y) in zip(plain, masked):
        labels, positions = y["mlm"].numpy(), x["masked_positions"].numpy()
        restored = x["token_ids"].numpy().copy()
        assert (labels != 0).any(axis=1).all()  # every window has a target
        for row in range(len(restored)):
            used = labels[row] != 0
            restored[row, positions[row][used]] = labels[row][used]
        # The targets are the window's own tokens at their positions.
        np.testing.assert_array_equal(restored, clean["token_ids"].numpy())
    with pytest.raises(ValueError, match="sentence_pairs"):
        pretraining_dataset(docs, tokenizer, sentence_pairs="no")


# --- model -------------------------------------------------------------------


def _encoder(vocabulary_size=50, embedding_dim=None, length=12):
    return build_bert(
        vocabulary_size,
        sequence_length=length,
        hidden_dim=16,
        num_layers=2,
        num_heads=2,
        embedding_dim=embedding_dim,
        dropout=0.0,
    )


def _inputs(vocabulary_size=50, length=12, predictions=3, batch=2):
    rng = np.random.default_rng(0)
    ids = rng.integers(1, vocabulary_size, size=(batch, length)).astype("int32")
    positions = np.sort(
        rng.choice(np.arange(1, length), size=(batch, predictions)), axis=1
    ).astype("int32")
    return {
        "token_ids": ids,
        "segment_ids": np.zeros_like(ids),
        "masked_positions": positions,
    }


def _erf_gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


@pytest.mark.parametrize("embedding_dim", [None, 8])
def test_mlm_head_is_tied_to_the_embedding(embedding_dim):
    bert = _encoder(embedding_dim=embedding_dim)
    model = build_bert_pretrainer(bert)
    x = _inputs()
    out = model(x)
    assert out["mlm"].shape == (2, 3, 50) and out["nsp"].shape == (2, 2)
    assert out["mlm"].dtype == tf.float32
    table = bert.token_embedding.embeddings
    assert model.token_embeddings() is table
    # No separate vocabulary-size kernel: the only weights with a 50-wide axis are
    # the embedding table and the output bias.
    vocab_sized = [w for w in model.weights if 50 in tuple(w.shape)]
    assert sorted(tuple(w.shape) for w in vocab_sized) == sorted(
        [tuple(table.shape), (50,)]
    )
    # The logits are the NumPy head on the encoder's own hidden states.
    sequence = bert({"token_ids": x["token_ids"], "segment_ids": x["segment_ids"]})[
        "sequence_output"
    ].numpy()
    gathered = np.take_along_axis(sequence, x["masked_positions"][..., None], axis=1)
    dense, norm = model.mlm_dense, model.mlm_norm
    h = _erf_gelu(gathered @ dense.kernel.numpy() + dense.bias.numpy())
    mean, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
    h = (h - mean) / np.sqrt(var + 1e-12) * norm.gamma.numpy() + norm.beta.numpy()
    logits = h @ table.numpy().T + model.mlm_bias.numpy()
    np.testing.assert_allclose(out["mlm"].numpy(), logits, rtol=1e-4, atol=1e-4)
    # Changing the embedding variable changes the logits.
    table.assign(table.numpy() * 2.0)
    assert not np.allclose(model(x)["mlm"].numpy(), out["mlm"].numpy())
    # The MLM loss reaches the embedding table through the tie.
    with tf.GradientTape() as tape:
        loss = MaskedLMLoss()(np.ones((2, 3), "int32"), model(x)["mlm"])
    grad = tape.gradient(loss, table)
    assert grad is not None
    assert float(tf.reduce_sum(tf.abs(tf.convert_to_tensor(grad)))) > 0


def test_masked_lm_loss_and_accuracy_numpy():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(3, 4, 6)).astype("float32")
    labels = np.array([[2, 5, 0, 0], [1, 0, 0, 0], [3, 3, 4, 0]], "int32")
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    used = labels != 0
    nll = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
    expected = nll[used].mean()
    loss = MaskedLMLoss()(labels, logits)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    # Unmasked slots do not count: changing their logits changes nothing.
    changed = logits.copy()
    changed[~used] += 10 * rng.normal(size=changed[~used].shape)
    np.testing.assert_allclose(float(MaskedLMLoss()(labels, changed)), expected, 1e-5)
    metric = MaskedLMAccuracy()
    metric.update_state(labels, logits)
    hits = (logits.argmax(-1) == labels)[used].mean()
    np.testing.assert_allclose(float(metric.result()), hits, rtol=1e-6)


def test_pretrainer_and_classifier_validation():
    with pytest.raises(ValueError, match="build_bert"):
        BertPretrainer(keras.Sequential([keras.layers.Dense(2)]))
    bert = _encoder()
    with pytest.raises(ValueError, match="num_classes"):
        build_bert_classifier(bert, 1)
    with pytest.raises(ValueError, match="dropout"):
        build_bert_classifier(bert, 2, dropout=1.0)
    with pytest.raises(ValueError, match="class_names"):
        build_bert_classifier(bert, 2, class_names=["a"])
    with pytest.raises(ValueError, match="nsp_weight"):
        compile_bert_pretrainer(build_bert_pretrainer(bert), nsp_weight=-1)


@pytest.mark.generation_specific
@pytest.mark.slow
@pytest.mark.parametrize("embedding_dim", [None, 8])
def test_save_and_reload_keeps_the_tie(tmp_path, embedding_dim):
    bert = _encoder(embedding_dim=embedding_dim)
    model = compile_bert_pretrainer(build_bert_pretrainer(bert))
    x = _inputs()
    expected = model(x)
    path = str(tmp_path / "pretrainer.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    out = reloaded(x)
    for key in ("mlm", "nsp"):
        np.testing.assert_allclose(out[key].numpy(), expected[key].numpy(), 1e-5, 1e-5)
    table = reloaded.token_embeddings()
    assert table is reloaded.encoder.token_embedding.embeddings
    table.assign(table.numpy() + 1.0)
    assert not np.allclose(reloaded(x)["mlm"].numpy(), out["mlm"].numpy())

    classifier = build_bert_classifier(bert, 2, class_names=["neg", "pos"])
    features = {k: x[k] for k in ("token_ids", "segment_ids")}
    before = classifier(features)["probabilities"].numpy()
    path = str(tmp_path / "classifier.keras")
    classifier.save(path)
    again = keras.models.load_model(path)
    np.testing.assert_allclose(again(features)["probabilities"].numpy(), before, 1e-5)


@pytest.mark.generation_specific
@pytest.mark.slow
def test_pretraining_lowers_mlm_loss_then_fine_tunes():
    texts, labels = load_review_sample()
    vocab = build_vocabulary(texts, max_tokens=1500) + ["[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(vocab, method="word", sequence_length=64)
    kwargs = {"sequence_length": 64, "batch_size": 32, "max_predictions": 10}
    train = pretraining_dataset(texts[:40], tokenizer, **kwargs).cache()
    held_out = list(
        pretraining_dataset(texts[380:], tokenizer, seed=9, **kwargs).take(4)
    )
    bert = build_bert(
        len(vocab), sequence_length=64, hidden_dim=32, num_layers=2, num_heads=2
    )
    model = compile_bert_pretrainer(
        build_bert_pretrainer(bert), learning_rate=2e-3, jit_compile=False
    )

    def mlm_loss():
        total = count = 0.0
        for x, y in held_out:
            n = float(np.sum(y["mlm"].numpy() != 0))
            total += float(MaskedLMLoss()(y["mlm"], model(x)["mlm"])) * n
            count += n
        return total / count

    initial = mlm_loss()
    assert abs(initial - math.log(len(vocab))) < 1.0  # an untrained model: ~ln V
    history = model.fit(train, epochs=3, verbose=0)
    final = mlm_loss()
    assert history.history["mlm_loss"][-1] < history.history["mlm_loss"][0]
    assert final < initial - 1.0, (initial, final)

    # The pretrained encoder carries into the classifier and fine-tunes.
    pretrained = [w.numpy() for w in bert.weights]
    classifier = compile_text_classifier(build_bert_classifier(bert, 2), 1e-3)
    assert classifier.backbone is bert
    ids = tokenizer(tf.constant(texts[:64])).numpy()
    y = np.array([label == "pos" for label in labels[:64]], "int32")
    # Keras 3 wants a target for every output; `label` has no loss.
    targets = {"probabilities": y, "label": y}
    features = {"token_ids": ids, "segment_ids": np.zeros_like(ids)}
    ds = tf.data.Dataset.from_tensor_slices((features, targets)).batch(16)
    history = classifier.fit(ds, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert any(
        not np.allclose(before, w.numpy())
        for before, w in zip(pretrained, bert.weights)
    )
