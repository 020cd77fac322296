"""The wide part as a TF-IDF logistic regression: `NgramLinear`'s term weighting,
IDF and L2 norm against scikit-learn and NumPy, and how `fit_text_classifier`
trains and mixes the wide and deep parts."""

import numpy as np
import pytest

from keras_attn.backend import keras, tf
from keras_attn.layers import COMBINERS, TERM_WEIGHTINGS, NgramLinear
from keras_attn.models.classifier_head import deep_part_model, wide_part_model
from keras_attn.models.text import build_han_classifier
from keras_attn.models.text_classifier import (
    _MIX_TEMPERATURES,
    _MIX_WEIGHTS,
    _choose_mix,
    _fold_mix,
    _model_inputs,
    _tokenize_all,
    fit_text_classifier,
)
from keras_attn.text import HashedNgrams
from tests.test_text_wide import _tiny_han

pytestmark = pytest.mark.generation_neutral

DOCS = [
    "Not good at all. Very bad film! Bad, bad, bad.",
    "A fine, fine cast?! The end",
    "one",
    "",
    "good film. a fine film, not bad",
]


def _numpy_wide(ids, kernel, bias, idf, weighting, combiner, scale=1.0):
    """`NgramLinear`'s formula per document: distinct ids, their weights, the norm."""
    out = []
    for row in ids:
        grams, counts = np.unique(row[row > 0], return_counts=True)
        v = {
            "count": counts.astype(float),
            "binary": np.ones(len(grams)),
            "sublinear": 1.0 + np.log(counts),
        }[weighting] * idf[grams]
        total = scale * (v[:, None] * kernel[grams]).sum(0)
        norm = {
            "sum": 1.0,
            "mean": v.sum(),
            "sqrtn": np.sqrt(v.sum()),
            "l2": np.sqrt((v**2).sum()),
        }[combiner]
        out.append((total / norm if norm else 0 * total) + bias)
    return np.array(out)


@pytest.mark.parametrize("weighting", TERM_WEIGHTINGS)
@pytest.mark.parametrize("combiner", COMBINERS)
def test_ngram_linear_matches_numpy_for_every_weighting_and_combiner(
    weighting, combiner
):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 12, size=(6, 9)).astype("int32")
    ids[2] = 0  # a fully padded row
    ids[3, :5] = 7  # a repeated n-gram
    layer = NgramLinear(
        3,
        num_buckets=12,
        combiner=combiner,
        term_weighting=weighting,
        idf=True,
        use_bias=True,
        scale=2.0,
    )
    layer.adapt(ids[:4])
    layer.kernel.assign(rng.normal(size=(13, 3)).astype("float32"))
    layer.bias.assign(np.array([0.1, -0.2, 0.3], "float32"))
    expected = _numpy_wide(
        ids,
        layer.kernel.numpy(),
        layer.bias.numpy(),
        layer.idf.numpy(),
        weighting,
        combiner,
        scale=2.0,
    )
    np.testing.assert_allclose(layer(ids).numpy(), expected, rtol=1e-5, atol=1e-6)
    xla = tf.function(lambda x: layer(x), jit_compile=True)(tf.constant(ids))
    np.testing.assert_allclose(xla.numpy(), expected, rtol=1e-5, atol=1e-6)
    # The fully padded row gives the bias alone.
    np.testing.assert_allclose(layer(ids).numpy()[2], [0.1, -0.2, 0.3], rtol=1e-6)


def _numpy_nb_ratios(ids, labels, units, num_buckets, alpha):
    """NBSVM's log-count ratios (Wang & Manning 2012) of each bucket, class k
    against the rest, from per-document sets of n-grams."""
    sets = [set(row[row > 0].tolist()) for row in ids]
    seen = sorted(set().union(*sets))
    ratio = np.zeros((num_buckets + 1, units))
    for k in range(units):
        inside = [d for d, y in zip(sets, labels) if y == k]
        outside = [d for d, y in zip(sets, labels) if y != k]
        p = {g: alpha + sum(g in d for d in inside) for g in seen}
        q = {g: alpha + sum(g in d for d in outside) for g in seen}
        p_sum, q_sum = sum(p.values()), sum(q.values())
        for g in seen:
            ratio[g, k] = np.log((p[g] / p_sum) / (q[g] / q_sum))
    return ratio


