"""Ranking metrics as streaming Keras metrics: NDCG@k, MRR, MAP, recall@k,
precision@k.

`update_state(y_true, y_pred, sample_weight=None)` takes graded relevance and
scores, each `(batch, list_size)` (or one list `(list_size,)`), computes one value
per list and keeps their (weighted) mean over every batch seen, like
`keras.metrics.Mean`; `result()` is that mean. Use them in `model.compile(
metrics=[NDCG(k=10)])` or on their own, under both Keras generations.

Lists of different lengths are padded: a negative relevance (e.g. -1) marks a
padded item, or `y_true={"labels": ..., "mask": ...}` passes a boolean mask (True
at real items). Items are ranked by score, highest first, padded items last; equal
scores keep their list order (the lower index ranks higher), so a result is
deterministic. `sample_weight` weighs whole lists: a scalar or `(batch,)`.

- A list with no real item is no list: it has weight 0 and leaves the mean as it
  was (a metric that saw only such lists gives 0, never NaN).
- A list whose items are all irrelevant counts, with value 0.
- NDCG reads the grades through its gain (`2^y - 1` by default, as TF-Ranking and
  keras-rs; `y` with `gain="linear"`, as scikit-learn's `ndcg_score`); MRR, MAP,
  recall and precision read an item as relevant when its grade is at least 1 (the
  TF-Ranking and keras-rs rule).
"""

from __future__ import annotations

from keras_attn._ranking import list_inputs, rank_by, sorted_by
from keras_attn._validation import check_choice, check_positive_int, check_rank
from keras_attn.backend import keras, register, tf

__all__ = ["GAINS", "MAP", "MRR", "NDCG", "PrecisionAtK", "RecallAtK"]

#: How NDCG turns a relevance grade into a gain.
GAINS = ("exponential", "linear")


