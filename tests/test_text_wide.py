"""The wide part (hashed n-grams, a linear model) and fit_text_classifier's defaults."""

import json
import re

import numpy as np
import pytest

from keras_attn.backend import keras, tf
from keras_attn.layers import NgramLinear
from keras_attn.models.text import (
    build_han_classifier,
    build_text_serving_model,
    build_transformer_classifier,
    han_attention_model,
    wide_layer,
)
from keras_attn.models.text_classifier import (
    _tokenize_all,
    corpus_limits,
    fit_text_classifier,
)
from keras_attn.serving import export_text_classifier
from keras_attn.text import HashedNgrams, SentenceTokenizer, build_vocabulary
from tests.harness import run_isolated
from tests.test_text_serving import _RELOAD, QUERIES, TRAIN

pytestmark = pytest.mark.generation_neutral

# Plain ASCII with sentence ends and punctuation: the Python rule below applies.
DOCS = [
    "Not good at all. Very bad film!",
    "A fine, fine cast?! The end",
    "one",
    "",
]


def python_ngrams(text, widths=(1, 2)):
    """The n-gram rule written out in Python for lower-cased ASCII text.

    Sentences end after a run of .!?; words are split on whitespace with every
    punctuation character its own word; n-grams stay inside a sentence, in the
    order unigrams then bigrams per sentence.
    """
    grams = []
    for sentence in re.findall(r"[^.!?]*[.!?]*", text.lower()):
        words = re.sub(r"([^\w\s])", r" \1 ", sentence).split()
        if not words:
            continue
        for n in widths:
            grams += [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
    return grams


def test_ngrams_match_the_python_rule_and_stay_inside_sentences():
    layer = HashedNgrams(num_buckets=97, max_ngrams=12)
    got = [[g.decode() for g in row] for row in layer.ngrams(DOCS).to_list()]
    assert got == [python_ngrams(d) for d in DOCS]
    first = got[0]
    # The boundary rule: no bigram joins "." to the next sentence's first word.
    assert "good at" in first and "bad film" in first
    assert not any(g.startswith(". ") for g in first) and ". very" not in first
    assert "all . very" not in " | ".join(first)


def test_hashed_ids_are_one_plus_the_tf_fingerprint_bucket_truncated_and_padded():
    num_buckets, max_ngrams = 97, 12
    ids = HashedNgrams(num_buckets=num_buckets, max_ngrams=max_ngrams)(
        tf.constant(DOCS)
    ).numpy()
    assert ids.shape == (len(DOCS), max_ngrams) and ids.dtype == np.int32
    for row, text in zip(ids, DOCS):
        grams = python_ngrams(text)[:max_ngrams]
        expected = np.zeros(max_ngrams, "int64")
        if grams:
            # The hash of each Python-built string, one by one.
            expected[: len(grams)] = [
                1 + int(tf.strings.to_hash_bucket_fast(g, num_buckets)) for g in grams
            ]
        np.testing.assert_array_equal(row, expected)
    assert (ids[-1] == 0).all()  # an empty string is all padding
    assert ids.max() <= num_buckets and ids[ids > 0].min() >= 1


def test_ids_of_training_tf_data_and_graph_are_identical():
    texts = DOCS + QUERIES
    layer = HashedNgrams(num_buckets=1 << 12, max_ngrams=40)
    eager = _tokenize_all(layer, texts, batch_size=3)  # what fit_text_classifier does
    mapped = np.concatenate(
        list(
            tf.data.Dataset.from_tensor_slices(texts)
            .batch(4)
            .map(layer)
            .as_numpy_iterator()
        )
    )
    graph = tf.function(layer.tokenize)(tf.constant(texts)).numpy()
    np.testing.assert_array_equal(eager, mapped)
    np.testing.assert_array_equal(eager, graph)


def test_ngram_linear_matches_numpy_for_every_combiner():
    rng = np.random.default_rng(0)
    ids = np.array([[3, 5, 5, 0, 0], [0, 0, 0, 0, 0], [1, 9, 2, 7, 4]], "int32")
    kernel = rng.normal(size=(11, 3)).astype("float32")
    for combiner, scale in (("sum", 1.0), ("mean", 1.0), ("sqrtn", 2.5)):
        layer = NgramLinear(3, num_buckets=10, combiner=combiner, scale=scale)
        layer.build(ids.shape)
        layer.kernel.assign(kernel)
        expected = np.zeros((3, 3), "float32")
        for b, row in enumerate(ids):
            real = row[row != 0]
            if real.size:
                total = kernel[real].sum(0)
                divisor = {"sum": 1, "mean": real.size, "sqrtn": np.sqrt(real.size)}
                expected[b] = scale * total / divisor[combiner]
        np.testing.assert_allclose(layer(ids).numpy(), expected, rtol=1e-5)
        assert (layer(ids).numpy()[1] == 0).all()  # fully padded row: zeros


def test_ngram_dropout_only_while_training():
    layer = NgramLinear(1, num_buckets=10, combiner="sum", dropout=0.5)
    ids = np.tile(np.arange(1, 11, dtype="int32"), (64, 1))
    layer.build(ids.shape)
    layer.kernel.assign(np.ones((11, 1), "float32"))
    np.testing.assert_array_equal(layer(ids, training=False).numpy(), 10.0)
    dropped = layer(ids, training=True).numpy()
    assert dropped.min() < 10 and 3 < dropped.mean() < 7


@pytest.mark.generation_specific
def test_configs_round_trip():
    hashing = HashedNgrams(num_buckets=50, ngram_widths=[1, 3], max_ngrams=7)
    again = HashedNgrams.from_config(hashing.get_config())
    assert again.get_config() == hashing.get_config()
    np.testing.assert_array_equal(again(tf.constant(DOCS)), hashing(tf.constant(DOCS)))
    linear = NgramLinear(
        4, num_buckets=50, combiner="mean", dropout=0.1, ngram_widths=[1, 3], scale=3
    )
    assert NgramLinear.from_config(linear.get_config()).get_config() == (
        linear.get_config()
    )
    assert HashedNgrams.matching(linear).get_config()["ngram_widths"] == [1, 3]


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: HashedNgrams(num_buckets=0), "num_buckets"),
        (lambda: HashedNgrams(ngram_widths=[]), "ngram_widths"),
        (lambda: HashedNgrams(ngram_widths=[1, 0]), "ngram_widths"),
        (lambda: HashedNgrams(max_ngrams=0), "max_ngrams"),
        (lambda: NgramLinear(2, combiner="max"), "combiner"),
        (lambda: NgramLinear(2, dropout=1.0), "dropout"),
        (lambda: NgramLinear(0), "units"),
        (lambda: NgramLinear(2, scale=0), "scale"),
        (lambda: build_han_classifier(20, 2, wide="yes"), "wide"),
    ],
)
def test_bad_arguments_name_themselves(make, match):
    with pytest.raises(ValueError, match=f"`{match}`.*Received"):
        make()


