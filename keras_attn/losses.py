"""Ranking losses: pairwise (hinge, logistic) and listwise (softmax, ListMLE).

Each is a `keras.losses.Loss` under both Keras generations, for `model.compile(
loss=...)` or a direct call. `y_true` holds graded relevance and `y_pred` the
model's scores, both `(batch, list_size)` (or one list `(list_size,)`). Lists of
different lengths are padded: a negative relevance (e.g. -1) marks a padded item,
or `y_true={"labels": ..., "mask": ...}` passes a boolean mask (True at real
items). A padded item takes part in nothing; a list without a real item, or
without two items of different relevance, has loss 0 (never NaN). Each call
returns one loss per list, which Keras reduces over the batch (by default the
mean, `sample_weight` weighting the lists).

The losses are computed in float32 whatever the scores' dtype (a mixed-precision
model's float16 scores are cast up first).
"""

from __future__ import annotations

from keras_attn._ranking import list_inputs, rank_by, sorted_by
from keras_attn._validation import check_finite
from keras_attn.backend import keras, register, tf

__all__ = [
    "ListMLELoss",
    "ListwiseSoftmaxLoss",
    "PairwiseHingeLoss",
    "PairwiseLogisticLoss",
]


class _RankingLoss(keras.losses.Loss):
    """The common part: `y_true`/`y_pred` read as lists (`list_inputs`), then the
    subclass's per-list loss `(batch,)`."""

    def call(self, y_true, y_pred):
        labels, scores, real = list_inputs(y_true, y_pred)
        return self.list_loss(labels, scores, real)

    def list_loss(self, labels, scores, real):
        raise NotImplementedError


class _PairwiseLoss(_RankingLoss):
    """Mean over a list's ordered pairs `(i, j)` with `y_i > y_j` (both real) of
    `pair_loss(s_i - s_j)`; a list without such a pair gives 0."""

    def list_loss(self, labels, scores, real):
        # (batch, list_size, list_size): entry [b, i, j] is the pair (i, j).
        difference = scores[:, :, tf.newaxis] - scores[:, tf.newaxis, :]
        pairs = (labels[:, :, tf.newaxis] > labels[:, tf.newaxis, :]) & (
            real[:, :, tf.newaxis] & real[:, tf.newaxis, :]
        )
        pairs = tf.cast(pairs, tf.float32)
        total = tf.reduce_sum(self.pair_loss(difference) * pairs, axis=[1, 2])
        return tf.math.divide_no_nan(total, tf.reduce_sum(pairs, axis=[1, 2]))


@register
class PairwiseHingeLoss(_PairwiseLoss):
    """Pairwise hinge loss: each better-graded item should outscore a worse one by
    a margin.

    Per list: the mean over the pairs `(i, j)` of real items with `y_i > y_j` of
    `max(0, margin - (s_i - s_j))` (RankSVM; Joachims, KDD 2002). 0 for a list
    without such a pair.

    Args:
        margin: float. Defaults to 1.0.
        reduction, name: as any Keras loss's.

    Example:

    >>> import numpy as np
    >>> loss = PairwiseHingeLoss()
    >>> y_true = np.array([[2.0, 0.0, 1.0, -1.0]])  # -1: a padded item
    >>> y_pred = np.array([[1.0, 0.5, 0.0, 9.0]])
    >>> round(float(loss(y_true, y_pred)), 4)  # pairs (0,1) (0,2) (2,1): .5, 0, 1.5
    0.6667
    """

    def __init__(self, margin: float = 1.0, name="pairwise_hinge_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.margin = check_finite("margin", margin, minimum=0)

    def pair_loss(self, difference):
        return tf.nn.relu(self.margin - difference)

    def get_config(self):
        return {**super().get_config(), "margin": self.margin}


@register
class PairwiseLogisticLoss(_PairwiseLoss):
    """Pairwise logistic loss (RankNet): the log-likelihood of each pair's order.

    Per list: the mean over the pairs `(i, j)` of real items with `y_i > y_j` of
    `log(1 + exp(-(s_i - s_j)))` (Burges et al., ICML 2005). 0 for a list without
    such a pair.

    Args:
        reduction, name: as any Keras loss's.

    Example:

    >>> import numpy as np
    >>> loss = PairwiseLogisticLoss()
    >>> round(float(loss(np.array([[1.0, 0.0]]), np.array([[0.0, 0.0]]))), 4)
    0.6931
    """

    def __init__(self, name="pairwise_logistic_loss", **kwargs):
        super().__init__(name=name, **kwargs)

    def pair_loss(self, difference):
        return tf.nn.softplus(-difference)


@register
class ListwiseSoftmaxLoss(_RankingLoss):
    """Listwise softmax cross-entropy: the relevance, normalized, as the target of a
    softmax over the list's scores.

    Per list: `-sum_i (y_i / sum_j y_j) log softmax(s)_i`, the softmax over the real
    items (ListNet's top-one probabilities, Cao et al., ICML 2007; TF-Ranking's
    `SoftmaxLoss`). 0 for a list whose relevance sums to 0.

    Args:
        reduction, name: as any Keras loss's.

    Example:

    >>> import numpy as np
    >>> loss = ListwiseSoftmaxLoss()
    >>> round(float(loss(np.array([[1.0, 0.0, -1.0]]), np.array([[0.0, 0.0, 5.0]]))), 4)
    0.6931
    """

    def __init__(self, name="listwise_softmax_loss", **kwargs):
        super().__init__(name=name, **kwargs)

    def list_loss(self, labels, scores, real):
        log_softmax = tf.nn.log_softmax(tf.where(real, scores, -1e9), axis=-1)
        target = tf.math.divide_no_nan(
            labels, tf.reduce_sum(labels, axis=-1, keepdims=True)
        )
        return -tf.reduce_sum(target * tf.where(real, log_softmax, 0.0), axis=-1)


@register
class ListMLELoss(_RankingLoss):
    """ListMLE: the negative log-likelihood of the list's order by relevance under
    the Plackett-Luce model of the scores.

    Per list, with the real items sorted by relevance, best first (`pi`; equal
    grades keep their list order): `sum_i [log sum_{j >= i} exp(s_pi(j)) -
    s_pi(i)]` (Xia et al., ICML 2008). 0 for a list without a real item.

    Args:
        reduction, name: as any Keras loss's.

    Example:

    >>> import numpy as np
    >>> loss = ListMLELoss()
    >>> round(float(loss(np.array([[1.0, 0.0]]), np.array([[0.0, 0.0]]))), 4)
    0.6931
    """

    def __init__(self, name="list_mle_loss", **kwargs):
        super().__init__(name=name, **kwargs)

    def list_loss(self, labels, scores, real):
        # Real items first, by relevance; a padded item's score is far below any
        # real one's, so it adds nothing to the sums over the items after a real one.
        order = rank_by(labels, real)
        scores, real = sorted_by(order, tf.where(real, scores, -1e9), real)
        remaining = tf.math.cumulative_logsumexp(scores, axis=-1, reverse=True)
        terms = tf.where(real, remaining - scores, 0.0)
        return tf.reduce_sum(terms, axis=-1)
