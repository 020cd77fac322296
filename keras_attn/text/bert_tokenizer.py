"""BERT's WordPiece tokenization as Hugging Face checkpoints define it, on
tensorflow-text, and the `[CLS] a [SEP] b [SEP]` packing of one or two segments.

`BertTokenizer` reproduces the `tokenizers` library's `BertNormalizer` +
`BertPreTokenizer` + `WordPiece` (what `transformers` runs for a BERT checkpoint):
control characters removed, whitespace mapped to spaces, CJK ideographs split, accents
stripped (NFD, then nonspacing marks dropped) and text lower-cased as the
checkpoint's `tokenizer_config.json` says, split on whitespace and punctuation, then
WordPiece with `[UNK]` for a word longer than `max_input_chars_per_word` characters
or not covered by the vocabulary. The ops are core TensorFlow (`RegexReplace`,
`StringLower`, `StringSplitV2`, ragged ops) and two tensorflow-text ops linked in TF
Serving's model server (`NormalizeUTF8`, `FastWordpieceTokenizeWithOffsets`).

tensorflow-text's `FastBertNormalize` is not used here: it folds case with
NFKC_Casefold, which maps "™" to "tm" and "，" to ","; the checkpoint's tokenizer
keeps both. Measured against `transformers` 5.25 on 16,773 texts (three corpora and
3,000 random Unicode strings) and on every code point: the ids agree except on
(a) the 568 code points, marks and punctuation of scripts added in Unicode 10 or
later, that `tokenizers`' older character tables class as letters, and (b) text that
spells a special token ("[MASK]"), which `transformers` maps to that token and this
tokenizer splits as ordinary text (so user text cannot inject control tokens).

`pack_segments` is the truncation and packing step (longest first for pairs, as
`tokenizers` does it) shared by every WordPiece tokenizer of the package.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from keras_attn._validation import check_bool, check_choice, check_positive_int
from keras_attn.backend import Layer, register, tf
from keras_attn.text.tokenizers import (
    CLS,
    PAD,
    SEP,
    UNK,
    load_vocabulary,
    tf_text,
)

__all__ = ["BertTokenizer", "pack_segments"]

# `tokenizers`' is_chinese_char ranges (note 0x2B920, where Google's Python has
# 0x2B820): one token per ideograph.
_CJK = (
    r"[\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
    r"\x{2B740}-\x{2B81F}\x{2B920}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}]"
)
# Rust's char::is_whitespace (the White_Space property) once controls are gone.
_WHITESPACE = (
    r"[ \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]"
)
# ASCII punctuation and every Unicode punctuation category.
_PUNCTUATION = r"([!-/:-@\[-`{-~\p{P}])"
# The files a Hugging Face tokenizer folder holds for WordPiece.
VOCAB_FILE, TOKENIZER_CONFIG_FILE = "vocab.txt", "tokenizer_config.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} could not be read as JSON: {error}") from None


@register
class BertTokenizer(Layer):
    """Raw strings to WordPiece ids, as a Hugging Face BERT checkpoint tokenizes.

    Args:
        vocabulary: list of str or a vocab.txt path (line i is id i). Must hold
            `[PAD]` at id 0, `[UNK]`, `[CLS]` and `[SEP]`.
        lowercase: bool. Lower-case the text (`do_lower_case`). Defaults to True.
        strip_accents: bool or None. Drop accents (NFD, then nonspacing marks);
            None follows `lowercase`, as Hugging Face does. Defaults to None.
        split_chinese: bool. Put each CJK ideograph in its own word
            (`tokenize_chinese_chars`). Defaults to True.
        max_input_chars_per_word: int. Longer words become `[UNK]`. Defaults to 100.

    Call arguments:
        inputs: string tensor `(batch,)`.

    Returns:
        int32 `RaggedTensor` `(batch, tokens)`, without special tokens.

    Example:

    >>> import tensorflow as tf
    >>> tokenizer = BertTokenizer("bert-base-uncased")
    >>> tokenizer(tf.constant(["Héllo, ™ world!"])).to_list()
    [[7592, 1010, 1580, 2088, 999]]
    """

    def __init__(
        self,
        vocabulary,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        split_chinese: bool = True,
        max_input_chars_per_word: int = 100,
        **kwargs,
    ):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self.vocabulary = load_vocabulary(vocabulary)
        for token in (UNK, CLS, SEP):
            if token not in self.vocabulary:
                raise ValueError(
                    f"`vocabulary` must contain {token}. Received: a vocabulary of "
                    f"{len(self.vocabulary)} tokens without it"
                )
        if self.vocabulary[0] != PAD:
            raise ValueError(
                f"`vocabulary` must have {PAD} at id 0 (padding is id 0). Received: "
                f"vocabulary[0]={self.vocabulary[0]!r}"
            )
        self.lowercase = check_bool("lowercase", lowercase)
        if strip_accents is not None:
            check_bool("strip_accents", strip_accents)
        self.strip_accents = strip_accents
        self.split_chinese = check_bool("split_chinese", split_chinese)
        self.max_input_chars_per_word = check_positive_int(
            "max_input_chars_per_word", max_input_chars_per_word
        )
        # Lengths are checked in characters below: the byte limit only has to let
        # every allowed word through (4 bytes per character at most in UTF-8).
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=self.vocabulary,
            suffix_indicator="##",
            max_bytes_per_word=4 * self.max_input_chars_per_word,
            token_out_type=tf.int64,
            unknown_token=UNK,
            no_pretokenization=True,
            support_detokenization=False,
        )

    @classmethod
    def from_pretrained(cls, path, **kwargs) -> BertTokenizer:
        """The tokenizer of a Hugging Face model folder: `vocab.txt` and the
        `do_lower_case`, `strip_accents` and `tokenize_chinese_chars` of its
        `tokenizer_config.json` (Hugging Face's defaults where absent)."""
        path = Path(path)
        vocab_file = path / VOCAB_FILE
        if not vocab_file.is_file():
            raise ValueError(
                f"{vocab_file} is missing: `BertTokenizer.from_pretrained` reads a "
                f"WordPiece vocabulary. Received: path={str(path)!r}"
            )
        config_file = path / TOKENIZER_CONFIG_FILE
        config = _read_json(config_file) if config_file.is_file() else {}
        settings = {
            "lowercase": config.get("do_lower_case", True),
            "strip_accents": config.get("strip_accents"),
            "split_chinese": config.get("tokenize_chinese_chars", True),
        }
        for setting, key in (
            ("lowercase", "do_lower_case"),
            ("split_chinese", "tokenize_chinese_chars"),
        ):
            check_bool(key, settings[setting], where=str(config_file))
        for token in ("unk_token", "cls_token", "sep_token", "pad_token"):
            value = config.get(token)
            expected = {"unk_token": UNK, "cls_token": CLS, "sep_token": SEP}.get(
                token, PAD
            )
            if isinstance(value, str) and value != expected:
                raise ValueError(
                    f"{config_file}: `{token}` must be {expected!r} (BERT's special "
                    f"tokens). Received: {token}={value!r}"
                )
        return cls(str(vocab_file), **{**settings, **kwargs})

    def save_pretrained(self, path) -> None:
        """Writes `vocab.txt`, `tokenizer_config.json` and
        `special_tokens_map.json` into `path` (each file replaced whole)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        special = {
            "unk_token": UNK,
            "sep_token": SEP,
            "pad_token": PAD,
            "cls_token": CLS,
            "mask_token": "[MASK]",
        }
        config = {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": self.lowercase,
            "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": self.split_chinese,
            "do_basic_tokenize": True,
            **special,
        }
        write_file(path / VOCAB_FILE, "".join(f"{t}\n" for t in self.vocabulary))
        write_file(path / TOKENIZER_CONFIG_FILE, json.dumps(config, indent=2))
        write_file(path / SPECIAL_TOKENS_FILE, json.dumps(special, indent=2))

    @property
    def vocabulary_size(self) -> int:
        return len(self.vocabulary)

    def token_id(self, token: str) -> int:
        """The id of `token` in the vocabulary."""
        return self.vocabulary.index(token)

    def words(self, texts):
        """The normalized words of a `(batch,)` string tensor, `(batch, words)`."""
        texts = tf.convert_to_tensor(texts, tf.string)
        # BertNormalizer's clean_text: \t \n \r become spaces, the other controls
        # (\p{C}: control, format, private use) and U+0000/U+FFFD go.
        texts = tf.strings.regex_replace(texts, r"[\t\n\r]", " ")
        texts = tf.strings.regex_replace(texts, r"[\x00\x{FFFD}\p{C}]", "")
        texts = tf.strings.regex_replace(texts, _WHITESPACE, " ")
        if self.split_chinese:
            texts = tf.strings.regex_replace(texts, f"({_CJK})", r" \1 ")
        strip = self.lowercase if self.strip_accents is None else self.strip_accents
        if strip:
            texts = tf_text.normalize_utf8(texts, "NFD")
            texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
        if self.lowercase:
            # Lower-cased character by character, as `tokenizers` does: ICU would
            # turn a word-final capital sigma into "ς", Hugging Face gives "σ".
            texts = tf.strings.regex_replace(texts, "Σ", "σ")
            texts = tf.strings.lower(texts, encoding="utf-8")
        texts = tf.strings.regex_replace(texts, _PUNCTUATION, r" \1 ")
        return tf.strings.split(texts)

    def tokenize(self, texts):
        """int32 ragged ids `(batch, tokens)` of a `(batch,)` string tensor."""
        words = self.words(texts)
        flat = words.flat_values
        too_long = (
            tf.strings.length(flat, unit="UTF8_CHAR") > self.max_input_chars_per_word
        )
        # "[UNK]" is itself in the vocabulary, so the word piece of it is its id.
        flat = tf.where(too_long, tf.constant(UNK), flat)
        pieces = self._wordpiece.tokenize(flat)  # (words, pieces)
        ids = words.with_flat_values(pieces).merge_dims(1, 2)
        return tf.cast(ids, tf.int32)

    def build(self, inputs_shape=None):
        self.built = True

    def call(self, inputs):
        return self.tokenize(inputs)

    def get_config(self):
        config = {
            "vocabulary": self.vocabulary,
            "lowercase": self.lowercase,
            "strip_accents": self.strip_accents,
            "split_chinese": self.split_chinese,
            "max_input_chars_per_word": self.max_input_chars_per_word,
        }
        return {**super().get_config(), **config}


def write_file(path: Path, text: str | bytes) -> None:
    """Writes `path` whole or not at all: a temporary file beside it, then a rename."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.partial")
    data = text.encode("utf-8") if isinstance(text, str) else text
    with open(partial, "wb") as file:
        file.write(data)
    os.replace(partial, path)