def _tiny_han(wide, texts=TRAIN):
    tokenizer = SentenceTokenizer(build_vocabulary(texts), max_sentences=3, max_words=6)
    model = build_han_classifier(
        tokenizer.vocabulary_size,
        2,
        3,
        6,
        embedding_dim=8,
        units=4,
        attention_units=8,
        wide=wide,
    )
    return model, tokenizer


def _perturb_wide(model, seed=1):
    # Distinct wide weights, so any difference in hashing changes the output.
    layer = wide_layer(model)
    shape = tuple(layer.kernel.shape)
    layer.kernel.assign(np.random.default_rng(seed).normal(size=shape).astype("f"))


def test_wide_classifiers_add_the_wide_logits_to_the_deep_ones():
    model, tokenizer = _tiny_han({"num_buckets": 64, "max_ngrams": 16})
    _perturb_wide(model)
    texts = tf.constant(TRAIN[:4])
    inputs = {
        "token_ids": tokenizer(texts),
        "ngram_ids": HashedNgrams.matching(wide_layer(model))(texts),
    }
    probabilities = model(inputs)["probabilities"].numpy()
    deep = keras.Model(model.inputs, model.output_dense.output)(inputs)
    wide = wide_layer(model)(inputs["ngram_ids"])
    logits = deep.numpy() + wide.numpy()
    expected = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(probabilities, expected, rtol=1e-5)
    weights = han_attention_model(model)(inputs)
    np.testing.assert_allclose(weights["probabilities"], probabilities, rtol=1e-5)

    transformer = build_transformer_classifier(
        30, 3, 8, hidden_dim=8, num_heads=2, wide={"num_buckets": 16, "max_ngrams": 5}
    )
    out = transformer(
        {"token_ids": np.ones((2, 8), "int32"), "ngram_ids": np.ones((2, 5), "int32")}
    )
    assert out["probabilities"].shape == (2, 3)


