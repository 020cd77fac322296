"""The wide part of the wide-and-deep text classifiers: a linear model over n-gram
ids (count, binary or sublinear term weights, IDF, naive-Bayes ratios).

Its ids come from raw strings through `keras_attn.text.HashedNgrams`
(`HashedNgrams.matching(layer)` gives the hashing this layer was made for) or an
`NgramVocabulary` (`lookup="vocabulary"`).
"""

from __future__ import annotations

import numpy as np

from keras_attn._deprecation import resolve, warn_deprecated
from keras_attn._validation import (
    check_bool,
    check_choice,
    check_finite,
    check_positive_int,
    check_positive_int_list,
    check_rate,
)
from keras_attn.backend import Layer, keras, register, tf

__all__ = ["COMBINERS", "TERM_WEIGHTINGS", "NgramLinear"]

COMBINERS = ("sum", "mean", "sqrtn", "l2")
TERM_WEIGHTINGS = ("count", "binary", "sublinear")
#: Where a layer's ids come from: `HashedNgrams` ("hash") or an
#: `NgramVocabulary` ("vocabulary", which only its own vocabulary can rebuild).
LOOKUPS = ("hash", "vocabulary")


@register
class NgramLinear(Layer):
    """The wide part: a linear model over n-gram ids, one logit per class.

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
    those of `TfidfVectorizer(sublinear_tf=True)` over the n-grams, and the
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
    (`ngram_widths`, `max_ngrams`, `lowercase`, `lookup`), so
    `keras_attn.text.HashedNgrams.matching(layer)` rebuilds the hashing layer that
    feeds it; with `lookup="vocabulary"` its ids come from an `NgramVocabulary`
    (`num_buckets` its size), which only that vocabulary gives, so `matching`
    refuses and the classifier's preprocessor holds the layer.

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
        lookup: str. "hash" (ids from `HashedNgrams`) or "vocabulary" (from an
            `NgramVocabulary` of `num_buckets` n-grams). Defaults to "hash".

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
        lookup: str = "hash",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_choice("lookup", lookup, LOOKUPS)
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
        self.lookup = lookup
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)

    def hashing_config(self) -> dict:
        """How this layer's ids are made: `HashedNgrams.matching(layer)` gives
        them from raw strings (with `lookup="hash"`)."""
        return {
            "num_buckets": self.num_buckets,
            "ngram_widths": list(self.ngram_widths),
            "max_ngrams": self.max_ngrams,
            "lowercase": self.lowercase,
            "lookup": self.lookup,
        }

    def hasher(self, name=None):
        """Deprecated: `keras_attn.text.HashedNgrams.matching(layer)`."""
        warn_deprecated(
            "`NgramLinear.hasher()`", "`keras_attn.text.HashedNgrams.matching(layer)`"
        )
        return resolve("keras_attn.text.ngrams:HashedNgrams").matching(self, name)

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
            "lookup": self.lookup,
            "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
        }
        return {**super().get_config(), **config}
