"""Tokenization on tensorflow-text: WordPiece, words, sentences, as Keras layers.

Every function and layer here maps a batch of raw strings to token ids with TensorFlow
and tensorflow-text ops only, so the same code runs in `tf.data` (for training) and
inside an exported model (for serving raw text). The ops used are `FastBertNormalize`
and `FastWordpieceTokenizeWithOffsets` from tensorflow-text, and core TensorFlow
string, ragged and lookup-table ops (`RegexReplace`, `StringSplitV2`,
`RaggedTensorToTensor`, `LookupTableFindV2`, ...). Exports therefore load in stock
TensorFlow Serving 2.20 or newer (the release paired with tensorflow-text 2.20,
where both tensorflow-text ops are linked); newer-only ops such as `RoundRobinTrim`
are deliberately not used.

- `Tokenizer`: `(batch,)` strings -> `(batch, sequence_length)` ids, WordPiece
  (`method="wordpiece"`, BERT `[CLS] ... [SEP]`) or whole words (`method="word"`).
- `SentenceTokenizer`: `(batch,)` strings -> `(batch, max_sentences, max_words)` ids
  for HAN, sentences split on English `.!?` and Chinese `。！？；`.
- `build_vocabulary`: the most frequent words of a corpus, `[PAD]`=0, `[UNK]`=1.
- `load_vocabulary`: a BERT `vocab.txt`, or one of the two shipped with the package
  (`"bert-base-uncased"`, `"bert-base-chinese"`: Google BERT, Apache-2.0).

Id 0 is always padding, so `ids != 0` is the mask. Inputs longer than the limits are
truncated and an empty string gives all padding; nothing raises on content.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from pathlib import Path

import tensorflow_text as tf_text

from keras_attn._validation import check_choice, check_int, check_positive_int
from keras_attn.backend import Layer, keras, register, tf

__all__ = [
    "PAD",
    "SHIPPED_VOCABULARIES",
    "UNK",
    "SentenceTokenizer",
    "Tokenizer",
    "build_vocabulary",
    "load_vocabulary",
    "split_sentences",
    "split_words",
]

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
METHODS = ("wordpiece", "word")

_VOCAB_DIR = Path(__file__).resolve().parent / "vocab"
#: Vocabularies shipped with the package, by name (Google BERT, Apache-2.0).
SHIPPED_VOCABULARIES = {
    "bert-base-uncased": _VOCAB_DIR / "bert-base-uncased-vocab.txt",
    "bert-base-chinese": _VOCAB_DIR / "bert-base-chinese-vocab.txt",
}

# BERT's CJK ranges (tokenization.py `_is_chinese_char`): one token per character.
_CJK = (
    r"[\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
    r"\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}]"
)
_SENTENCE_END = r"([.!?。！？；]+)"
# A control character that never survives normalization marks sentence ends.
_SPLIT_MARK = "\x1f"


def load_vocabulary(vocabulary: str | Path | Iterable[str]) -> list[str]:
    """A vocabulary as a list of tokens (line i of vocab.txt is id i).

    Args:
        vocabulary: a shipped name (`"bert-base-uncased"`, `"bert-base-chinese"`), the
            path of a vocab.txt (one token per line), or a list of tokens.

    Returns:
        list of str.

    Example:

    >>> vocab = load_vocabulary("bert-base-uncased")
    >>> len(vocab), vocab[0], vocab[101]
    (30522, '[PAD]', '[CLS]')
    """
    if isinstance(vocabulary, (str, Path)):
        path = SHIPPED_VOCABULARIES.get(str(vocabulary), Path(vocabulary))
        if not path.is_file():
            raise ValueError(
                "`vocabulary` must be a list of tokens, a vocab.txt path or one of "
                f"{sorted(SHIPPED_VOCABULARIES)}. Received: vocabulary={vocabulary!r}"
            )
        # Split on "\n" only: BERT's Chinese vocabulary holds U+2028 and friends,
        # which str.splitlines() would also split on.
        text = path.read_text(encoding="utf-8")
        return [line.rstrip("\r") for line in text.split("\n") if line != ""]
    tokens = [str(t) for t in vocabulary]
    if not tokens:
        raise ValueError("`vocabulary` must not be empty. Received: vocabulary=[]")
    return tokens


def _normalizer(lowercase: bool):
    return tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=lowercase)


def split_words(texts, lowercase: bool = True):
    """Splits strings into words: BERT normalization, punctuation and CJK apart.

    Lower-casing and accent stripping as BERT does (NFD, drop combining marks), each
    punctuation or symbol character its own token, each CJK character its own token,
    then splitting on whitespace.

    Args:
        texts: string tensor (or `RaggedTensor`) of any shape `(...)`.
        lowercase: bool. Lower-case and strip accents. Defaults to True.

    Returns:
        A string `RaggedTensor` of shape `(..., words)`.

    Example:

    >>> split_words(["Héllo, World! 很好"]).to_list()
    [[b'hello', b',', b'world', b'!', b'\\xe5\\xbe\\x88', b'\\xe5\\xa5\\xbd']]
    """
    if isinstance(texts, tf.RaggedTensor):
        return texts.with_flat_values(split_words(texts.flat_values, lowercase))
    texts = tf.convert_to_tensor(texts, tf.string)
    texts = _normalizer(lowercase).normalize(texts)
    texts = tf.strings.regex_replace(texts, r"([\p{P}\p{S}])", r" \1 ")
    texts = tf.strings.regex_replace(texts, f"({_CJK})", r" \1 ")
    return tf.strings.split(texts)


def split_sentences(texts):
    """Splits each string into sentences in TensorFlow ops.

    A sentence ends after a run of `.`, `!`, `?` (English) or `。`, `！`, `？`, `；`
    (Chinese); sentences that hold only whitespace are dropped, so an empty string
    has no sentence.

    Args:
        texts: string tensor `(batch,)`.

    Returns:
        A string `RaggedTensor` `(batch, sentences)`.

    Example:

    >>> split_sentences(["One. Two! 三。", ""]).to_list()
    [[b'One.', b' Two!', b' \\xe4\\xb8\\x89\\xe3\\x80\\x82'], []]
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    marked = tf.strings.regex_replace(texts, _SENTENCE_END, r"\1" + _SPLIT_MARK)
    sentences = tf.strings.split(marked, _SPLIT_MARK)
    real = tf.strings.length(tf.strings.strip(sentences)) > 0
    return tf.ragged.boolean_mask(sentences, real)