@pytest.mark.generation_specific
@pytest.mark.slow
def test_wide_export_takes_raw_strings_and_reloads_in_tensorflow_text_only(tmp_path):
    model, tokenizer = _tiny_han({"num_buckets": 256, "max_ngrams": 24})
    _perturb_wide(model)
    names = ["neg", "pos"]
    texts = tf.constant(QUERIES)
    # The ids fit_text_classifier feeds in training, computed on the host.
    training_inputs = {
        "token_ids": _tokenize_all(tokenizer, QUERIES),
        "ngram_ids": _tokenize_all(HashedNgrams.matching(wide_layer(model)), QUERIES),
    }
    expected = model(training_inputs)["probabilities"].numpy()
    serving = build_text_serving_model(model, tokenizer, names)
    np.testing.assert_allclose(
        serving({"text": texts})["probabilities"], expected, atol=1e-6
    )
    path = export_text_classifier(
        model, tokenizer, tmp_path / "model", version=1, class_names=names
    )
    texts_path = tmp_path / "texts.json"
    texts_path.write_text(json.dumps(QUERIES, ensure_ascii=False), encoding="utf-8")
    proc = run_isolated(_RELOAD, str(path), str(texts_path), cwd=tmp_path)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["forbidden"] == [] and report["inputs"] == ["text"]
    np.testing.assert_allclose(report["probabilities"], expected, atol=1e-5)


@pytest.mark.generation_specific
@pytest.mark.slow
def test_wide_model_saves_and_loads_as_keras_file(tmp_path):
    model, _ = _tiny_han({"num_buckets": 32, "max_ngrams": 8})
    _perturb_wide(model)
    inputs = {
        "token_ids": np.ones((2, 3, 6), "int32"),
        "ngram_ids": np.arange(16, dtype="int32").reshape(2, 8),
    }
    path = tmp_path / "wide.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(
        loaded(inputs)["probabilities"], model(inputs)["probabilities"], atol=1e-6
    )


def test_corpus_limits_take_the_percentile_and_the_caps():
    # Document d has d+1 sentences of 2*(d+1) words each ("w w ... ." counts the
    # full stop as a word).
    docs = [" ".join(["w " * (2 * d + 1) + "."] * (d + 1)) for d in range(10)]
    top = corpus_limits(docs, percentile=100)
    assert top["max_sentences"] == 10 and top["max_words"] == 20
    assert top["sequence_length"] == 200
    # Unigrams + bigrams per sentence: 2k - 1 for k words; per document (d+1)(4d+3).
    assert top["max_ngrams"] == 10 * 39
    half = corpus_limits(docs, percentile=50)
    counts = np.arange(1, 11)
    assert half["max_sentences"] == int(np.ceil(np.percentile(counts, 50)))
    words = np.repeat(2 * counts, counts)  # words of every sentence
    assert half["max_words"] == int(np.ceil(np.percentile(words, 50)))
    capped = corpus_limits(docs, percentile=100, caps={"han_tokens": 60})
    assert capped["max_words"] == 20 and capped["max_sentences"] == 3
    capped = corpus_limits(docs, 100, caps={"sequence_length": 64, "max_words": 8})
    assert capped["sequence_length"] == 64 and capped["max_words"] == 8
    with pytest.raises(ValueError, match="`percentile`"):
        corpus_limits(docs, percentile=0)


