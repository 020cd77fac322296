"""BertTokenizer, pack_segments and BertPreprocessor: Hugging Face's BERT
tokenization rules (`tokenizers`' BertNormalizer, BertPreTokenizer, WordPiece and
LongestFirst truncation), each case written out by hand from those rules."""

import json

import numpy as np
import pytest

from keras_attn.backend import keras, tf
from keras_attn.models import BertPreprocessor
from keras_attn.text import BertTokenizer, pack_segments

VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "hello", "Hello", "héllo", "Héllo", "world", ",", "!", "™", "tm",
    "好", "好好", "un", "##able", "σας", "σασ",
]  # fmt: skip
WORDS = [f"w{i}" for i in range(20)]


def _ids(tokenizer, text):
    return tokenizer(tf.constant([text])).to_list()[0]


def _tokens(tokenizer, text):
    return [tokenizer.vocabulary[i] for i in _ids(tokenizer, text)]


@pytest.mark.generation_neutral
def test_normalization_follows_the_tokenizer_config():
    lower = BertTokenizer(VOCAB)
    assert _tokens(lower, "HÉLLO, World!") == ["hello", ",", "world", "!"]
    keep_accents = BertTokenizer(VOCAB, strip_accents=False)
    assert _tokens(keep_accents, "HÉLLO") == ["héllo"]
    cased = BertTokenizer(VOCAB, lowercase=False)
    assert _tokens(cased, "Héllo hello") == ["Héllo", "hello"]
    cased_stripped = BertTokenizer(VOCAB, lowercase=False, strip_accents=True)
    assert _tokens(cased_stripped, "Héllo") == ["Hello"]
    # CJK ideographs one by one, or as a word WordPiece splits.
    assert _tokens(lower, "好好") == ["好", "好"]
    assert _tokens(BertTokenizer(VOCAB, split_chinese=False), "好好") == ["好好"]


@pytest.mark.generation_neutral
def test_characters_as_hugging_face_treats_them():
    tokenizer = BertTokenizer(VOCAB, max_input_chars_per_word=6)
    # ™ is a symbol, not punctuation, and NFD keeps it (NFKC would give "tm").
    assert _tokens(tokenizer, "™") == ["™"]
    # Controls and U+0000 are removed, \t \n \r and U+3000 separate words.
    assert _tokens(tokenizer, "hel\x00lo\tworld\u3000hel\u200blo") == [
        "hello",
        "world",
        "hello",
    ]
    # Lower-cased character by character: a final capital sigma gives "σ".
    assert _tokens(tokenizer, "ΣΑΣ") == ["σασ"]
    # WordPiece, an unknown word, and a word past max_input_chars_per_word.
    assert _tokens(tokenizer, "unable unknown") == ["un", "##able", "[UNK]"]
    assert _tokens(BertTokenizer(VOCAB, max_input_chars_per_word=3), "unable") == [
        "[UNK]"
    ]
    assert _ids(tokenizer, "") == [] and _ids(tokenizer, " \t ") == []


def _segment(lengths):
    """A ragged batch of word ids 10, 11, ... of the given lengths."""
    return tf.ragged.constant([list(range(10, 10 + n)) for n in lengths], tf.int32)


@pytest.mark.generation_neutral
@pytest.mark.parametrize(
    "a, b, kept",
    [
        (5, 2, (5, 2)),  # fits the budget of 10 - 3 = 7
        (6, 2, (5, 2)),  # only the longer is cut
        (2, 6, (2, 5)),
        (5, 5, (3, 4)),  # both cut: the second gets the odd token on a tie
        (6, 5, (4, 3)),  # ... and the strictly longer first otherwise
        (0, 9, (0, 7)),
    ],
)
def test_pairs_are_truncated_longest_first(a, b, kept):
    packed = pack_segments([_segment([a]), _segment([b])], 10, cls_id=2, sep_id=3)
    ka, kb = kept
    first, second = list(range(10, 10 + ka)), list(range(10, 10 + kb))
    expected = [2, *first, 3, *second, 3]
    expected += [0] * (10 - len(expected))
    assert packed["token_ids"].numpy().tolist() == [expected]
    segments = [0] * (ka + 2) + [1] * (kb + 1)
    assert packed["segment_ids"].numpy().tolist() == [
        segments + [0] * (10 - len(segments))
    ]


@pytest.mark.generation_neutral
def test_single_segments_are_truncated_and_padded():
    packed = pack_segments([_segment([8, 0, 2])], 6, cls_id=2, sep_id=3)
    assert packed["token_ids"].numpy().tolist() == [
        [2, 10, 11, 12, 13, 3],
        [2, 3, 0, 0, 0, 0],
        [2, 10, 11, 3, 0, 0],
    ]
    assert packed["token_ids"].dtype == tf.int32
    assert not packed["segment_ids"].numpy().any()
    with pytest.raises(ValueError, match="room for the 3 special tokens"):
        pack_segments([_segment([1]), _segment([1])], 2, cls_id=2, sep_id=3)


def _head_and_tail(ids, kept):
    """The "middle" rule written out: the first kept // 4 ids and the last
    kept - kept // 4 (all of them when they fit)."""
    if len(ids) <= kept:
        return list(ids)
    head = kept // 4
    return list(ids[:head]) + list(ids[len(ids) - (kept - head) :])


