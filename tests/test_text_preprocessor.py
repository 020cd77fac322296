"""The text classifiers' preprocessors: raw strings -> a classifier's inputs, one
class per model kind, the same ids the kind's tokenizer and the wide part's hasher
give on their own."""

import numpy as np
import pytest

from keras_attn.backend import tf
from keras_attn.models import (
    BertTextPreprocessor,
    HANTextPreprocessor,
    TextClassifier,
    TextPreprocessor,
    TransformerTextPreprocessor,
    build_han_classifier,
    build_transformer_classifier,
    text_preprocessor,
)
from keras_attn.models.bert import BertBackbone, BertClassifier
from keras_attn.models.bert_preprocessor import BertPreprocessor
from keras_attn.models.text_classifier import _model_inputs
from keras_attn.text import HashedNgrams, SentenceTokenizer, Tokenizer
from keras_attn.text.bert_tokenizer import BertTokenizer

pytestmark = pytest.mark.generation_neutral

VOCABULARY = ["[PAD]", "[UNK]", "good", "bad", "film", ".", "!"]
TEXTS = ["Good film. Bad!", "bad bad film", "", "Un film, très bon."]


def _han(wide=False):
    tokenizer = SentenceTokenizer(VOCABULARY, max_sentences=2, max_words=3)
    model = build_han_classifier(
        len(VOCABULARY),
        2,
        2,
        3,
        embedding_dim=4,
        units=2,
        attention_units=4,
        wide=wide and {"num_buckets": 32, "max_ngrams": 6},
    )
    return model, tokenizer


def _transformer(wide=False):
    tokenizer = Tokenizer(VOCABULARY, sequence_length=4, method="word")
    model = build_transformer_classifier(
        len(VOCABULARY),
        2,
        4,
        hidden_dim=4,
        num_heads=1,
        wide=wide and {"num_buckets": 32, "max_ngrams": 6},
    )
    return model, tokenizer


def _bert(wide=False, checkpoint=False):
    if checkpoint:
        tokenizer = BertPreprocessor(BertTokenizer("bert-base-uncased"), 6)
    else:
        tokenizer = Tokenizer("bert-base-uncased", sequence_length=6)
    backbone = BertBackbone(
        30522, sequence_length=6, hidden_dim=4, num_layers=1, num_heads=1
    )
    wide = wide and {"num_buckets": 32, "max_ngrams": 6}
    return BertClassifier(backbone, 2, wide=wide), tokenizer


def _expected(model, tokenizer, texts):
    """The inputs written out from the parts: the tokenizer's ids, segment ids
    (a BertPreprocessor's, or zeros), the wide part's hashed n-grams."""
    batch = tf.constant(texts)
    if isinstance(tokenizer, BertPreprocessor):
        expected = {k: v.numpy() for k, v in tokenizer(batch).items()}
    else:
        expected = {"token_ids": tokenizer.tokenize(batch).numpy()}
        if isinstance(model, BertClassifier):
            expected["segment_ids"] = np.zeros_like(expected["token_ids"])
    if getattr(model, "wide", None) is not None:
        expected["ngram_ids"] = HashedNgrams.matching(model.wide).tokenize(batch)
        expected["ngram_ids"] = expected["ngram_ids"].numpy()
    return expected


KINDS = {
    "han": (_han, HANTextPreprocessor),
    "transformer": (_transformer, TransformerTextPreprocessor),
    "bert": (_bert, BertTextPreprocessor),
}


