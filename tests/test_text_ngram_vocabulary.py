"""`NgramVocabulary`: the wide part's n-grams looked up in the training
documents' vocabulary (as scikit-learn's `TfidfVectorizer(min_df=...)`), and the
classifiers `fit_text_classifier` makes with it."""

import collections
import json

import numpy as np
import pytest

from keras_attn.backend import tf
from keras_attn.layers import NgramLinear
from keras_attn.models import TextClassifier, fit_text_classifier
from keras_attn.models.classifier_head import wide_layer
from keras_attn.models.text_preprocessor import text_preprocessor
from keras_attn.serving import export_text_classifier
from keras_attn.text import HashedNgrams, NgramVocabulary
from tests.harness import run_isolated
from tests.test_text_serving import _RELOAD
from tests.test_text_wide import DOCS, python_ngrams
from tests.test_text_wide_tfidf import _corpus, tfidf_features

pytestmark = pytest.mark.generation_neutral


def python_vocabulary(texts, min_df):
    """The n-grams of at least `min_df` documents, most frequent first, ties in
    string order: the rule written out over the Python n-gram rule."""
    df = collections.Counter(g for t in texts for g in set(python_ngrams(t)))
    kept = [g for g, n in df.items() if n >= min_df]
    return sorted(kept, key=lambda g: (-df[g], g))


CORPUS = DOCS + ["Very bad. Not good at all!", "A fine film. The end", "bad film."]


@pytest.mark.parametrize("min_df", [1, 2, 3])
def test_vocabulary_and_ids_follow_the_document_frequency_rule(min_df):
    layer = NgramVocabulary.from_texts(CORPUS, min_df=min_df, max_ngrams=12)
    vocabulary = python_vocabulary(CORPUS, min_df)
    assert layer.vocabulary == vocabulary
    assert layer.num_buckets == len(vocabulary)
    ids = layer(tf.constant(CORPUS + ["zzz qqq."])).numpy()
    assert ids.shape == (len(CORPUS) + 1, 12) and ids.dtype == np.int32
    for text, row in zip(CORPUS + ["zzz qqq."], ids):
        # Unknown n-grams dropped before the first 12 known ones are kept.
        known = [
            vocabulary.index(g) + 1 for g in python_ngrams(text) if g in vocabulary
        ]
        expected = (known + [0] * 12)[:12]
        assert row.tolist() == expected, text