def _longest_first(first, second, budget):
    """Kept lengths of two segments of lengths `first`, `second` (int tensors)
    that must fit `budget` tokens together: `tokenizers`' LongestFirst rule."""
    short = tf.minimum(first, second)
    # Only the longer one is cut while the shorter fits in half the budget; else
    # both get half (the longer one the odd token).
    both_cut = 2 * short > budget
    short_kept = tf.where(both_cut, budget // 2, short)
    long_kept = tf.where(both_cut, budget - budget // 2, budget - short)
    fits = first + second <= budget
    # A first segment strictly longer than the second takes the longer share.
    first_kept = tf.where(first > second, long_kept, short_kept)
    second_kept = tf.where(first > second, short_kept, long_kept)
    return (
        tf.where(fits, first, tf.minimum(first, first_kept)),
        tf.where(fits, second, tf.minimum(second, second_kept)),
    )


def _keep_first(ids, lengths):
    """The first `lengths[i]` ids of each row of a ragged `(batch, tokens)`."""
    positions = tf.ragged.range(ids.row_lengths())
    return tf.ragged.boolean_mask(ids, positions < lengths[:, tf.newaxis])


def _keep_head_and_tail(ids, lengths):
    """`lengths[i]` ids of each row of a ragged `(batch, tokens)`: its first
    `lengths[i] // 4` and its last `lengths[i] - lengths[i] // 4` (all of a row that
    fits)."""
    head = lengths // 4
    tail = lengths - head
    positions = tf.ragged.range(ids.row_lengths())
    # A row that fits keeps all: its tail starts at or before its head ends.
    tail_start = ids.row_lengths() - tail
    keep = (positions < head[:, tf.newaxis]) | (positions >= tail_start[:, tf.newaxis])
    return tf.ragged.boolean_mask(ids, keep)


#: How a segment longer than its share of the budget is cut (`pack_segments`).
TRUNCATE = {"end": _keep_first, "middle": _keep_head_and_tail}


def _filled(length, value):
    """A ragged `(batch, length[i])` of `value`, row lengths `length` (int64)."""
    return tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(length)], tf.constant(value, tf.int32)), length
    )


