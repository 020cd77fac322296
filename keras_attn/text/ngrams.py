"""Raw strings to hashed word n-gram ids, inside the graph: the wide part's input."""

from __future__ import annotations

from keras_attn._validation import (
    check_bool,
    check_positive_int,
    check_positive_int_list,
)
from keras_attn.backend import Layer, keras, register, tf
from keras_attn.text.tokenizers import split_sentences, split_words

__all__ = ["HashedNgrams"]


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

    @classmethod
    def matching(cls, ngram_linear, name=None) -> HashedNgrams:
        """The hasher whose ids feed `ngram_linear` (an `NgramLinear`)."""
        return cls(
            **ngram_linear.hashing_config(),
            name=name or f"{ngram_linear.name}_ngrams",
        )

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
