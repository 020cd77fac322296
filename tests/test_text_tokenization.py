"""keras_attn.text: WordPiece, word and sentence tokenization in TensorFlow ops."""

import hashlib
import unicodedata

import numpy as np
import pytest
import tensorflow_text as tf_text

from keras_attn.backend import keras, tf
from keras_attn.text import (
    SHIPPED_VOCABULARIES,
    SentenceTokenizer,
    Tokenizer,
    build_vocabulary,
    load_vocabulary,
    split_sentences,
    split_words,
)
from keras_attn.text.datasets import load_review_sample

pytestmark = pytest.mark.generation_neutral

TEXTS = [
    "Héllo WORLD, it's a naïve café!",
    "The unaffable hotel was great. Really?",
    "我喜欢这家酒店。很好！",
    "",
]


def test_shipped_vocabularies_are_googles():
    # md5 from DATA.md; sizes from the BERT release.
    data = SHIPPED_VOCABULARIES["bert-base-uncased"].read_bytes()
    assert hashlib.md5(data).hexdigest() == "64800d5d8528ce344256daf115d4965e"
    assert len(load_vocabulary("bert-base-uncased")) == 30522
    assert len(load_vocabulary("bert-base-chinese")) == 21128


def test_load_vocabulary_rejects_unknown_name():
    with pytest.raises(ValueError, match="vocabulary"):
        load_vocabulary("no-such-vocab")


@pytest.mark.parametrize("name", ["bert-base-uncased", "bert-base-chinese"])
def test_wordpiece_matches_tensorflow_text_bert_tokenizer(name):
    # Reference: tf-text's original (non-fast) BertTokenizer, a separate implementation.
    vocab = load_vocabulary(name)
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(vocab), tf.range(len(vocab), dtype=tf.int64)
        ),
        -1,
    )
    reference = tf_text.BertTokenizer(table, lower_case=True, token_out_type=tf.int64)
    expected = reference.tokenize(tf.constant(TEXTS)).merge_dims(-2, -1).to_list()
    tokenizer = Tokenizer(name, sequence_length=40)
    got = tokenizer(tf.constant(TEXTS)).numpy()
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    for row, ids in zip(got, expected):
        assert row.tolist() == [cls, *ids, sep] + [0] * (40 - len(ids) - 2)
    assert len(expected[2]) == 11  # one token per Chinese character and punctuation


def test_wordpiece_truncates_and_keeps_sep_last():
    tokenizer = Tokenizer("bert-base-uncased", sequence_length=5)
    ids = tokenizer(tf.constant(["one two three four five six", ""])).numpy()
    assert ids[0].tolist() == [101, 2028, 2048, 2093, 102]
    assert ids[1].tolist() == [101, 102, 0, 0, 0]


def _reference_words(text):
    # tf-text's BERT normalization: NFKC case folding, then NFD without accents.
    text = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text).casefold())
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    out = []
    for c in text:
        cat = unicodedata.category(c)
        if cat.startswith("P") or cat.startswith("S") or 0x4E00 <= ord(c) <= 0x9FFF:
            out.append(f" {c} ")
        else:
            out.append(c)
    return "".join(out).split()


def test_split_words_matches_python_reference():
    got = split_words(tf.constant(TEXTS)).to_list()
    for text, words in zip(TEXTS, got):
        assert [w.decode() for w in words] == _reference_words(text)


def test_build_vocabulary_orders_by_count_then_alphabet():
    vocab = build_vocabulary(["b a b, c", "B c d"], min_count=2)
    assert vocab == ["[PAD]", "[UNK]", "b", "c"]
    assert build_vocabulary(["b a b c"], max_tokens=4) == ["[PAD]", "[UNK]", "b", "a"]
    with pytest.raises(ValueError, match="max_tokens"):
        build_vocabulary(["a"], max_tokens=2)
    with pytest.raises(ValueError, match="min_count"):
        build_vocabulary(["a"], min_count=0)


