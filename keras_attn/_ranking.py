"""What the ranking losses and metrics share: lists in, padding out, rank order.

A ranking example is a list: graded relevance `y_true` and scores `y_pred`, each
`(batch, list_size)` (or one list, `(list_size,)`). Lists of different lengths are
padded, and a padded item is marked either by a negative relevance in `y_true` (the
TF-Ranking and keras-rs convention: -1) or by a boolean mask passed as
`y_true={"labels": ..., "mask": ...}` (True at real items); both can be given, an
item is real when it is real in both.
"""

from __future__ import annotations

from keras_attn._validation import check_rank
from keras_attn.backend import tf

__all__ = ["list_inputs", "rank_by", "sorted_by"]


def list_inputs(y_true, y_pred):
    """`(labels, scores, real)` of a batch of lists, float32 and boolean.

    `y_true` is a tensor of relevance grades or a dict `{"labels", "mask"}`; a
    negative grade marks padding. Rank-1 inputs are one list. Padded items get
    label 0 (so a gain or a softmax target never reads the padding value).
    """
    mask = None
    if isinstance(y_true, dict):
        if "labels" not in y_true:
            raise ValueError(
                '`y_true` given as a dict must hold "labels" (and may hold '
                f'"mask"). Received: y_true keys={sorted(y_true)}'
            )
        mask = y_true.get("mask")
        y_true = y_true["labels"]
    labels = tf.cast(tf.convert_to_tensor(y_true), tf.float32)
    scores = tf.cast(tf.convert_to_tensor(y_pred), tf.float32)
    check_rank("y_true", labels, (1, 2), "(batch, list_size) or (list_size,)")
    check_rank("y_pred", scores, (1, 2), "(batch, list_size) or (list_size,)")
    if labels.shape.rank == 1:
        labels, scores = labels[tf.newaxis], scores[tf.newaxis]
        if mask is not None:
            mask = tf.convert_to_tensor(mask)[tf.newaxis]
    if not labels.shape.is_compatible_with(scores.shape):
        raise ValueError(
            "`y_true` and `y_pred` must have the same shape (batch, list_size). "
            f"Received: y_true.shape={tuple(labels.shape)}, "
            f"y_pred.shape={tuple(scores.shape)}"
        )
    real = labels >= 0.0
    if mask is not None:
        mask = tf.convert_to_tensor(mask)
        if not mask.shape.is_compatible_with(labels.shape):
            raise ValueError(
                '`y_true["mask"]` must have the shape of the labels. Received: '
                f"mask.shape={tuple(mask.shape)}, labels.shape={tuple(labels.shape)}"
            )
        real &= tf.cast(mask, tf.bool)
    labels = tf.where(real, labels, 0.0)
    return labels, scores, real


def rank_by(keys, real):
    """The order of each list by `keys`, highest first, `(batch, list_size)` indices.

    Real items come before padded ones; equal keys keep their list order (the
    lower index first, as `tf.math.top_k` documents), so a result never depends
    on a random tie-break.
    """
    keys = tf.where(real, keys, tf.float32.min)
    return tf.math.top_k(keys, k=tf.shape(keys)[-1]).indices


def sorted_by(order, *tensors):
    """Each of `tensors` `(batch, list_size)` gathered in `order`."""
    return [tf.gather(t, order, batch_dims=1) for t in tensors]
