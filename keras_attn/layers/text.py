"""The text models' glue layers: token masks, the segment ids of one segment, masked
sequence pooling, a layer per sentence, the predicted label, the AoA reader's
candidate sum, and the wide (linear, hashed n-gram) part of the wide-and-deep
classifiers.

They are importable from this module (`keras_attn.layers.text`), not from
`keras_attn.layers`, whose `__all__` lists the attention layers themselves.
`HashedNgrams` splits text as the tokenizers do (`keras_attn.text`).
"""

from __future__ import annotations

import numpy as np

from keras_attn._validation import (
    check_bool,
    check_choice,
    check_finite,
    check_positive_int,
    check_positive_int_list,
    check_rate,
)
from keras_attn.backend import Layer, as_bool_mask, keras, register, tf
from keras_attn.text.tokenizers import split_sentences, split_words

__all__ = [
    "COMBINERS",
    "POOLINGS",
    "TERM_WEIGHTINGS",
    "CandidateSum",
    "HashedNgrams",
    "NgramLinear",
    "PerSentence",
    "PredictedLabel",
    "SegmentIds",
    "SequencePooling",
    "TokenMask",
]

POOLINGS = ("cls", "mean", "max", "flatten")
COMBINERS = ("sum", "mean", "sqrtn", "l2")
TERM_WEIGHTINGS = ("count", "binary", "sublinear")


@register
class SequencePooling(Layer):
    """Pools `(batch, seq_len, dim)` into one vector per sequence, honouring the mask.

    `"cls"` takes the first position; `"mean"` averages the real positions (zero for
    a sequence without any); `"max"` takes the maximum over real positions (zero for
    none); `"flatten"` zeroes padded positions and reshapes to `(batch, seq_len·dim)`
    (needs a static `seq_len`).

    Args:
        mode: str. One of "cls", "mean", "max", "flatten". Defaults to "mean".

    Call arguments:
        inputs: `(batch, seq_len, dim)`.
        mask: optional boolean `(batch, seq_len)`, True at real positions.

    Returns:
        `(batch, dim)`, or `(batch, seq_len·dim)` for "flatten".

    Example:

    >>> import numpy as np
    >>> x = np.arange(12, dtype="float32").reshape(1, 3, 4)
    >>> SequencePooling("mean")(x, mask=np.array([[True, True, False]])).numpy()
    array([[2., 3., 4., 5.]], dtype=float32)
    """

    def __init__(self, mode: str = "mean", **kwargs):
        super().__init__(**kwargs)
        check_choice("mode", mode, POOLINGS)
        self.mode = mode
        self.supports_masking = True

    def call(self, inputs, mask=None):
        inputs = self.cast_inputs(inputs)
        if self.mode == "cls":
            return inputs[:, 0]
        if mask is None:
            mask = tf.ones(tf.shape(inputs)[:2], tf.bool)
        mask = as_bool_mask(mask)
        weights = tf.cast(mask, inputs.dtype)[..., tf.newaxis]  # (batch, seq_len, 1)
        if self.mode == "mean":
            total = tf.reduce_sum(inputs * weights, axis=1)
            return tf.math.divide_no_nan(total, tf.reduce_sum(weights, axis=1))
        if self.mode == "max":
            lowest = tf.fill(tf.shape(inputs), tf.as_dtype(inputs.dtype).min)
            best = tf.reduce_max(tf.where(mask[..., tf.newaxis], inputs, lowest), 1)
            return tf.where(tf.reduce_any(mask, axis=1, keepdims=True), best, 0.0)
        length, dim = inputs.shape[1], inputs.shape[2]
        if length is None or dim is None:
            raise ValueError(
                "`mode='flatten'` needs static seq_len and dim. "
                f"Received: inputs.shape={tuple(inputs.shape)}"
            )
        return tf.reshape(inputs * weights, [-1, length * dim])

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        if self.mode == "flatten":
            return (input_shape[0], input_shape[1] * input_shape[2])
        return (input_shape[0], input_shape[2])

    def get_config(self):
        return {**super().get_config(), "mode": self.mode}