def test_word_tokenizer_maps_unknown_words_to_unk():
    vocab = ["[PAD]", "[UNK]", "good", "movie", "."]
    tokenizer = Tokenizer(vocab, sequence_length=6, method="word")
    ids = tokenizer(tf.constant(["Good MOVIE, bad movie.", ""])).numpy()
    assert ids.tolist() == [[2, 3, 1, 1, 3, 4], [0, 0, 0, 0, 0, 0]]


def test_split_sentences_english_and_chinese():
    got = split_sentences(
        tf.constant(["One. Two!! Three? four", "很好。不错！还行；就这样", "", "  . "])
    ).to_list()
    assert [s.decode().strip() for s in got[0]] == ["One.", "Two!!", "Three?", "four"]
    assert [s.decode() for s in got[1]] == ["很好。", "不错！", "还行；", "就这样"]
    assert got[2] == []
    assert [s.decode().strip() for s in got[3]] == ["."]


def test_sentence_tokenizer_limits_both_axes_without_error():
    vocab = ["[PAD]", "[UNK]", "a", "b", "."]
    tokenizer = SentenceTokenizer(vocab, max_sentences=2, max_words=3)
    long_doc = "a b a b a. b. a. b."
    ids = tokenizer(tf.constant([long_doc, "", "b"])).numpy()
    assert ids.shape == (3, 2, 3)
    assert ids[0].tolist() == [[2, 3, 2], [3, 4, 0]]
    assert not ids[1].any()
    assert ids[2].tolist() == [[3, 0, 0], [0, 0, 0]]


def test_sentence_tokenizer_wordpiece_chinese():
    tokenizer = SentenceTokenizer(
        "bert-base-chinese", max_sentences=3, max_words=4, method="wordpiece"
    )
    ids = tokenizer(tf.constant(["很好。不错！"])).numpy()
    vocab = load_vocabulary("bert-base-chinese")
    # tf-text's BERT normalization folds the full-width "！" to "!" (NFKC).
    expected = [
        [vocab.index(unicodedata.normalize("NFKC", c)) for c in s]
        for s in ("很好。", "不错！")
    ]
    assert ids[0, 0, :3].tolist() == expected[0]
    assert ids[0, 1, :3].tolist() == expected[1]
    assert not ids[0, 2].any() and not ids[0, :, 3].any()


def test_same_ids_in_tf_data_and_eagerly():
    texts, _ = load_review_sample()
    tokenizer = SentenceTokenizer(build_vocabulary(texts[:50], min_count=2))
    eager = tokenizer(tf.constant(texts[:8])).numpy()
    ds = tf.data.Dataset.from_tensor_slices(texts[:8]).batch(4).map(tokenizer.tokenize)
    np.testing.assert_array_equal(np.concatenate(list(ds.as_numpy_iterator())), eager)
    assert eager.shape == (8, 16, 32) and eager.any()


@pytest.mark.parametrize(
    "cls, kwargs",
    [
        (Tokenizer, {"vocabulary": "bert-base-uncased", "sequence_length": 7}),
        (
            SentenceTokenizer,
            {"vocabulary": ["[PAD]", "[UNK]", "a"], "max_sentences": 2},
        ),
    ],
)
def test_config_round_trip(cls, kwargs):
    layer = cls(**kwargs)
    clone = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(clone) is cls
    x = tf.constant(["A b. c a!", ""])
    np.testing.assert_array_equal(clone(x).numpy(), layer(x).numpy())
    if isinstance(kwargs["vocabulary"], str):
        assert clone.get_config()["vocabulary"] == "bert-base-uncased"


def test_validation_errors():
    with pytest.raises(ValueError, match="method"):
        Tokenizer("bert-base-uncased", method="chars")
    with pytest.raises(ValueError, match="sequence_length"):
        Tokenizer("bert-base-uncased", sequence_length=0)
    with pytest.raises(ValueError, match=r"\[PAD\] at id 0"):
        Tokenizer(["[UNK]", "[PAD]"], method="word")
    with pytest.raises(ValueError, match="max_words"):
        SentenceTokenizer(["[PAD]", "[UNK]"], max_words=-1)