@pytest.mark.generation_neutral
@pytest.mark.parametrize("length", [6, 7, 12])
def test_long_segments_lose_their_middle(length):
    lengths = [0, 1, 3, 4, 5, 9, 30]
    packed = pack_segments(
        [_segment(lengths)], length, cls_id=2, sep_id=3, truncate="middle"
    )
    budget = length - 2
    for row, n in zip(packed["token_ids"].numpy().tolist(), lengths):
        kept = _head_and_tail(list(range(10, 10 + n)), budget)
        assert row == [2, *kept, 3] + [0] * (length - 2 - len(kept))


@pytest.mark.generation_neutral
def test_pairs_lose_the_middle_of_their_share():
    packed = pack_segments(
        [_segment([9]), _segment([8])], 12, cls_id=2, sep_id=3, truncate="middle"
    )
    # Longest first gives each a share of 4 (budget 9: 5 and 4); then each keeps
    # the head and tail of its share.
    first = _head_and_tail(list(range(10, 19)), 5)
    second = _head_and_tail(list(range(10, 18)), 4)
    assert packed["token_ids"].numpy().tolist() == [[2, *first, 3, *second, 3]]
    assert first == [10, 15, 16, 17, 18] and second == [10, 15, 16, 17]


@pytest.mark.generation_neutral
def test_truncate_names_itself():
    with pytest.raises(ValueError, match="truncate.*'end', 'middle'.*'start'"):
        pack_segments([_segment([1])], 4, cls_id=2, sep_id=3, truncate="start")
    with pytest.raises(ValueError, match="truncate.*'start'"):
        BertPreprocessor(BertTokenizer(VOCAB), 8, truncate="start")


def test_preprocessor_truncates_in_the_middle_and_keeps_it_in_its_config():
    preprocessor = BertPreprocessor(
        BertTokenizer(VOCAB + WORDS), sequence_length=6, truncate="middle"
    )
    text = tf.constant([" ".join(f"w{i}" for i in range(10)), "w1 w2"])
    out = preprocessor(text)["token_ids"].numpy().tolist()
    # Room for 4 pieces of w0..w9 (ids 20..29): w0, then w7 w8 w9.
    assert out == [[2, 20, 27, 28, 29, 3], [2, 21, 22, 3, 0, 0]]
    again = BertPreprocessor.from_config(preprocessor.get_config())
    assert again.truncate == "middle"
    np.testing.assert_array_equal(again(text)["token_ids"], out)


def test_preprocessor_pairs_config_and_files(tmp_path):
    preprocessor = BertPreprocessor(BertTokenizer(VOCAB + WORDS), sequence_length=8)
    out = preprocessor((tf.constant(["hello world"]), tf.constant(["w1 w2 w3 w4"])))
    assert out["token_ids"].numpy().tolist() == [[2, 5, 9, 3, 21, 22, 23, 3]]
    assert out["segment_ids"].numpy().tolist() == [[0, 0, 0, 0, 1, 1, 1, 1]]
    again = BertPreprocessor.from_config(preprocessor.get_config())
    np.testing.assert_array_equal(
        again(tf.constant(["hello"]))["token_ids"],
        preprocessor(tf.constant(["hello"]))["token_ids"],
    )
    preprocessor.save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 16}))
    loaded = BertPreprocessor.from_pretrained(tmp_path)
    assert loaded.sequence_length == 16
    assert loaded.tokenizer.vocabulary == VOCAB + WORDS
    assert loaded.tokenizer.lowercase and loaded.tokenizer.strip_accents is None


def test_preprocessor_in_a_functional_model():
    preprocessor = BertPreprocessor(BertTokenizer(VOCAB), sequence_length=6)
    text = keras.Input(shape=(), dtype="string", name="text")
    model = keras.Model(text, preprocessor(text))
    out = model(tf.constant(["Hello world", ""]))
    assert out["token_ids"].numpy().tolist() == [[2, 5, 9, 3, 0, 0], [2, 3, 0, 0, 0, 0]]


def test_preprocessor_checks_its_inputs(tmp_path):
    tokenizer = BertTokenizer(VOCAB)
    with pytest.raises(ValueError, match="`tokenizer` must be a BertTokenizer"):
        BertPreprocessor("vocab.txt")
    with pytest.raises(ValueError, match="`sequence_length` must be at least 3"):
        BertPreprocessor(tokenizer, 2)
    with pytest.raises(ValueError, match=r"inputs.shape=\(1, 2\)"):
        BertPreprocessor(tokenizer, 8)(tf.constant([["a", "b"]]))
    with pytest.raises(ValueError, match="must have \\[PAD\\] at id 0"):
        BertTokenizer(["[UNK]", "[PAD]", "[CLS]", "[SEP]"])
    with pytest.raises(ValueError, match="must contain \\[CLS\\]"):
        BertTokenizer(["[PAD]", "[UNK]", "[SEP]"])
    with pytest.raises(ValueError, match="vocab.txt is missing"):
        BertPreprocessor.from_pretrained(tmp_path)
    (tmp_path / "vocab.txt").write_text("".join(f"{t}\n" for t in VOCAB))
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": "yes"}')
    with pytest.raises(ValueError, match="`do_lower_case` of .*tokenizer_config.json"):
        BertPreprocessor.from_pretrained(tmp_path)