class _RankingMetric(keras.metrics.Mean):
    """The weighted mean of a per-list value over every list seen.

    A subclass computes `list_values(labels, ranked_labels, ranked_real, real)`:
    `(batch,)` values from the lists' labels in rank order (by score) over their
    first `k` places (`ranked_*`, `(batch, min(k, list_size))`) and the unsorted
    labels and real-item mask.
    """

    def __init__(self, k: int | None = None, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.k = check_positive_int("k", k, allow_none=True)

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels, scores, real = list_inputs(y_true, y_pred)
        order = rank_by(scores, real)
        if self.k is not None:
            order = order[:, : self.k]
        ranked_labels, ranked_real = sorted_by(order, labels, real)
        values = self.list_values(labels, ranked_labels, ranked_real, real)
        # A list without a real item is no list at all: weight 0.
        weights = tf.cast(tf.reduce_any(real, axis=-1), tf.float32)
        if sample_weight is not None:
            sample_weight = tf.cast(tf.convert_to_tensor(sample_weight), tf.float32)
            check_rank("sample_weight", sample_weight, (0, 1, 2), "(batch,)")
            weights *= tf.reshape(sample_weight, [-1]) * tf.ones_like(weights)
        super().update_state(values, sample_weight=weights)

    def list_values(self, labels, ranked_labels, ranked_real, real):
        raise NotImplementedError

    def get_config(self):
        return {**super().get_config(), "k": self.k}


def _relevant(labels, real):
    return tf.cast((labels >= 1.0) & real, tf.float32)


def _discounts(places):
    """`1 / log2(rank + 1)` of ranks 1..places, `(places,)`."""
    ranks = tf.range(1, places + 1, dtype=tf.float32)
    return 1.0 / (tf.math.log(ranks + 1.0) / tf.math.log(2.0))


@register
class NDCG(_RankingMetric):
    """Normalized discounted cumulative gain at k.

    Per list: `DCG@k / IDCG@k`, where `DCG@k = sum_{r=1..k} gain(y_(r)) /
    log2(r + 1)` over the items in the order of their scores and `IDCG@k` is the
    same sum in the order of their grades (the best DCG the list allows); 0 when
    the list has no gain (Jarvelin & Kekalainen, TOIS 2002).

    Args:
        k: int or None. Places counted; None counts the whole list. Defaults to
            None.
        gain: str. "exponential" (`2^y - 1`) or "linear" (`y`). Defaults to
            "exponential".
        name: str. Defaults to "ndcg" or "ndcg@k".

    Example:

    >>> import numpy as np
    >>> metric = NDCG(k=2)
    >>> metric.update_state(np.array([[0.0, 1.0, 2.0]]), np.array([[3.0, 2.0, 1.0]]))
    >>> round(float(metric.result()), 4)  # 1/log2(3) / (3 + 1/log2(3))
    0.1738
    """

    def __init__(self, k=None, gain: str = "exponential", name=None, dtype=None):
        self.gain = check_choice("gain", gain, GAINS)
        super().__init__(k, name=name or _named("ndcg", k), dtype=dtype)

    def list_values(self, labels, ranked_labels, ranked_real, real):
        places = tf.shape(ranked_labels)[-1]
        discounts = _discounts(places)
        gains = self._gains(labels) * tf.cast(real, tf.float32)
        ranked_gains = self._gains(ranked_labels) * tf.cast(ranked_real, tf.float32)
        dcg = tf.reduce_sum(ranked_gains * discounts, axis=-1)
        ideal = tf.math.top_k(gains, k=places).values
        idcg = tf.reduce_sum(ideal * discounts, axis=-1)
        return tf.math.divide_no_nan(dcg, idcg)

    def _gains(self, labels):
        if self.gain == "linear":
            return labels
        return tf.pow(2.0, labels) - 1.0

    def get_config(self):
        return {**super().get_config(), "gain": self.gain}


@register
class MRR(_RankingMetric):
    """Mean reciprocal rank: `1 / rank` of a list's first relevant item (grade >=
    1), 0 when none is among the first `k` places.

    Args:
        k: int or None. Places looked at; None looks at the whole list. Defaults to
            None.
        name: str. Defaults to "mrr" or "mrr@k".

    Example:

    >>> import numpy as np
    >>> metric = MRR()
    >>> metric.update_state(np.array([[0.0, 1.0, 0.0]]), np.array([[3.0, 2.0, 1.0]]))
    >>> float(metric.result())
    0.5
    """

    def __init__(self, k=None, name=None, dtype=None):
        super().__init__(k, name=name or _named("mrr", k), dtype=dtype)

    def list_values(self, labels, ranked_labels, ranked_real, real):
        places = tf.shape(ranked_labels)[-1]
        reciprocal = 1.0 / tf.range(1, places + 1, dtype=tf.float32)
        return tf.reduce_max(_relevant(ranked_labels, ranked_real) * reciprocal, -1)


@register
class MAP(_RankingMetric):
    """Mean average precision: per list, the precision at the place of each
    relevant item (grade >= 1) among the first `k`, summed and divided by the
    number of relevant items in the whole list (0 when it has none).

    Args:
        k: int or None. Places looked at; None looks at the whole list. Defaults to
            None.
        name: str. Defaults to "map" or "map@k".

    Example:

    >>> import numpy as np
    >>> metric = MAP()
    >>> metric.update_state(np.array([[1.0, 0.0, 1.0]]), np.array([[3.0, 2.0, 1.0]]))
    >>> round(float(metric.result()), 4)  # (1/1 + 2/3) / 2
    0.8333
    """

    def __init__(self, k=None, name=None, dtype=None):
        super().__init__(k, name=name or _named("map", k), dtype=dtype)

    def list_values(self, labels, ranked_labels, ranked_real, real):
        hits = _relevant(ranked_labels, ranked_real)
        places = tf.range(1, tf.shape(hits)[-1] + 1, dtype=tf.float32)
        precision = tf.cumsum(hits, axis=-1) / places
        total = tf.reduce_sum(_relevant(labels, real), axis=-1)
        return tf.math.divide_no_nan(tf.reduce_sum(precision * hits, -1), total)


@register
class RecallAtK(_RankingMetric):
    """Recall at k: the share of a list's relevant items (grade >= 1) found among
    its first `k` places (0 when it has none).

    Args:
        k: int. Places looked at.
        name: str. Defaults to "recall@k".

    Example:

    >>> import numpy as np
    >>> metric = RecallAtK(k=2)
    >>> metric.update_state(np.array([[1.0, 0.0, 1.0]]), np.array([[3.0, 2.0, 1.0]]))
    >>> float(metric.result())
    0.5
    """

    def __init__(self, k: int, name=None, dtype=None):
        check_positive_int("k", k)
        super().__init__(k, name=name or _named("recall", k), dtype=dtype)

    def list_values(self, labels, ranked_labels, ranked_real, real):
        found = tf.reduce_sum(_relevant(ranked_labels, ranked_real), axis=-1)
        total = tf.reduce_sum(_relevant(labels, real), axis=-1)
        return tf.math.divide_no_nan(found, total)


@register
class PrecisionAtK(_RankingMetric):
    """Precision at k: the share of relevant items (grade >= 1) among a list's first
    `k` places, or among all its items when it has fewer than `k`.

    Args:
        k: int. Places looked at.
        name: str. Defaults to "precision@k".

    Example:

    >>> import numpy as np
    >>> metric = PrecisionAtK(k=2)
    >>> metric.update_state(np.array([[1.0, 0.0, 1.0]]), np.array([[3.0, 2.0, 1.0]]))
    >>> float(metric.result())
    0.5
    """

    def __init__(self, k: int, name=None, dtype=None):
        check_positive_int("k", k)
        super().__init__(k, name=name or _named("precision", k), dtype=dtype)

    def list_values(self, labels, ranked_labels, ranked_real, real):
        found = tf.reduce_sum(_relevant(ranked_labels, ranked_real), axis=-1)
        places = tf.reduce_sum(tf.cast(ranked_real, tf.float32), axis=-1)
        return tf.math.divide_no_nan(found, places)


def _named(metric: str, k) -> str:
    return metric if k is None else f"{metric}@{k}"