def pack_segments(
    segments,
    sequence_length: int,
    cls_id: int,
    sep_id: int,
    truncation: str = "longest_first",
    truncate: str = "end",
) -> dict:
    """`[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, truncated and padded with 0.

    Args:
        segments: one or two int ragged tensors `(batch, tokens)` (WordPiece ids
            without special tokens).
        sequence_length: int. Length of the output, special tokens included.
        cls_id: int. Id of `[CLS]`.
        sep_id: int. Id of `[SEP]`.
        truncation: str. "longest_first" (the longer segment loses tokens first;
            Hugging Face's default for pairs). Defaults to "longest_first".
        truncate: str. Which tokens a segment longer than its share loses: "end"
            (it keeps its first tokens; Hugging Face's default) or "middle" (it
            keeps its first quarter and its last three quarters, the head + tail
            of long documents of Sun et al., 2019, "How to Fine-Tune BERT for Text
            Classification?"). Defaults to "end".

    Returns:
        `{"token_ids", "segment_ids"}`, int32 `(batch, sequence_length)`; segment 0
        for `[CLS] a [SEP]`, 1 for `b [SEP]`, 0 on padding.

    Example:

    >>> import tensorflow as tf
    >>> a = tf.ragged.constant([[5, 6, 7, 8]])
    >>> b = tf.ragged.constant([[9, 10]])
    >>> packed = pack_segments([a, b], 8, cls_id=1, sep_id=2)
    >>> packed["token_ids"].numpy().tolist(), packed["segment_ids"].numpy().tolist()
    ([[1, 5, 6, 7, 2, 9, 10, 2]], [[0, 0, 0, 0, 0, 1, 1, 1]])

    A long segment cut in the middle (one of four kept tokens from its start):

    >>> long = tf.ragged.constant([[3, 4, 5, 6, 7, 8, 9, 10, 11]])
    >>> pack_segments([long], 6, cls_id=1, sep_id=2, truncate="middle")[
    ...     "token_ids"].numpy().tolist()
    [[1, 3, 9, 10, 11, 2]]
    """
    check_choice("truncation", truncation, ("longest_first",))
    check_choice("truncate", truncate, TRUNCATE)
    segments = [tf.cast(s, tf.int32) for s in segments]
    if len(segments) not in (1, 2):
        raise ValueError(
            "`segments` must hold one or two segments. Received: "
            f"{len(segments)} segments"
        )
    check_positive_int("sequence_length", sequence_length)
    budget = sequence_length - 1 - len(segments)  # [CLS] and one [SEP] per segment
    if budget < 0:
        raise ValueError(
            f"`sequence_length` must leave room for the {1 + len(segments)} special "
            f"tokens. Received: sequence_length={sequence_length}"
        )
    lengths = [s.row_lengths() for s in segments]
    if len(segments) == 1:
        kept = [tf.minimum(lengths[0], budget)]
    else:
        kept = list(_longest_first(*lengths, tf.constant(budget, tf.int64)))
    segments = [TRUNCATE[truncate](s, k) for s, k in zip(segments, kept)]
    one = tf.ones_like(lengths[0])
    pieces, types = [_filled(one, cls_id)], [_filled(one, 0)]
    for index, (segment, length) in enumerate(zip(segments, kept)):
        pieces += [segment, _filled(one, sep_id)]
        types += [_filled(length + 1, index)]
    token_ids = tf.concat(pieces, axis=1)
    segment_ids = tf.concat(types, axis=1)
    shape = [None, sequence_length]
    return {
        "token_ids": token_ids.to_tensor(0, shape=shape),
        "segment_ids": segment_ids.to_tensor(0, shape=shape),
    }
