"""The text classifiers' preprocessors: raw strings to a classifier's inputs, one
class per model kind (HAN, the Transformer, BERT), each with the wide part's n-gram
hasher when the classifier has one.

`fit_text_classifier` tokenizes its training documents with the preprocessor, the
`TextClassifier` it returns holds it, and its serving model, its `predict`, the
export and the explain signature put the same object in front of the classifier:
"raw strings -> model inputs" is written here once per model kind.
"""

from __future__ import annotations

import numpy as np

from keras_attn.backend import Layer, keras, register, tf
from keras_attn.models.bert import BertClassifier
from keras_attn.models.bert_preprocessor import BertPreprocessor
from keras_attn.models.classifier_head import wide_layer
from keras_attn.text.ngrams import HashedNgrams
from keras_attn.text.tokenizers import SentenceTokenizer, Tokenizer

__all__ = [
    "BertTextPreprocessor",
    "HANTextPreprocessor",
    "TextPreprocessor",
    "TransformerTextPreprocessor",
    "text_preprocessor",
]

#: Texts per TensorFlow call of `TextPreprocessor.inputs` (bounds its memory).
BATCH = 256


def _layer(value):
    """A layer, or the layer a serialized config describes (None stays None)."""
    if isinstance(value, dict):
        return keras.saving.deserialize_keras_object(value)
    return value