def test_tfidf_over_the_vocabulary_equals_scikit_learns_with_min_df():
    from sklearn.feature_extraction.text import TfidfVectorizer

    layer = NgramVocabulary.from_texts(CORPUS, min_df=2, max_ngrams=40)
    vectorizer = TfidfVectorizer(analyzer=python_ngrams, min_df=2, sublinear_tf=True)
    reference = vectorizer.fit_transform(CORPUS).toarray()
    terms = list(vectorizer.get_feature_names_out())
    assert sorted(terms) == sorted(layer.vocabulary)
    ids = layer(tf.constant(CORPUS)).numpy()
    linear, features = tfidf_features(ids, layer.num_buckets, lookup="vocabulary")
    columns = [layer.vocabulary.index(t) + 1 for t in terms]
    np.testing.assert_allclose(linear.idf.numpy()[columns], vectorizer.idf_, rtol=1e-6)
    np.testing.assert_allclose(features[:, columns], reference, rtol=1e-5, atol=1e-6)
    assert (features[CORPUS.index("")] == 0).all()  # the empty document: zeros


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: NgramVocabulary([]), "at least one n-gram"),
        (lambda: NgramVocabulary("good"), "list of n-gram strings"),
        (lambda: NgramVocabulary(["good", ""]), "non-empty str"),
        (lambda: NgramVocabulary(["good", 3]), "non-empty str"),
        (lambda: NgramVocabulary(["a", "b", "a"]), "'a' 2 times"),
        (lambda: NgramVocabulary(["a"], max_ngrams=0), "max_ngrams"),
        (lambda: NgramVocabulary.from_texts(["a b", "c d"], min_df=2), "min_df`=2"),
        (lambda: NgramVocabulary.from_texts(["a b"], min_df=0), "min_df"),
        (lambda: NgramLinear(2, lookup="table"), "lookup"),
    ],
)
def test_bad_arguments_name_themselves(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_config_round_trips_and_hashing_cannot_stand_in():
    layer = NgramVocabulary(["good", "bad", "not bad"], max_ngrams=5, name="v")
    config = json.loads(json.dumps(layer.get_config()))
    again = NgramVocabulary.from_config(config)
    assert again.vocabulary == layer.vocabulary and again.num_buckets == 3
    texts = tf.constant(["Not bad, good.", ""])
    np.testing.assert_array_equal(again(texts), layer(texts))

    hashed = NgramLinear(2, num_buckets=3, max_ngrams=5)
    fed = NgramLinear(2, num_buckets=3, max_ngrams=5, lookup="vocabulary")
    assert layer.feeds(fed) and not layer.feeds(hashed)
    assert HashedNgrams.matching(hashed).feeds(hashed)
    assert not HashedNgrams(num_buckets=3, max_ngrams=5).feeds(fed)
    # Hashing would give ids the table was not trained on: refused, named.
    with pytest.raises(ValueError, match="lookup='vocabulary'"):
        HashedNgrams.matching(fed)


TINY = dict(embedding_dim=8, units=4, attention_units=8)


@pytest.mark.generation_specific
@pytest.mark.slow
def test_fit_with_min_df_trains_exports_and_reloads_on_its_vocabulary(tmp_path):
    texts, labels = _corpus()
    clf = fit_text_classifier(texts, labels, epochs=1, wide={"min_df": 2}, **TINY)
    ngrams = clf.preprocessor.ngrams
    wide = wide_layer(clf.model)
    assert isinstance(ngrams, NgramVocabulary) and ngrams.feeds(wide)
    # The vocabulary of the training part (the early-stopping part carved off):
    # "doc 7" and its like are in one document each, so out.
    trained = [t for i, t in enumerate(texts) if i not in set(clf.validation_indices)]
    assert ngrams.vocabulary == python_vocabulary(trained, 2)
    assert "doc 7" not in ngrams.vocabulary and "great" in ngrams.vocabulary
    assert clf.settings["wide_min_df"] == 2
    assert clf.settings["wide"]["lookup"] == "vocabulary"
    assert clf.settings["wide"]["num_buckets"] == len(ngrams.vocabulary)
    queries = ["great fine good.", "awful dull bad.", "", "zzz."]
    probabilities = clf.model(clf.model_inputs(queries))["probabilities"].numpy()

    # A plain tokenizer cannot rebuild the wide part's ids: refused, not hashed.
    with pytest.raises(ValueError, match="NgramVocabulary"):
        text_preprocessor(clf.model, clf.tokenizer)

    path = tmp_path / "clf.keras"
    clf.save(path)
    loaded = TextClassifier.load(path)
    assert loaded.preprocessor.ngrams.vocabulary == ngrams.vocabulary
    np.testing.assert_allclose(
        loaded.model(loaded.model_inputs(queries))["probabilities"],
        probabilities,
        atol=1e-6,
    )

    export = export_text_classifier(
        clf.model, clf.preprocessor, tmp_path / "served", 1, clf.class_names
    )
    queries_path = tmp_path / "texts.json"
    queries_path.write_text(json.dumps(queries), encoding="utf-8")
    proc = run_isolated(_RELOAD, str(export), str(queries_path), cwd=tmp_path)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["forbidden"] == [] and report["inputs"] == ["text"]
    np.testing.assert_allclose(report["probabilities"], probabilities, atol=1e-5)


def test_hashed_wide_parts_stay_hashed_without_min_df():
    texts, labels = _corpus(20)
    clf = fit_text_classifier(
        texts, labels, epochs=1, patience=0, wide={"min_df": None}, **TINY
    )
    assert type(clf.preprocessor.ngrams) is HashedNgrams
    assert clf.settings["wide"]["lookup"] == "hash"
    assert "wide_min_df" not in clf.settings


def test_num_buckets_means_hashing_and_refuses_min_df_beside_it():
    from keras_attn.models.text_kinds import text_model_kind
    from keras_attn.models.text_wide import _resolve_wide

    kind = text_model_kind("han")
    limits = {"max_ngrams": 7}
    assert _resolve_wide(kind, None, "ensemble", limits, 10)["min_df"] == 2
    hashed = _resolve_wide(kind, {"num_buckets": 64}, "ensemble", limits, 10)
    assert hashed["min_df"] is None and hashed["num_buckets"] == 64
    with pytest.raises(ValueError, match="num_buckets=64, min_df=3"):
        _resolve_wide(kind, {"num_buckets": 64, "min_df": 3}, "ensemble", limits, 10)