def test_nb_ratios_match_the_papers_formula_and_scale_the_table():
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 10, size=(8, 6)).astype("int32")
    ids[1, :4] = 5  # repeats count once per document
    ids[4] = 0  # a fully padded document
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    layer = NgramLinear(3, num_buckets=12, combiner="sum", nb_ratio=True)
    layer.adapt(ids, labels=labels, nb_alpha=0.5)
    expected = _numpy_nb_ratios(ids, labels, 3, 12, 0.5)
    np.testing.assert_allclose(layer.ratio.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert not layer.ratio.numpy()[[0, 11, 12]].any()  # padding and unseen: 0
    # The table is used as W ⊙ R: with W = 1, "sum" of counts gives Σ count·R.
    layer.kernel.assign(np.ones((13, 3), "float32"))
    counted = np.stack([expected[row[row > 0]].sum(0) for row in ids])
    np.testing.assert_allclose(layer(ids).numpy(), counted, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="labels"):
        layer.adapt(ids)
    with pytest.raises(ValueError, match=r"labels.*\[0, 3\)"):
        layer.adapt(ids, labels=labels + 1)


def tfidf_features(ids, buckets, **kwargs):
    """`(layer, features)`: an `NgramLinear` with sublinear TF-IDF weights and
    the L2 norm, adapted on `ids`, with an identity table, so its output is the
    TF-IDF vector itself, `(documents, buckets + 1)`."""
    layer = NgramLinear(
        buckets + 1,
        num_buckets=buckets,
        term_weighting="sublinear",
        idf=True,
        combiner="l2",
        **kwargs,
    )
    layer.adapt(ids)
    layer.kernel.assign(np.eye(buckets + 1, dtype="float32"))
    return layer, layer(ids).numpy()


def test_tfidf_features_and_idf_equal_scikit_learns():
    from sklearn.feature_extraction.text import TfidfVectorizer

    buckets = 61
    ids = HashedNgrams(num_buckets=buckets, max_ngrams=40)(tf.constant(DOCS)).numpy()
    # scikit-learn on the same hashed n-grams: each document's ids as its terms.
    vectorizer = TfidfVectorizer(
        analyzer=lambda row: [str(i) for i in row if i], sublinear_tf=True
    )
    reference = vectorizer.fit_transform(list(ids)).toarray()
    columns = [int(term) for term in vectorizer.get_feature_names_out()]

    layer, features = tfidf_features(ids, buckets)
    np.testing.assert_allclose(layer.idf.numpy()[columns], vectorizer.idf_, rtol=1e-6)
    np.testing.assert_allclose(features[:, columns], reference, rtol=1e-5, atol=1e-6)
    unseen = np.setdiff1d(np.arange(buckets + 1), columns)
    assert (features[:, unseen] == 0).all()
    assert (features[3] == 0).all()  # the empty document: zeros, not NaN


def test_min_df_leaves_rare_ngrams_out():
    ids = np.array([[1, 2, 2], [1, 3, 0], [1, 0, 0]], "int32")
    layer = NgramLinear(1, num_buckets=4, term_weighting="binary", idf=True)
    layer.adapt(ids, min_df=2)
    idf = layer.idf.numpy()
    assert idf[2] == idf[3] == 0  # each in one document only
    np.testing.assert_allclose(idf[1], np.log(4 / 4) + 1)
    layer.kernel.assign(np.ones((5, 1), "float32"))
    # Document 2 holds only n-grams below min_df besides 1: their weight is 0.
    np.testing.assert_allclose(
        layer(np.array([[2, 3, 0]], "int32")).numpy(), [[0.0]], atol=0
    )


def test_distinct_ngram_dropout_only_while_training():
    layer = NgramLinear(
        1, num_buckets=10, combiner="sum", term_weighting="binary", dropout=0.5
    )
    ids = np.tile(np.repeat(np.arange(1, 11, dtype="int32"), 2), (64, 1))
    layer.build(ids.shape)
    layer.kernel.assign(np.ones((11, 1), "float32"))
    # Each distinct n-gram once, not each occurrence: 10, not 20.
    np.testing.assert_array_equal(layer(ids, training=False).numpy(), 10.0)
    dropped = layer(ids, training=True).numpy()
    assert dropped.min() < 10 and 3 < dropped.mean() < 7


def test_adapt_errors_name_the_problem():
    with pytest.raises(ValueError, match="`adapt`.*idf=True.*Received: idf=False"):
        NgramLinear(2, num_buckets=5).adapt(np.ones((2, 3), "int32"))
    layer = NgramLinear(2, num_buckets=5, idf=True)
    with pytest.raises(ValueError, match="`ngram_ids`.*Received: shape=\\(3,\\)"):
        layer.adapt(np.ones(3, "int32"))
    with pytest.raises(ValueError, match="`ngram_ids` must be in \\[0, 5\\].*max id 9"):
        layer.adapt(np.array([[9, 1]], "int32"))
    with pytest.raises(ValueError, match="`term_weighting`.*Received"):
        NgramLinear(2, term_weighting="tfidf")
    with pytest.raises(ValueError, match="`idf`.*Received: idf='yes'"):
        NgramLinear(2, idf="yes")


@pytest.mark.generation_specific
def test_tfidf_config_round_trips_with_its_regularizer():
    layer = NgramLinear(
        3,
        num_buckets=20,
        term_weighting="sublinear",
        idf=True,
        combiner="l2",
        use_bias=True,
        kernel_regularizer={"class_name": "L2", "config": {"l2": 0.01}},
    )
    again = NgramLinear.from_config(layer.get_config())
    assert again.get_config() == layer.get_config()
    layer.build((None, 4))
    layer.kernel.assign(np.ones((21, 3), "float32"))
    # The penalty is l2 · Σ W²: 0.01 · 21 · 3.
    np.testing.assert_allclose(float(layer.losses[0]), 0.63, rtol=1e-5)


def _tiny_wide_han(texts):
    return _tiny_han({"num_buckets": 64, "max_ngrams": 16, "use_bias": True}, texts)


def test_mix_picks_the_grid_point_of_least_log_loss_and_folds_it_in():
    rng = np.random.default_rng(3)
    model, tokenizer = _tiny_wide_han(DOCS)
    for layer in (model.wide, model.output_dense):
        layer.kernel.assign(rng.normal(size=layer.kernel.shape).astype("float32"))
        layer.bias.assign(rng.normal(size=layer.bias.shape).astype("float32"))
    inputs = _model_inputs(model, tokenizer, DOCS)
    y = np.array([0, 1, 1, 0, 1])
    wide_logits = model.wide(inputs["ngram_ids"]).numpy()
    deep_logits = keras.Model(model.inputs, model.output_dense.output)(inputs).numpy()

    strategy = tf.distribute.get_strategy()
    settings = _choose_mix(model, deep_part_model(model), inputs, y, strategy)
    _fold_mix(model, settings["wide_weight"], settings["temperature"], strategy)

    def log_softmax(z):
        z = z - z.max(1, keepdims=True)
        return z - np.log(np.exp(z).sum(1, keepdims=True))

    losses = {
        (a, t): -log_softmax(
            t * (a * log_softmax(wide_logits) + (1 - a) * log_softmax(deep_logits))
        )[np.arange(5), y].mean()
        for a in _MIX_WEIGHTS
        for t in _MIX_TEMPERATURES
    }
    alpha, temperature = settings["wide_weight"], settings["temperature"]
    assert losses[(alpha, temperature)] <= min(losses.values()) + 1e-6
    best = alpha * log_softmax(wide_logits) + (1 - alpha) * log_softmax(deep_logits)
    assert settings["mix_val_accuracy"] == np.mean(best.argmax(1) == y)
    # The classifier's logits are now t·(α·wide + (1 - α)·deep).
    mixed = temperature * (alpha * wide_logits + (1 - alpha) * deep_logits)
    expected = np.exp(log_softmax(mixed))
    np.testing.assert_allclose(
        model(inputs)["probabilities"].numpy(), expected, rtol=1e-4, atol=1e-6
    )


def test_part_models_share_the_classifiers_weights():
    model, tokenizer = _tiny_wide_han(DOCS)
    deep, wide = deep_part_model(model), wide_part_model(model)
    assert {id(v) for v in deep.weights} <= {id(v) for v in model.weights}
    assert {id(v) for v in wide.weights} <= {id(v) for v in model.weights}
    assert not {id(v) for v in deep.weights} & {id(v) for v in wide.weights}
    with pytest.raises(ValueError, match="`classifier` must be.*wide part"):
        deep_part_model(
            build_han_classifier(
                20, 2, 3, 6, embedding_dim=4, units=2, attention_units=4
            )
        )


def _corpus(n=60):
    rng = np.random.default_rng(0)
    words = {"pos": ["great", "fine", "good"], "neg": ["awful", "bad", "dull"]}
    texts, labels = [], []
    for i in range(n):
        label = ("pos", "neg")[i % 2]
        texts.append(f"doc {i}. " + " ".join(rng.choice(words[label], 4)) + ".")
        labels.append(label)
    return texts, labels


@pytest.mark.slow
def test_residual_fit_keeps_the_wide_part_and_reads_idf_off_the_fitted_part():
    texts, labels = _corpus()
    clf = fit_text_classifier(
        texts,
        labels,
        epochs=2,
        wide_training="residual",
        embedding_dim=8,
        units=4,
        attention_units=8,
        wide={"num_buckets": 4096},
    )
    s = clf.settings
    assert s["wide_training"] == "residual" and s["wide"]["idf"] is True
    val = set(clf.validation_indices)
    fitted = [t for i, t in enumerate(texts) if i not in val]
    carved = [t for i, t in enumerate(texts) if i in val]
    # The "doc 7"-style n-grams of the carved documents never reach the IDF: a
    # bucket in no fitted document has IDF 0 (scikit-learn drops unseen terms),
    # every bucket of the fitted documents its smoothed IDF.
    hasher = HashedNgrams.matching(clf.model.wide)
    seen = set(_tokenize_all(hasher, fitted).ravel()) - {0}
    own = set(_tokenize_all(hasher, carved).ravel()) - seen - {0}
    idf = clf.model.wide.idf.numpy()
    assert own and (idf[sorted(own)] == 0).all()
    assert (idf[sorted(seen)] >= 1).all() and idf.max() <= np.log(1 + len(fitted)) + 1
    # The deep stage left the frozen wide part as the wide stage fitted it.
    inputs = _model_inputs(clf.model, clf.tokenizer, carved)
    y = np.array([clf.class_names.index(labels[i]) for i in sorted(val)])
    p = wide_part_model(clf.model).predict(inputs["ngram_ids"], verbose=0)
    assert np.mean(p["probabilities"].argmax(-1) == y) == s["wide_val_accuracy"]
    assert clf.predict(["great fine good.", "awful dull bad."]) == ["pos", "neg"]


@pytest.mark.slow
def test_ensemble_refits_the_wide_part_on_every_training_document_only():
    texts, labels = _corpus()
    tiny = dict(embedding_dim=8, units=4, attention_units=8)
    clf = fit_text_classifier(
        texts, labels, epochs=2, wide={"num_buckets": 4096}, **tiny
    )
    s = clf.settings
    assert s["wide_training"] == "ensemble"
    assert 0 <= s["wide_weight"] <= 1 and s["temperature"] > 0
    assert s["deep_val_accuracy"] is not None and s["wide_val_accuracy"] is not None
    # Refitted on all 60 documents, the carved ones included: every bucket of
    # every document has an IDF, the largest that of a bucket in one document.
    assert s["wide_refit_documents"] == len(texts)
    # The reported validation accuracy is the mix's before the refit (after it,
    # the wide part has trained on those documents).
    assert clf.val_accuracy is not None and 0 <= clf.val_accuracy <= 1
    assert "mix_val_accuracy" not in s
    hasher = HashedNgrams.matching(clf.model.wide)
    seen = sorted(set(_tokenize_all(hasher, texts).ravel()) - {0})
    idf = clf.model.wide.idf.numpy()
    assert (idf[seen] >= 1).all()
    np.testing.assert_allclose(idf.max(), np.log((1 + 60) / 2) + 1, rtol=1e-6)
    assert clf.predict(["great fine good.", "awful dull bad."]) == ["pos", "neg"]

    # Validation documents given by the caller are never trained on: no refit,
    # and their own n-grams get no IDF.
    validation = ["doc unseen. qqq zzz great.", "doc unseen. qqq zzz awful."]
    clf = fit_text_classifier(
        texts,
        labels,
        validation_texts=validation,
        validation_labels=["pos", "neg"],
        epochs=1,
        wide={"num_buckets": 4096},
        **tiny,
    )
    assert "wide_refit_documents" not in clf.settings
    own = (
        set(_tokenize_all(hasher, validation).ravel())
        - set(_tokenize_all(hasher, texts).ravel())
        - {0}
    )
    assert own and (clf.model.wide.idf.numpy()[sorted(own)] == 0).all()