@pytest.mark.parametrize("wide", [False, True], ids=["deep", "wide"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_gives_the_ids_of_its_tokenizer_and_hasher(kind, wide):
    build, cls = KINDS[kind]
    model, tokenizer = build(wide=wide)
    preprocessor = text_preprocessor(model, tokenizer)
    assert type(preprocessor) is cls and preprocessor.tokenizer is tokenizer
    assert (preprocessor.ngrams is not None) == wide
    expected = _expected(model, tokenizer, TEXTS)
    # On the host, in batches (what fit_text_classifier feeds), and as a layer
    # (what the serving model, predict and explain call).
    host = preprocessor.inputs(TEXTS, batch_size=3)
    assert sorted(host) == sorted(expected)
    for key, value in expected.items():
        np.testing.assert_array_equal(host[key], value)
        assert host[key].dtype == np.int32
    layer = preprocessor(tf.constant(TEXTS))
    if len(expected) == 1:  # the token ids alone, as the model takes them
        np.testing.assert_array_equal(layer, expected["token_ids"])
    else:
        assert sorted(layer) == sorted(expected)
        for key, value in expected.items():
            np.testing.assert_array_equal(layer[key], value)
    for key, value in _model_inputs(model, tokenizer, TEXTS).items():
        np.testing.assert_array_equal(value, expected[key])
    # The model takes what the preprocessor gives.
    assert model(layer)["probabilities"].shape == (len(TEXTS), 2)


def test_han_ids_written_out():
    model, tokenizer = _han()
    ids = text_preprocessor(model, tokenizer).inputs(TEXTS[:2])["token_ids"]
    # good film . | bad ! ; bad bad film (one sentence).
    assert ids.tolist() == [
        [[2, 4, 5], [3, 6, 0]],
        [[3, 3, 4], [0, 0, 0]],
    ]


def test_bert_checkpoint_preprocessor_gives_its_token_and_segment_ids():
    model, tokenizer = _bert(wide=True, checkpoint=True)
    preprocessor = text_preprocessor(model, tokenizer)
    assert type(preprocessor) is BertTextPreprocessor
    out = preprocessor.inputs(["Good film."])
    assert out["token_ids"].tolist() == [[101, 2204, 2143, 1012, 102, 0]]
    assert out["segment_ids"].tolist() == [[0] * 6]
    assert out["ngram_ids"].shape == (1, 6)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_config_round_trip_gives_the_same_inputs(kind):
    build, cls = KINDS[kind]
    model, tokenizer = build(wide=True)
    preprocessor = text_preprocessor(model, tokenizer)
    restored = cls.from_config(preprocessor.get_config())
    assert type(restored.tokenizer) is type(tokenizer)
    assert restored.ngrams.get_config() == preprocessor.ngrams.get_config()
    before, after = preprocessor.inputs(TEXTS), restored.inputs(TEXTS)
    for key in before:
        np.testing.assert_array_equal(after[key], before[key])


def test_a_preprocessor_is_kept_and_a_wrong_tokenizer_is_refused():
    model, tokenizer = _transformer()
    preprocessor = text_preprocessor(model, tokenizer)
    assert text_preprocessor(model, preprocessor) is preprocessor
    with pytest.raises(ValueError, match="`tokenizer` of a HANTextPreprocessor"):
        HANTextPreprocessor(tokenizer)
    with pytest.raises(ValueError, match="`ngrams` must be a HashedNgrams"):
        TransformerTextPreprocessor(tokenizer, ngrams=tokenizer)
    assert isinstance(preprocessor, TextPreprocessor)


def test_text_classifier_holds_its_preprocessor():
    model, tokenizer = _han(wide=True)
    classifier = TextClassifier(model, tokenizer, ["neg", "pos"])
    assert type(classifier.preprocessor) is HANTextPreprocessor
    assert classifier.preprocessor.tokenizer is tokenizer
    given = text_preprocessor(model, tokenizer)
    assert (
        TextClassifier(model, tokenizer, ["a", "b"], preprocessor=given).preprocessor
        is given
    )
    inputs = classifier.model_inputs(TEXTS)
    expected = _expected(model, tokenizer, TEXTS)
    for key, value in expected.items():
        np.testing.assert_array_equal(inputs[key], value)
    # Nothing to preprocess with: a classifier of class names alone (CLI spies).
    assert TextClassifier(None, None, ["a", "b"]).preprocessor is None