def build_vocabulary(
    texts: Iterable[str],
    max_tokens: int | None = None,
    min_count: int = 1,
    lowercase: bool = True,
    batch_size: int = 512,
) -> list[str]:
    """The vocabulary of a corpus: `[PAD]`, `[UNK]`, then words by frequency.

    Words are split exactly as `Tokenizer(method="word")` splits them. Ties in
    frequency are broken alphabetically, so the result is deterministic.

    Args:
        texts: iterable of str, the training documents.
        max_tokens: int. Size of the vocabulary including `[PAD]` and `[UNK]`.
            Defaults to all words that pass `min_count`.
        min_count: int. Minimum number of occurrences of a kept word. Defaults to 1.
        lowercase: bool. As in `split_words`. Defaults to True.
        batch_size: int. Documents tokenized per TensorFlow call. Defaults to 512.

    Returns:
        list of str, `[PAD]` at 0 and `[UNK]` at 1.

    Example:

    >>> build_vocabulary(["a b b", "c b a"], min_count=2)
    ['[PAD]', '[UNK]', 'b', 'a']
    """
    # At least 3: [PAD], [UNK] and one word.
    check_int("max_tokens", max_tokens, minimum=3, allow_none=True)
    check_positive_int("min_count", min_count)
    counts = collections.Counter()
    texts = list(texts)
    for start in range(0, len(texts), batch_size):
        words = split_words(tf.constant(texts[start : start + batch_size]), lowercase)
        counts.update(w.decode("utf-8") for w in words.flat_values.numpy())
    for special in (PAD, UNK):
        counts.pop(special, None)
    ranked = sorted(
        (w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w)
    )
    if max_tokens is not None:
        ranked = ranked[: max_tokens - 2]
    return [PAD, UNK, *ranked]