class TextPreprocessor(Layer):
    """Raw strings to a text classifier's inputs (the base of one class per kind).

    The kind's tokenizer gives the deep part's inputs (`encode`); `ngrams`, the
    `HashedNgrams` of the classifier's wide part, adds `ngram_ids`. The result has
    the classifier's input structure: a dict of `token_ids` (and `segment_ids`,
    `ngram_ids`), or the token ids alone when they are all the classifier takes.

    Args:
        tokenizer: the kind's tokenizer layer.
        ngrams: optional `HashedNgrams` (`HashedNgrams.matching(classifier.wide)`).
            Defaults to None (no wide part).

    Call arguments:
        inputs: string tensor `(batch,)`, symbolic or eager.

    Returns:
        The classifier's inputs (see above).
    """

    #: The tokenizer classes the kind takes (checked at construction).
    tokenizer_types: tuple = ()

    def __init__(self, tokenizer, ngrams=None, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        tokenizer, ngrams = _layer(tokenizer), _layer(ngrams)
        if not isinstance(tokenizer, self.tokenizer_types):
            expected = " or ".join(t.__name__ for t in self.tokenizer_types)
            raise ValueError(
                f"`tokenizer` of a {type(self).__name__} must be a {expected}. "
                f"Received: tokenizer={type(tokenizer).__name__}"
            )
        if ngrams is not None and not isinstance(ngrams, HashedNgrams):
            raise ValueError(
                "`ngrams` must be a HashedNgrams or None. Received: "
                f"ngrams={type(ngrams).__name__}"
            )
        self.tokenizer = tokenizer
        self.ngrams = ngrams

    @property
    def vocabulary_size(self) -> int:
        return self.tokenizer.vocabulary_size

    def for_classifier(self, classifier) -> TextPreprocessor:
        """This kind's preprocessor for `classifier`: the same tokenizer, with the
        n-grams that feed its wide part: this preprocessor's own when they do
        (an `NgramVocabulary` from the training documents), else the
        `HashedNgrams` the wide part records (`HashedNgrams.matching`); none
        without a wide part."""
        wide = wide_layer(classifier)
        if wide is None:
            ngrams = None
        elif self.ngrams is not None and self.ngrams.feeds(wide):
            ngrams = self.ngrams
        else:
            ngrams = HashedNgrams.matching(wide)
        return type(self)(self.tokenizer, ngrams=ngrams, name=self.name)

    def encode(self, texts) -> dict:
        """The deep part's inputs of a `(batch,)` string tensor, as a dict."""
        return {"token_ids": self.tokenizer.tokenize(texts)}

    def encode_spec(self, inputs) -> dict:
        """`encode`'s output spec (Keras 3 builds functional models from specs)."""
        return {"token_ids": self.tokenizer.compute_output_spec(inputs)}

    def build(self, inputs_shape=None):
        # Nothing to build: vocabularies and hashing are constants of the graph.
        for layer in (self.tokenizer, self.ngrams):
            if layer is not None:
                layer.built = True
        self.built = True

    def call(self, inputs):
        texts = tf.convert_to_tensor(inputs, tf.string)
        features = self.encode(texts)
        if self.ngrams is not None:
            features["ngram_ids"] = self.ngrams.tokenize(texts)
        return model_structure(features)

    def compute_output_spec(self, inputs):
        features = self.encode_spec(inputs)
        if self.ngrams is not None:
            features["ngram_ids"] = self.ngrams.compute_output_spec(inputs)
        return model_structure(features)

    def inputs(self, texts, batch_size: int = BATCH) -> dict:
        """The inputs of a list of raw strings as NumPy arrays, always a dict
        (tokenized eagerly on the host, `batch_size` texts per call): what
        `fit_text_classifier` feeds the classifier."""
        texts = list(texts)
        parts = []
        for start in range(0, len(texts), batch_size):
            batch = tf.constant(texts[start : start + batch_size], tf.string)
            features = self.encode(batch)
            if self.ngrams is not None:
                features["ngram_ids"] = self.ngrams.tokenize(batch)
            parts.append({k: v.numpy() for k, v in features.items()})
        if not parts:
            return {"token_ids": np.zeros((0,), "int64")}
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def get_config(self):
        return {
            **super().get_config(),
            "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
            "ngrams": None
            if self.ngrams is None
            else keras.saving.serialize_keras_object(self.ngrams),
        }


def model_structure(features: dict):
    """A classifier's input structure: the token ids alone when they are the only
    input (HAN and the Transformer without a wide part), else the dict."""
    return features if len(features) > 1 else features["token_ids"]


@register
class HANTextPreprocessor(TextPreprocessor):
    """Raw strings to a HAN classifier's inputs: `token_ids` `(batch,
    max_sentences, max_words)` from a `SentenceTokenizer` (and `ngram_ids` with a
    wide part; see `TextPreprocessor`).

    Example:

    >>> import tensorflow as tf
    >>> from keras_attn.text import SentenceTokenizer
    >>> tokenizer = SentenceTokenizer(
    ...     ["[PAD]", "[UNK]", "good", "bad", "."], max_sentences=2, max_words=3
    ... )
    >>> HANTextPreprocessor(tokenizer)(tf.constant(["Good. Bad."])).numpy().tolist()
    [[[2, 4, 0], [3, 4, 0]]]
    """

    tokenizer_types = (SentenceTokenizer,)


@register
class TransformerTextPreprocessor(TextPreprocessor):
    """Raw strings to a Transformer classifier's inputs: `token_ids` `(batch,
    sequence_length)` from a `Tokenizer` (and `ngram_ids` with a wide part; see
    `TextPreprocessor`).

    Example:

    >>> import tensorflow as tf
    >>> from keras_attn.text import HashedNgrams, Tokenizer
    >>> preprocessor = TransformerTextPreprocessor(
    ...     Tokenizer(["[PAD]", "[UNK]", "good"], sequence_length=3, method="word"),
    ...     ngrams=HashedNgrams(num_buckets=100, max_ngrams=4),
    ... )
    >>> out = preprocessor(tf.constant(["good good"]))
    >>> out["token_ids"].numpy().tolist(), out["ngram_ids"].shape
    ([[2, 2, 0]], TensorShape([1, 4]))
    """

    tokenizer_types = (Tokenizer,)


@register
class BertTextPreprocessor(TextPreprocessor):
    """Raw strings to a `BertClassifier`'s inputs: `token_ids` and `segment_ids`
    `(batch, sequence_length)`, each document one segment.

    With a `BertPreprocessor` (a pretrained checkpoint's WordPiece) both come from
    it; with a `Tokenizer` (a model trained from scratch) the segment ids are
    zeros. A wide part adds `ngram_ids` (see `TextPreprocessor`).

    Example:

    >>> import tensorflow as tf
    >>> from keras_attn.text import Tokenizer
    >>> preprocessor = BertTextPreprocessor(
    ...     Tokenizer("bert-base-uncased", sequence_length=5)
    ... )
    >>> out = preprocessor(tf.constant(["Good film."]))
    >>> out["token_ids"].numpy().tolist(), out["segment_ids"].numpy().tolist()
    ([[101, 2204, 2143, 1012, 102]], [[0, 0, 0, 0, 0]])
    """

    tokenizer_types = (BertPreprocessor, Tokenizer)

    @property
    def sequence_length(self) -> int:
        return self.tokenizer.sequence_length

    def encode(self, texts) -> dict:
        if isinstance(self.tokenizer, BertPreprocessor):
            return dict(self.tokenizer(texts))
        ids = self.tokenizer.tokenize(texts)
        # One segment a document: id 0 everywhere.
        return {"token_ids": ids, "segment_ids": tf.zeros_like(ids, tf.int32)}

    def encode_spec(self, inputs) -> dict:
        if isinstance(self.tokenizer, BertPreprocessor):
            return dict(self.tokenizer.compute_output_spec(inputs))
        ids = self.tokenizer.compute_output_spec(inputs)
        return {"token_ids": ids, "segment_ids": keras.KerasTensor(ids.shape, "int32")}


def text_preprocessor(classifier, tokenizer) -> TextPreprocessor:
    """The preprocessor of `classifier` with `tokenizer` (a `TextPreprocessor` is
    returned as it is): the kind's class, with the `HashedNgrams` its wide part
    records (`HashedNgrams.matching(classifier.wide)`).

    Args:
        classifier: a HAN, Transformer or `BertClassifier` model.
        tokenizer: its tokenizer layer (`SentenceTokenizer`, `Tokenizer`, or a
            `BertPreprocessor`), or a `TextPreprocessor`.
    """
    if isinstance(tokenizer, TextPreprocessor):
        return tokenizer
    if isinstance(classifier, BertClassifier) or isinstance(
        tokenizer, BertPreprocessor
    ):
        kind = BertTextPreprocessor
    elif isinstance(tokenizer, SentenceTokenizer):
        kind = HANTextPreprocessor
    else:
        kind = TransformerTextPreprocessor
    return kind(tokenizer).for_classifier(classifier)