def _split_corpus():
    rng = np.random.default_rng(0)
    words = {"pos": ["great", "fine", "good"], "neg": ["awful", "bad", "dull"]}
    texts, labels = [], []
    for i in range(60):
        label = ("pos", "neg")[i % 2]
        picked = rng.choice(words[label], size=4).tolist()
        texts.append(f"doc {i}. " + " ".join(picked) + ".")
        labels.append(label)
    return texts, labels


@pytest.mark.slow
def test_early_stopping_part_is_carved_from_training_documents_only():
    texts, labels = _split_corpus()
    scored = texts[:10]  # documents a benchmark would score: never given to fit
    train_texts, train_labels = texts[10:], labels[10:]
    with pytest.raises(ValueError, match="`validation_fraction`"):
        fit_text_classifier(train_texts, train_labels, validation_fraction=1.0)
    clf = fit_text_classifier(
        train_texts,
        train_labels,
        model="transformer",
        epochs=1,
        patience=1,
        hidden_dim=4,
        num_heads=1,
        wide={"num_buckets": 64},
    )
    val = clf.validation_indices
    # 10 % of each class's 25 documents, rounded: 2 + 2.
    assert val is not None and len(val) == 4
    assert sorted(train_labels[i] for i in val) == ["neg", "neg", "pos", "pos"]
    assert set(val) <= set(range(len(train_texts)))
    assert not {train_texts[i] for i in val} & set(scored)
    # Early stopping and the learning-rate schedule ran on that part.
    assert len(clf.history.history["val_loss"]) == clf.settings["epochs_run"] == 1
    # The result contract of every fit helper (issue 29): `.history` is the Keras
    # History with `.model`; read as the logs dict it was, it warns.
    assert isinstance(clf.history, keras.callbacks.History)
    assert clf.history.model is not None
    with pytest.warns(DeprecationWarning, match="TextClassifier.history"):
        assert clf.history["val_loss"] == clf.history.history["val_loss"]
    assert clf.val_accuracy is not None
    # The limits were read off the 46 remaining documents only.
    rest = [t for i, t in enumerate(train_texts) if i not in set(val)]
    assert clf.settings["sequence_length"] == corpus_limits(rest)["sequence_length"]


@pytest.mark.slow
def test_fit_text_classifier_calls_the_users_callbacks_each_epoch():
    texts, labels = _split_corpus()
    with pytest.raises(ValueError, match="`callbacks` must be a list of"):
        fit_text_classifier(texts, labels, callbacks=["not a callback"])
    with pytest.raises(ValueError, match="`callbacks` must be a list of"):
        fit_text_classifier(texts, labels, callbacks=keras.callbacks.History())

    class Record(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.epochs = []

        def on_epoch_end(self, epoch, logs=None):
            self.epochs.append((epoch, sorted(logs)))

    record = Record()
    clf = fit_text_classifier(
        texts,
        labels,
        model="transformer",
        epochs=2,
        patience=5,
        hidden_dim=4,
        num_heads=1,
        wide=False,
        callbacks=[record],
    )
    # Every epoch of the deep part, with the validation logs keras_attn's own
    # callbacks read too.
    assert (
        [e for e, _ in record.epochs]
        == [0, 1]
        == list(range(clf.settings["epochs_run"]))
    )
    assert all(any(k.startswith("val_") for k in keys) for _, keys in record.epochs)