@register
class PredictedLabel(Layer):
    """The most probable class: its index, or its name when `class_names` is given.

    Args:
        class_names: optional list of str, the name of each class index. Defaults to
            None (int64 indices).

    Call arguments:
        inputs: `(batch, num_classes)` probabilities or logits.

    Returns:
        `(batch,)` int64 indices, or strings with `class_names`.

    Example:

    >>> import numpy as np
    >>> PredictedLabel(["neg", "pos"])(np.array([[0.2, 0.8]], "float32")).numpy()
    array([b'pos'], dtype=object)
    """

    def __init__(self, class_names: list[str] | None = None, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self.class_names = (
            None if class_names is None else [str(c) for c in class_names]
        )

    def call(self, inputs):
        index = tf.argmax(inputs, axis=-1, output_type=tf.int64)
        if self.class_names is None:
            return index
        return tf.gather(tf.constant(self.class_names), index)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_spec(self, inputs):
        dtype = "int64" if self.class_names is None else "string"
        return keras.KerasTensor(inputs.shape[:-1], dtype)

    def get_config(self):
        return {**super().get_config(), "class_names": self.class_names}


@register
class TokenMask(Layer):
    """The boolean mask of token ids: True where `ids != 0` (0 is padding).

    With `reduce_last=True` it marks the rows along the last axis holding at least
    one real token, e.g. the real sentences of `(batch, sentences, words)` ids.

    Args:
        reduce_last: bool. Reduce the last axis with "any". Defaults to False.

    Call arguments:
        inputs: integer ids `(batch, ...)`.

    Returns:
        boolean `(batch, ...)`, one axis fewer with `reduce_last`.

    Example:

    >>> import numpy as np
    >>> TokenMask(reduce_last=True)(np.array([[[3, 0], [0, 0]]])).numpy()
    array([[ True, False]])
    """

    def __init__(self, reduce_last: bool = False, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self.reduce_last = check_bool("reduce_last", reduce_last)

    def call(self, inputs):
        mask = tf.not_equal(inputs, tf.zeros([], inputs.dtype))
        return tf.reduce_any(mask, axis=-1) if self.reduce_last else mask

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_spec(self, inputs):
        shape = inputs.shape[:-1] if self.reduce_last else inputs.shape
        return keras.KerasTensor(shape, "bool")

    def get_config(self):
        return {**super().get_config(), "reduce_last": self.reduce_last}


@register
class SegmentIds(Layer):
    """The segment ids of single-segment inputs: int32 zeros shaped like the ids.

    A `BertClassifier` takes `{"token_ids", "segment_ids"}`; a document is one
    segment (id 0), so its raw-string serving model makes the segment ids from the
    token ids inside the graph with this layer.

    Call arguments:
        inputs: integer token ids `(batch, sequence_length)`.

    Returns:
        int32 zeros `(batch, sequence_length)`.

    Example:

    >>> import numpy as np
    >>> SegmentIds()(np.array([[101, 7592, 102, 0]], "int32")).numpy()
    array([[0, 0, 0, 0]], dtype=int32)
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)

    def call(self, inputs):
        return tf.zeros_like(inputs, dtype=tf.int32)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(inputs.shape, "int32")


@register
class PerSentence(Layer):
    """Applies a sequence layer to every sentence of `(batch, sentences, words, dim)`.

    Folds the sentence axis into the batch, calls `layer` on
    `(batch·sentences, words, dim)` with the matching word mask, and unfolds the
    result. Unlike `TimeDistributed` it always passes the mask on, in both Keras
    generations.

    Args:
        layer: a Keras layer taking `(batch, words, dim)` and a `mask`, such as
            `Bidirectional(GRU(..., return_sequences=True))`.

    Call arguments:
        inputs: `(batch, sentences, words, dim)`.
        mask: optional boolean `(batch, sentences, words)`, True at real words.
        training: bool, passed to `layer`.

    Returns:
        `(batch, sentences, words, out_dim)`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.backend import keras
    >>> gru = keras.layers.GRU(4, return_sequences=True)
    >>> PerSentence(gru)(np.ones((2, 3, 5, 8), "float32")).shape
    TensorShape([2, 3, 5, 4])
    """

    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        if isinstance(layer, dict):
            layer = keras.layers.deserialize(layer)
        self.layer = layer
        self.supports_masking = True

    def build(self, inputs_shape):
        shape = list(inputs_shape)
        if len(shape) != 4 or shape[-1] is None:
            raise ValueError(
                "`inputs` must have shape (batch, sentences, words, dim) with a known "
                f"dim. Received: inputs.shape={tuple(shape)}"
            )
        if not self.layer.built:
            self.layer.build((None, shape[2], shape[3]))
        self.built = True

    def call(self, inputs, mask=None, training=None):
        shape = tf.shape(inputs)
        words, dim = inputs.shape[2], inputs.shape[3]
        flat = tf.reshape(inputs, [-1, shape[2], dim])
        if words is not None:
            flat = tf.ensure_shape(flat, [None, words, dim])
        flat_mask = None
        if mask is not None:
            flat_mask = tf.reshape(as_bool_mask(mask), [-1, shape[2]])
        out = self.layer(flat, mask=flat_mask, training=training)
        # (batch, sentences, words, out_dim)
        return tf.reshape(out, tf.concat([shape[:3], tf.shape(out)[2:]], axis=0))

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        return {**super().get_config(), "layer": keras.layers.serialize(self.layer)}


@register
class CandidateSum(Layer):
    """Sums per-position document scores over each candidate word's occurrences.

    `P(c) = Σ_{i : document[i] = c} s_i`, the attention-sum step of the AoA reader
    (Cui et al. 2017). Padding candidates (id 0) get 0.

    Call arguments:
        scores: `(batch, doc_len)` float scores (e.g. `AttentionOverAttention`'s).
        document_ids: int `(batch, doc_len)`.
        candidate_ids: int `(batch, candidates)`.

    Returns:
        `(batch, candidates)`.

    Example:

    >>> import numpy as np
    >>> s = np.array([[0.1, 0.2, 0.3, 0.4]], "float32")
    >>> CandidateSum()(s, np.array([[5, 6, 5, 7]]), np.array([[5, 7, 0]])).numpy()
    array([[0.4, 0.4, 0. ]], dtype=float32)
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def build(self, scores_shape, document_ids_shape, candidate_ids_shape):
        self.built = True

    def call(self, scores, document_ids, candidate_ids):
        scores = self.cast_inputs(scores)
        document_ids = tf.cast(document_ids, tf.int32)
        candidate_ids = tf.cast(candidate_ids, tf.int32)
        # (batch, candidates, doc_len): where each candidate occurs.
        hits = tf.equal(candidate_ids[:, :, tf.newaxis], document_ids[:, tf.newaxis])
        hits &= tf.not_equal(candidate_ids, 0)[:, :, tf.newaxis]
        return tf.einsum("bcd,bd->bc", tf.cast(hits, scores.dtype), scores)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_spec(self, scores, document_ids, candidate_ids):
        return keras.KerasTensor(
            (scores.shape[0], candidate_ids.shape[1]), self.compute_dtype
        )


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
class NgramLinear(Layer):
    """The wide part: a linear model over hashed n-gram ids, one logit per class.

    `logits = scale · Σ_g v_g W[g] / norm + b` over the n-grams `g` of a document
    (ids `!= 0`), with `W` of shape `(num_buckets + 1, units)` starting at zero (a
    linear model's usual start). The weight `v_g` of an n-gram is set by
    `term_weighting` and `idf`:

    - `term_weighting`: "count" (every occurrence counts once, so `v_g` is the
      n-gram's count), "binary" (each distinct n-gram once) or "sublinear"
      (`1 + log count`, scikit-learn's `sublinear_tf`);
    - `idf=True` multiplies by the n-gram's inverse document frequency, which
      `adapt(ngram_ids)` computes from the training documents as scikit-learn's
      smoothed IDF, `ln((1 + N) / (1 + df)) + 1`; buckets seen in fewer than
      `min_df` documents get 0 (they are left out). Until `adapt`, every IDF is 1.
      The IDF vector is a non-trainable weight: saved, exported and served with
      the model.

    With `nb_ratio=True` the table is used as `W ⊙ R`, with `R[g, k]` the naive-
    Bayes log-count ratio of n-gram `g` for class `k` against the others, which
    `adapt(ngram_ids, labels)` computes from the training documents' binary
    n-gram counts with add-`nb_alpha` smoothing (`R = log((p_k / |p_k|₁) / (q_k /
    |q_k|₁))`, p_k: documents of class k holding g, q_k: the others): NBSVM's
    feature scaling (Wang & Manning, ACL 2012), which helps linear models most on
    sentiment.

    `norm` comes from `combiner`: "sum" (1), "mean" (`Σ v_g`), "sqrtn"
    (`sqrt(Σ v_g)`: the L2 norm of binary weights) or "l2" (`sqrt(Σ v_g²)`: a
    TF-IDF vector L2-normalized, as `TfidfVectorizer` gives it). With
    `term_weighting="sublinear"`, `idf=True` and `combiner="l2"` the features are
    those of `TfidfVectorizer(sublinear_tf=True)` over the hashed n-grams, and the
    layer is a logistic regression on them (`fit_text_classifier` fits it so,
    alone, before the deep part). Distinct n-grams are found by sorting each row:
    no Python loop, static shapes, XLA-compatible.

    `b` exists with `use_bias=True` (a fully padded row then gives `b`, else
    zeros). With `dropout`, each distinct n-gram (each occurrence, for "count"
    with another combiner than "l2") is dropped with that probability while
    training. The table is used as
    `scale · W`: Adam's steps are about the learning rate in `W`, so the wide part
    learns `scale` times faster than a deep part trained with it
    (benchmarks/RESULTS.md). It also records the hashing of its ids
    (`ngram_widths`, `max_ngrams`, `lowercase`), so `hasher()` rebuilds the
    `HashedNgrams` layer that feeds it: the serving model uses that.

    Args:
        units: int. Number of outputs (classes).
        num_buckets: int. As in `HashedNgrams`. Defaults to 2**18.
        combiner: str. "sum", "mean", "sqrtn" or "l2". Defaults to "sqrtn".
        dropout: float in [0, 1). N-gram dropout while training. Defaults to 0.
        ngram_widths, max_ngrams, lowercase: the hashing, as in `HashedNgrams`.
        scale: float > 0. Multiplier of the table (the wide part's step size).
            Defaults to 1.
        term_weighting: str. "count", "binary" or "sublinear". Defaults to
            "count".
        idf: bool. Weight n-grams by their IDF (set by `adapt`). Defaults to False.
        use_bias: bool. Add a bias per unit. Defaults to False.
        nb_ratio: bool. Scale the table by naive-Bayes log-count ratios (set by
            `adapt` with labels). Defaults to False.
        kernel_regularizer: optional regularizer of `W` (e.g. `L2(1e-6)`).

    Call arguments:
        inputs: int ids `(batch, ngrams)` from `HashedNgrams`.
        training: bool.

    Returns:
        float `(batch, units)` logits.

    Example:

    >>> import numpy as np
    >>> layer = NgramLinear(2, num_buckets=10)
    >>> layer(np.array([[3, 5, 0]], "int32")).numpy()
    array([[0., 0.]], dtype=float32)
    >>> tfidf = NgramLinear(1, num_buckets=10, term_weighting="sublinear",
    ...                     idf=True, combiner="l2")
    >>> tfidf.adapt(np.array([[3, 3, 5], [5, 0, 0]], "int32"))
    >>> tfidf.idf.numpy()[[3, 5]].round(3)  # ln(3/2) + 1, ln(3/3) + 1
    array([1.405, 1.   ], dtype=float32)
    """

    def __init__(
        self,
        units: int,
        num_buckets: int = 2**18,
        combiner: str = "sqrtn",
        dropout: float = 0.0,
        ngram_widths=(1, 2),
        max_ngrams: int = 1024,
        lowercase: bool = True,
        scale: float = 1.0,
        term_weighting: str = "count",
        idf: bool = False,
        use_bias: bool = False,
        kernel_regularizer=None,
        nb_ratio: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("units", units)
        check_finite("scale", scale, minimum=0, exclusive_minimum=True)
        check_choice("combiner", combiner, COMBINERS)
        check_choice("term_weighting", term_weighting, TERM_WEIGHTINGS)
        check_rate("dropout", dropout)
        check_positive_int("num_buckets", num_buckets)
        check_positive_int("max_ngrams", max_ngrams)
        self.units = units
        self.num_buckets = num_buckets
        self.combiner = combiner
        self.dropout = float(dropout)
        self.scale = float(scale)
        self.ngram_widths = tuple(check_positive_int_list("ngram_widths", ngram_widths))
        self.max_ngrams = max_ngrams
        self.lowercase = check_bool("lowercase", lowercase)
        self.term_weighting = term_weighting
        self.use_idf = check_bool("idf", idf)
        self.use_bias = check_bool("use_bias", use_bias)
        self.nb_ratio = check_bool("nb_ratio", nb_ratio)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)

    def hasher(self, name=None):
        """A `HashedNgrams` layer giving this layer's ids from raw strings."""
        return HashedNgrams(
            self.num_buckets,
            self.ngram_widths,
            self.max_ngrams,
            self.lowercase,
            name=name or f"{self.name}_ngrams",
        )

    def build(self, inputs_shape):
        # Row 0 (padding) exists so ids index the table directly; it is masked out.
        self.kernel = self.add_weight(
            name="kernel",
            shape=(self.num_buckets + 1, self.units),
            initializer="zeros",
            regularizer=self.kernel_regularizer,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(self.units,), initializer="zeros"
            )
        self.idf = None
        if self.use_idf:
            self.idf = self.add_weight(
                name="idf",
                shape=(self.num_buckets + 1,),
                initializer="ones",
                trainable=False,
            )
        self.ratio = None
        if self.nb_ratio:
            self.ratio = self.add_weight(
                name="ratio",
                shape=(self.num_buckets + 1, self.units),
                initializer="ones",
                trainable=False,
            )
        self.built = True

    def adapt(self, ngram_ids, labels=None, min_df: int = 1, nb_alpha: float = 1.0):
        """Sets the IDF (`idf=True`) and the naive-Bayes ratios (`nb_ratio=True`)
        of every bucket from the training documents' n-gram ids.

        Args:
            ngram_ids: int array `(documents, ngrams)` (`HashedNgrams` ids of the
                training documents; 0 is padding).
            labels: int array `(documents,)` of class indices in `[0, units)`;
                needed with `nb_ratio`.
            min_df: int. Buckets in fewer documents get IDF 0. Defaults to 1.
            nb_alpha: float > 0. Smoothing of the ratios. Defaults to 1.
        """
        if not (self.use_idf or self.nb_ratio):
            raise ValueError(
                "`adapt` sets the IDF or naive-Bayes weights of a layer made with "
                f"`idf=True` or `nb_ratio=True`. Received: idf={self.use_idf}, "
                f"nb_ratio={self.nb_ratio}"
            )
        check_positive_int("min_df", min_df)
        check_finite("nb_alpha", nb_alpha, minimum=0, exclusive_minimum=True)
        ids = np.asarray(ngram_ids)
        if ids.ndim != 2 or ids.shape[0] == 0:
            raise ValueError(
                "`ngram_ids` must be a non-empty (documents, ngrams) array. "
                f"Received: shape={ids.shape}"
            )
        if not self.built:
            self.build((None, ids.shape[1]))
        rows = np.sort(ids, axis=1)
        # Each distinct id of a row once: the document frequency of each bucket.
        first = np.ones_like(rows, bool)
        first[:, 1:] = rows[:, 1:] != rows[:, :-1]
        distinct = rows[first & (rows > 0)]
        if distinct.size and distinct.max() > self.num_buckets:
            raise ValueError(
                f"`ngram_ids` must be in [0, {self.num_buckets}] (num_buckets). "
                f"Received: max id {int(distinct.max())}"
            )
        df = np.bincount(distinct, minlength=self.num_buckets + 1)
        if self.use_idf:
            idf = np.log((1.0 + len(ids)) / (1.0 + df)) + 1.0
            idf[df < min_df] = 0.0
            idf[0] = 0.0
            self.idf.assign(idf.astype("float32"))
        if self.nb_ratio:
            self.ratio.assign(self._nb_ratios(rows, first, labels, df, nb_alpha))

    def _nb_ratios(self, rows, first, labels, df, alpha):
        """`(num_buckets + 1, units)` log-count ratios, 0 for unseen buckets."""
        if labels is None:
            raise ValueError(
                "`labels` must be given to `adapt` a layer with `nb_ratio=True`. "
                "Received: labels=None"
            )
        labels = np.asarray(labels).reshape(-1)
        if len(labels) != len(rows) or (
            labels.size and (labels.min() < 0 or labels.max() >= self.units)
        ):
            raise ValueError(
                f"`labels` must hold one class index in [0, {self.units}) per "
                f"document ({len(rows)}). Received: {len(labels)} labels in "
                f"[{labels.min() if labels.size else None}, "
                f"{labels.max() if labels.size else None}]"
            )
        seen = df > 0
        seen[0] = False
        counts = np.zeros((self.num_buckets + 1, self.units))
        real = first & (rows > 0)
        for k in range(self.units):
            ids = rows[labels == k][real[labels == k]]
            counts[:, k] = np.bincount(ids, minlength=self.num_buckets + 1)
        p = alpha + counts  # documents of class k holding each n-gram
        q = alpha + counts.sum(axis=1, keepdims=True) - counts  # the others
        p /= p[seen].sum(axis=0)
        q /= q[seen].sum(axis=0)
        ratio = np.log(p / q)
        ratio[~seen] = 0.0
        return ratio.astype("float32")

    def _ngram_weights(self, ids, training):
        """`(ids, weights)`, both `(batch, ngrams)`: the ids (sorted when
        distinct n-grams are needed) and each position's `v_g` (0 at padding and
        at repeats of a distinct n-gram)."""
        dtype = self.compute_dtype
        if self.term_weighting == "count" and self.combiner != "l2":
            # Every occurrence its own term: Σ over positions is Σ_g count_g.
            keep = tf.not_equal(ids, 0)
            if training and self.dropout:
                keep &= tf.random.uniform(tf.shape(ids)) >= self.dropout
            weights = tf.cast(keep, dtype)
        else:
            ids = tf.sort(ids, axis=-1)  # padding (0) first, equal ids side by side
            start = tf.not_equal(
                ids, tf.pad(ids[:, :-1], [[0, 0], [1, 0]], "CONSTANT", -1)
            )
            keep = start & tf.not_equal(ids, 0)  # the first of each distinct id
            if training and self.dropout:
                keep &= tf.random.uniform(tf.shape(ids)) >= self.dropout
            weights = tf.cast(keep, dtype)
            if self.term_weighting != "binary":
                # Run length of each distinct id: runs numbered along the row
                # (cumsum of the run starts), counted with one segment sum.
                run = tf.cumsum(tf.cast(start, tf.int32), axis=1)  # (batch, ngrams)
                batch, width = tf.shape(ids)[0], tf.shape(ids)[1] + 1
                segments = run + tf.range(batch)[:, tf.newaxis] * width
                counts = tf.math.unsorted_segment_sum(
                    tf.ones_like(ids, dtype), segments, batch * width
                )
                counts = tf.reshape(counts, [batch, width])
                counts = tf.gather(counts, run, batch_dims=1)  # (batch, ngrams)
                if self.term_weighting == "sublinear":
                    counts = 1.0 + tf.math.log(counts)
                weights *= counts
        if self.use_idf:
            weights *= tf.gather(tf.cast(self.idf, dtype), ids)
        return ids, weights

    def call(self, inputs, training=None):
        ids, weights = self._ngram_weights(tf.cast(inputs, tf.int32), training)
        kernel = tf.cast(self.kernel, self.compute_dtype) * self.scale
        rows = tf.gather(kernel, ids)  # (batch, ngrams, units)
        if self.ratio is not None:
            rows *= tf.gather(tf.cast(self.ratio, self.compute_dtype), ids)
        # (batch, units): Σ_g v_g W[g], then the norm of the v_g.
        total = tf.einsum("bn,bnu->bu", weights, rows)
        weights = weights[..., tf.newaxis]
        if self.combiner == "mean":
            total = tf.math.divide_no_nan(total, tf.reduce_sum(weights, axis=1))
        elif self.combiner == "sqrtn":
            total = tf.math.divide_no_nan(total, tf.sqrt(tf.reduce_sum(weights, 1)))
        elif self.combiner == "l2":
            norm = tf.sqrt(tf.reduce_sum(tf.square(weights), axis=1))
            total = tf.math.divide_no_nan(total, norm)
        if self.bias is not None:
            total += tf.cast(self.bias, self.compute_dtype)
        return total

    def compute_output_spec(self, inputs, training=None):
        return keras.KerasTensor((inputs.shape[0], self.units), self.compute_dtype)

    def get_config(self):
        config = {
            "units": self.units,
            "num_buckets": self.num_buckets,
            "combiner": self.combiner,
            "dropout": self.dropout,
            "ngram_widths": list(self.ngram_widths),
            "max_ngrams": self.max_ngrams,
            "lowercase": self.lowercase,
            "scale": self.scale,
            "term_weighting": self.term_weighting,
            "idf": self.use_idf,
            "use_bias": self.use_bias,
            "nb_ratio": self.nb_ratio,
            "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
        }
        return {**super().get_config(), **config}
