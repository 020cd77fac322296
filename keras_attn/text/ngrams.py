"""Raw strings to word n-gram ids, inside the graph: the wide part's input.

`HashedNgrams` hashes every n-gram into buckets; `NgramVocabulary` looks them up
in the training documents' n-grams of some document frequency (as scikit-learn's
`TfidfVectorizer(min_df=...)`), and drops the others."""

from __future__ import annotations

import collections

from keras_attn._validation import (
    check_bool,
    check_positive_int,
    check_positive_int_list,
)
from keras_attn.backend import Layer, keras, register, tf
from keras_attn.text.tokenizers import split_sentences, split_words

__all__ = ["HashedNgrams", "NgramVocabulary"]


@register
class HashedNgrams(Layer):
    """Raw strings to hashed word n-gram ids `(batch, max_ngrams)`: the wide input.

    Each document is split into sentences (`split_sentences`, the split HAN uses) and
    each sentence into words (`split_words`: BERT normalization, punctuation and CJK
    characters as their own tokens, the words of the word tokenizers). The n-grams of
    every width in `ngram_widths` are taken **inside each sentence**: a bigram never
    joins the last word of one sentence to the first of the next, for HAN and the
    Transformer alike (the flat Transformer sequence does not change what the wide
    part sees). Words of an n-gram are joined by one space (words never hold one),
    and each n-gram string maps to `1 + Fingerprint64(ngram) mod num_buckets`
    (`tf.strings.to_hash_bucket_fast`), so 0 stays padding. Per document the order is
    sentence by sentence, within a sentence all unigrams then all bigrams, ...; the
    first `max_ngrams` are kept, the rest padded with 0.

    Only core TensorFlow string ops (`StringSplitV2`, `StringNGrams`,
    `StringToHashBucketFast`) and tensorflow-text's normalizer run, so the same
    layer runs in `tf.data` for training and inside the exported serving model.

    Args:
        num_buckets: int. Number of hash buckets (ids 1..num_buckets). Defaults to
            2**18.
        ngram_widths: list of int. N-gram widths. Defaults to (1, 2).
        max_ngrams: int. N-grams kept per document. Defaults to 1024.
        lowercase: bool. As in `split_words`. Defaults to True.

    Call arguments:
        inputs: string tensor `(batch,)`.

    Returns:
        int32 `(batch, max_ngrams)`; 0 is padding.

    Example:

    >>> import tensorflow as tf
    >>> ids = HashedNgrams(num_buckets=1000, max_ngrams=8)(tf.constant(["Not bad."]))
    >>> ids.shape, int((ids.numpy() > 0).sum())  # not, bad, ., not bad, bad .
    (TensorShape([1, 8]), 5)
    """

    def __init__(
        self,
        num_buckets: int = 2**18,
        ngram_widths=(1, 2),
        max_ngrams: int = 1024,
        lowercase: bool = True,
        **kwargs,
    ):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        check_positive_int("num_buckets", num_buckets)
        check_positive_int("max_ngrams", max_ngrams)
        self.num_buckets = num_buckets
        self.ngram_widths = tuple(check_positive_int_list("ngram_widths", ngram_widths))
        self.max_ngrams = max_ngrams
        self.lowercase = check_bool("lowercase", lowercase)

    def feeds(self, ngram_linear) -> bool:
        """Whether this layer's ids are the ones `ngram_linear` (an `NgramLinear`)
        was made for: the same id range, widths, length and case."""
        mine = {k: v for k, v in self.get_config().items() if k != "vocabulary"}
        mine.update(num_buckets=self.num_buckets, lookup=self.lookup)
        return all(mine[k] == v for k, v in ngram_linear.hashing_config().items())

    @classmethod
    def matching(cls, ngram_linear, name=None) -> HashedNgrams:
        """The hasher whose ids feed `ngram_linear` (an `NgramLinear` with
        `lookup="hash"`; one fed by an `NgramVocabulary` is refused: only that
        vocabulary gives its ids)."""
        config = ngram_linear.hashing_config()
        if config.pop("lookup") != "hash":
            raise ValueError(
                f"The wide part {ngram_linear.name!r} reads the ids of an "
                f"`NgramVocabulary` of {ngram_linear.num_buckets} n-grams "
                "(lookup='vocabulary'), which hashing cannot rebuild: pass the "
                "classifier's preprocessor (`TextClassifier.preprocessor`, or the "
                "`NgramVocabulary` it was trained with). Received: "
                f"lookup={ngram_linear.lookup!r}"
            )
        return cls(**config, name=name or f"{ngram_linear.name}_ngrams")

    #: `NgramLinear(lookup=...)` of the layers this class makes.
    lookup = "hash"

    def ngrams(self, texts):
        """The n-gram strings `(batch, ngrams)` (ragged) of `(batch,)` strings."""
        texts = tf.convert_to_tensor(texts, tf.string)
        words = split_words(split_sentences(texts), self.lowercase)
        # (batch, sentences, words) -> n-grams per sentence, never across two.
        grams = tf.strings.ngrams(words, self.ngram_widths, separator=" ")
        return grams.merge_dims(1, 2)  # (batch, ngrams)

    def tokenize(self, texts):
        """int32 `(batch, max_ngrams)` ids of `(batch,)` strings."""
        grams = self.ngrams(texts)[:, : self.max_ngrams]
        ids = tf.ragged.map_flat_values(
            tf.strings.to_hash_bucket_fast, grams, self.num_buckets
        )
        dense = (ids + 1).to_tensor(0, shape=[None, self.max_ngrams])
        return tf.cast(dense, tf.int32)

    def call(self, inputs):
        return self.tokenize(inputs)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor((inputs.shape[0], self.max_ngrams), "int32")

    def get_config(self):
        config = {
            "num_buckets": self.num_buckets,
            "ngram_widths": list(self.ngram_widths),
            "max_ngrams": self.max_ngrams,
            "lowercase": self.lowercase,
        }
        return {**super().get_config(), **config}