class _TokenizerBase(Layer):
    """Holds the vocabulary and maps a string tensor to ragged ids (one more axis)."""

    def __init__(
        self,
        vocabulary,
        method: str = "wordpiece",
        lowercase: bool = True,
        **kwargs,
    ):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        check_choice("method", method, METHODS)
        # A shipped name stays a name in the config (not 30,000 tokens).
        self.vocabulary_spec = (
            vocabulary if isinstance(vocabulary, str) else load_vocabulary(vocabulary)
        )
        self.vocabulary = load_vocabulary(vocabulary)
        if self.vocabulary[0] != PAD:
            raise ValueError(
                f"`vocabulary` must have {PAD} at id 0. "
                f"Received: vocabulary[0]={self.vocabulary[0]!r}"
            )
        if UNK not in self.vocabulary:
            raise ValueError(f"`vocabulary` must contain {UNK}.")
        self.method = method
        self.lowercase = bool(lowercase)
        self.unk_id = self.vocabulary.index(UNK)
        if method == "wordpiece":
            self._wordpiece = tf_text.FastBertTokenizer(
                vocab=self.vocabulary,
                token_out_type=tf.int64,
                unknown_token=UNK,
                lower_case_nfd_strip_accents=self.lowercase,
            )
        else:
            self.table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(
                    tf.constant(self.vocabulary),
                    tf.range(len(self.vocabulary), dtype=tf.int64),
                ),
                default_value=self.unk_id,
            )

    @property
    def vocabulary_size(self) -> int:
        return len(self.vocabulary)

    def token_id(self, token: str) -> int:
        """The id of `token` in the vocabulary."""
        return self.vocabulary.index(token)

    def _ragged_ids(self, texts):
        """int64 ids `(..., tokens)` of a string tensor `(...)`."""
        if self.method == "wordpiece":
            return self._wordpiece.tokenize(texts)
        words = split_words(texts, self.lowercase)
        return words.with_flat_values(self.table.lookup(words.flat_values))

    def get_config(self):
        config = {
            "vocabulary": self.vocabulary_spec,
            "method": self.method,
            "lowercase": self.lowercase,
        }
        return {**super().get_config(), **config}


@register
class Tokenizer(_TokenizerBase):
    """Raw strings to padded token ids `(batch, sequence_length)`.

    `method="wordpiece"` is BERT's tokenization (tensorflow-text `FastBertTokenizer`):
    lower-casing and accent stripping, punctuation and CJK characters split, then
    WordPiece against a BERT vocab.txt; with `add_special_tokens` the ids are
    `[CLS] tokens [SEP]`. `method="word"` looks whole words (see `split_words`) up in
    a vocabulary (see `build_vocabulary`); unknown words map to `[UNK]`. Longer texts
    are truncated (keeping `[SEP]` last), shorter ones padded with 0.

    Args:
        vocabulary: list of str, a vocab.txt path or a shipped name
            (`"bert-base-uncased"`, `"bert-base-chinese"`). Id 0 must be `[PAD]`.
        sequence_length: int. Length of the output. Defaults to 128.
        method: str. "wordpiece" or "word". Defaults to "wordpiece".
        lowercase: bool. Lower-case and strip accents. Defaults to True.
        add_special_tokens: bool. Wrap in `[CLS] ... [SEP]`. Defaults to True for
            "wordpiece" and False for "word".

    Call arguments:
        inputs: string tensor `(batch,)`.

    Returns:
        int32 `(batch, sequence_length)`; 0 is padding.

    Example:

    >>> import tensorflow as tf
    >>> tokenizer = Tokenizer("bert-base-uncased", sequence_length=6)
    >>> tokenizer(tf.constant(["Hello world!"])).numpy().tolist()
    [[101, 7592, 2088, 999, 102, 0]]
    """

    def __init__(
        self,
        vocabulary,
        sequence_length: int = 128,
        method: str = "wordpiece",
        lowercase: bool = True,
        add_special_tokens: bool | None = None,
        **kwargs,
    ):
        super().__init__(vocabulary, method=method, lowercase=lowercase, **kwargs)
        check_positive_int("sequence_length", sequence_length)
        if add_special_tokens is None:
            add_special_tokens = method == "wordpiece"
        if add_special_tokens and sequence_length < 2:
            raise ValueError(
                "`sequence_length` must be at least 2 with special tokens. "
                f"Received: sequence_length={sequence_length}"
            )
        if add_special_tokens and not {CLS, SEP} <= set(self.vocabulary):
            raise ValueError(f"`vocabulary` must hold {CLS} and {SEP}.")
        self.sequence_length = sequence_length
        self.add_special_tokens = bool(add_special_tokens)

    def tokenize(self, texts):
        """int32 `(batch, sequence_length)` ids of a `(batch,)` string tensor."""
        texts = tf.convert_to_tensor(texts, tf.string)
        ids = self._ragged_ids(texts)  # (batch, tokens), ragged
        if self.add_special_tokens:
            ids = ids[:, : self.sequence_length - 2]
            batch = tf.shape(texts, out_type=tf.int64)[:1]
            cls = tf.fill(
                tf.concat([batch, [1]], 0), tf.constant(self.token_id(CLS), tf.int64)
            )
            sep = tf.fill(
                tf.concat([batch, [1]], 0), tf.constant(self.token_id(SEP), tf.int64)
            )
            ids = tf.concat([cls, ids, sep], axis=1)
        dense = ids.to_tensor(0, shape=[None, self.sequence_length])
        return tf.cast(dense, tf.int32)

    def call(self, inputs):
        return self.tokenize(inputs)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor((inputs.shape[0], self.sequence_length), "int32")

    def get_config(self):
        config = {
            "sequence_length": self.sequence_length,
            "add_special_tokens": self.add_special_tokens,
        }
        return {**super().get_config(), **config}