@register
class NgramVocabulary(HashedNgrams):
    """Raw strings to the ids of known word n-grams `(batch, max_ngrams)`.

    The n-grams are those of `HashedNgrams` (the same sentence and word splits,
    widths and order); each is looked up in `vocabulary` (id = 1 + its index; 0
    stays padding), and n-grams not in it are dropped before the first
    `max_ngrams` are kept, as scikit-learn's `TfidfVectorizer` ignores words
    outside its vocabulary. `from_texts` builds the vocabulary from training
    documents: the n-grams of at least `min_df` of them. Unlike hashing, no two
    n-grams share an id, so a rare n-gram never adds to a frequent one's weight:
    on review_polarity's inner split the wide part (NB-scaled TF-IDF, C = 30)
    scored 0.820 over 2**18 hashed buckets and 0.852 over the n-grams of two
    documents or more (`bench_text --select-wide`, benchmarks/RESULTS.md).

    Args:
        vocabulary: list of str, the n-grams (words joined by one space); no
            duplicates, at least one.
        ngram_widths: list of int. As in `HashedNgrams`. Defaults to (1, 2).
        max_ngrams: int. Known n-grams kept per document. Defaults to 1024.
        lowercase: bool. As in `split_words`. Defaults to True.

    Call arguments:
        inputs: string tensor `(batch,)`.

    Returns:
        int32 `(batch, max_ngrams)` in `[0, len(vocabulary)]`; 0 is padding.

    Example:

    >>> import tensorflow as tf
    >>> layer = NgramVocabulary.from_texts(["not bad", "not good"], min_df=2)
    >>> layer.vocabulary
    ['not']
    >>> layer(tf.constant(["Not bad, not at all."]))[0, :3].numpy().tolist()
    [1, 1, 0]
    """

    lookup = "vocabulary"

    def __init__(
        self,
        vocabulary,
        ngram_widths=(1, 2),
        max_ngrams: int = 1024,
        lowercase: bool = True,
        **kwargs,
    ):
        vocabulary = _check_vocabulary(vocabulary)
        super().__init__(
            num_buckets=len(vocabulary),
            ngram_widths=ngram_widths,
            max_ngrams=max_ngrams,
            lowercase=lowercase,
            **kwargs,
        )
        self._vocabulary = vocabulary
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(vocabulary),
                tf.range(1, len(vocabulary) + 1, dtype=tf.int64),
            ),
            default_value=0,
        )

    @property
    def vocabulary(self) -> list:
        """The n-grams, id 1 first (a plain list: tf_keras wraps the attribute)."""
        return list(self._vocabulary)

    @classmethod
    def from_texts(
        cls,
        texts,
        min_df: int = 2,
        ngram_widths=(1, 2),
        max_ngrams: int = 1024,
        lowercase: bool = True,
        batch_size: int = 512,
        **kwargs,
    ) -> NgramVocabulary:
        """The layer over the n-grams of at least `min_df` of `texts` (most
        frequent first, ties in string order). Raises a ValueError when no
        n-gram is in that many documents."""
        check_positive_int("min_df", min_df)
        texts = list(texts)
        splitter = HashedNgrams(ngram_widths=ngram_widths, lowercase=lowercase)
        df = collections.Counter()
        for start in range(0, len(texts), batch_size):
            grams = splitter.ngrams(tf.constant(texts[start : start + batch_size]))
            for row in grams.to_list():
                df.update(set(row))
        kept = sorted(
            (g for g, n in df.items() if n >= min_df), key=lambda g: (-df[g], g)
        )
        if not kept:
            raise ValueError(
                f"`min_df`={min_df} keeps no n-gram of the {len(texts)} documents "
                f"`texts` (the most frequent is in {max(df.values(), default=0)}): "
                "pass a smaller `min_df` or more documents."
            )
        return cls(
            [g.decode("utf-8") for g in kept],
            ngram_widths=ngram_widths,
            max_ngrams=max_ngrams,
            lowercase=lowercase,
            **kwargs,
        )

    def tokenize(self, texts):
        """int32 `(batch, max_ngrams)` ids of `(batch,)` strings."""
        grams = self.ngrams(texts)
        ids = tf.ragged.map_flat_values(self.table.lookup, grams)
        # Unknown n-grams (id 0) out before the first `max_ngrams` are kept.
        ids = tf.ragged.boolean_mask(ids, ids > 0)[:, : self.max_ngrams]
        return tf.cast(ids.to_tensor(0, shape=[None, self.max_ngrams]), tf.int32)

    def get_config(self):
        config = super().get_config()
        config.pop("num_buckets")
        return {**config, "vocabulary": self.vocabulary}


def _check_vocabulary(vocabulary) -> list:
    """`vocabulary` as a list of distinct non-empty str, at least one."""
    if isinstance(vocabulary, (str, bytes)) or not hasattr(vocabulary, "__iter__"):
        raise ValueError(
            "`vocabulary` must be a list of n-gram strings. Received: "
            f"vocabulary={vocabulary!r}"
        )
    vocabulary = [v.decode("utf-8") if isinstance(v, bytes) else v for v in vocabulary]
    bad = [v for v in vocabulary if not isinstance(v, str) or not v]
    if not vocabulary or bad:
        raise ValueError(
            "`vocabulary` must hold at least one n-gram, each a non-empty str. "
            f"Received: {len(vocabulary)} entries"
            + (f", e.g. {bad[0]!r}" if bad else "")
        )
    seen = collections.Counter(vocabulary)
    repeated = [v for v, n in seen.items() if n > 1]
    if repeated:
        raise ValueError(
            "`vocabulary` must not repeat an n-gram (ids would be ambiguous). "
            f"Received: {repeated[0]!r} {seen[repeated[0]]} times"
        )
    return vocabulary