@register
class SentenceTokenizer(_TokenizerBase):
    """Raw strings to `(batch, max_sentences, max_words)` ids for HAN.

    Each document is split into sentences (`split_sentences`), each sentence into
    tokens (words or WordPiece, as in `Tokenizer`, without special tokens). Documents
    with more sentences keep the first `max_sentences`, sentences with more tokens
    keep the first `max_words`; the rest is padded with 0. The word mask is
    `ids != 0`, the sentence mask `any(ids != 0, axis=-1)`.

    Args:
        vocabulary: as in `Tokenizer`.
        max_sentences: int. Sentences kept per document. Defaults to 16.
        max_words: int. Tokens kept per sentence. Defaults to 32.
        method: str. "word" or "wordpiece". Defaults to "word".
        lowercase: bool. Lower-case and strip accents. Defaults to True.

    Call arguments:
        inputs: string tensor `(batch,)`.

    Returns:
        int32 `(batch, max_sentences, max_words)`; 0 is padding.

    Example:

    >>> import tensorflow as tf
    >>> tokenizer = SentenceTokenizer(
    ...     ["[PAD]", "[UNK]", "good", "bad", "."], max_sentences=3, max_words=3
    ... )
    >>> tokenizer(tf.constant(["Good. Very bad."])).numpy().tolist()
    [[[2, 4, 0], [1, 3, 4], [0, 0, 0]]]
    """

    def __init__(
        self,
        vocabulary,
        max_sentences: int = 16,
        max_words: int = 32,
        method: str = "word",
        lowercase: bool = True,
        **kwargs,
    ):
        super().__init__(vocabulary, method=method, lowercase=lowercase, **kwargs)
        check_positive_int("max_sentences", max_sentences)
        check_positive_int("max_words", max_words)
        self.max_sentences = max_sentences
        self.max_words = max_words

    def tokenize(self, texts):
        """int32 `(batch, max_sentences, max_words)` ids of `(batch,)` strings."""
        texts = tf.convert_to_tensor(texts, tf.string)
        sentences = split_sentences(texts)[:, : self.max_sentences]
        ids = self._ragged_ids(sentences)  # (batch, sentences, tokens), ragged
        dense = ids.to_tensor(0, shape=[None, self.max_sentences, self.max_words])
        return tf.cast(dense, tf.int32)

    def call(self, inputs):
        return self.tokenize(inputs)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(
            (inputs.shape[0], self.max_sentences, self.max_words), "int32"
        )

    def get_config(self):
        config = {"max_sentences": self.max_sentences, "max_words": self.max_words}
        return {**super().get_config(), **config}
