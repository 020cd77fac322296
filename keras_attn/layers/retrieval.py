"""Retrieval: the in-batch softmax task of a two-tower model, and exact top-k.

`RetrievalTask` is the loss of a two-tower retriever in Keras alone (no TensorFlow
Recommenders): each query's own candidate against the batch's other candidates,
with the sampling-probability (logQ) correction, accidental hits removed,
optional hard-negative mining and a temperature. `BruteForceTopK` finds each
query's k best candidates by dot product, exactly, in blocks of candidates (so
memory stays `(batch, k + block_size)`), in TensorFlow ops that a SavedModel
serves without custom ops; `streaming_top_k` does the same over a stream of
candidate batches (a `tf.data.Dataset` of a corpus too big to hold at once).
"""

from __future__ import annotations

from keras_attn._validation import (
    check_bool,
    check_finite,
    check_positive_int,
    check_rank,
    static_shape,
)
from keras_attn.backend import Layer, register, tf

__all__ = ["BruteForceTopK", "RetrievalTask", "streaming_top_k"]

#: Logit of a candidate taken out of the softmax (TFRS uses the same value): far
#: below any real logit, and still finite after a temperature or logQ shift.
_REMOVED = tf.float32.min / 100.0


@register
class RetrievalTask(Layer):
    """The in-batch softmax loss of a two-tower retrieval model.

    For a batch of `n` (query, candidate) pairs, the logits are every query's dot
    products with every candidate, `(n, n)`, and each row is a softmax
    classification of its own candidate (the diagonal) against the others, the
    batch's other candidates serving as sampled negatives (Yi et al., "Sampling-
    Bias-Corrected Neural Modeling for Large Corpus Item Recommendations", RecSys
    2019). In order:

    - `temperature`: logits divided by it;
    - `candidate_sampling_probability` `(n,)` (each candidate's share of the
      training targets): each candidate's logit minus its log (logQ), since a
      popular item is sampled as a negative more often than the softmax assumes;
    - `remove_accidental_hits` with `candidate_ids` `(n,)`: another row's candidate
      with the same id as a query's own is not a negative of that query;
    - `num_hard_negatives`: only the positive and the that many highest-scoring
      negatives of each row enter its softmax.

    The loss is the mean over the queries of their cross-entropy (`sample_weight`
    `(n,)` weighting them), computed in float32; TFRS's `tasks.Retrieval` sums
    instead (`reduction="sum"` does the same).

    Args:
        temperature: float or None. Defaults to None (1).
        remove_accidental_hits: bool. Defaults to False (True needs
            `candidate_ids` at call).
        num_hard_negatives: int or None. Defaults to None (every negative).
        reduction: str. "mean" or "sum" over the queries. Defaults to "mean".

    Call arguments:
        query_embeddings: `(n, dim)`.
        candidate_embeddings: `(n, dim)`, row i the positive of query i.
        sample_weight: optional `(n,)`.
        candidate_sampling_probability: optional `(n,)`.
        candidate_ids: optional `(n,)` ids (ints or strings).

    Returns:
        The scalar loss.

    Example:

    >>> import numpy as np
    >>> task = RetrievalTask()
    >>> queries = np.eye(3, 4, dtype="float32")
    >>> round(float(task(queries, queries)), 4)  # log(1 + 2 / e)
    0.5514
    """

    def __init__(
        self,
        temperature: float | None = None,
        remove_accidental_hits: bool = False,
        num_hard_negatives: int | None = None,
        reduction: str = "mean",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.temperature = check_finite(
            "temperature",
            temperature,
            minimum=0,
            exclusive_minimum=True,
            allow_none=True,
        )
        self.remove_accidental_hits = check_bool(
            "remove_accidental_hits", remove_accidental_hits
        )
        self.num_hard_negatives = check_positive_int(
            "num_hard_negatives", num_hard_negatives, allow_none=True
        )
        if reduction not in ("mean", "sum"):
            raise ValueError(
                f"`reduction` must be one of ['mean', 'sum']. Received: "
                f"reduction={reduction!r}"
            )
        self.reduction = reduction

    def logits(
        self,
        query_embeddings,
        candidate_embeddings,
        candidate_sampling_probability=None,
        candidate_ids=None,
    ):
        """The corrected logits `(n, n)` (float32) before hard-negative mining: the
        diagonal holds each query's positive."""
        query = tf.cast(query_embeddings, tf.float32)
        candidates = tf.cast(candidate_embeddings, tf.float32)
        check_rank("query_embeddings", query, 2, "(batch, dim)")
        check_rank("candidate_embeddings", candidates, 2, "(batch, dim)")
        logits = tf.matmul(query, candidates, transpose_b=True)
        if self.temperature is not None:
            logits /= self.temperature
        if candidate_sampling_probability is not None:
            probability = tf.cast(candidate_sampling_probability, tf.float32)
            # Clipped: an item absent from the counts must not give log(0).
            logits -= tf.math.log(tf.clip_by_value(probability, 1e-6, 1.0))[
                tf.newaxis, :
            ]
        if self.remove_accidental_hits:
            if candidate_ids is None:
                raise ValueError(
                    "`candidate_ids` must be given when remove_accidental_hits=True"
                )
            ids = tf.reshape(candidate_ids, [-1])
            same = tf.equal(ids[:, tf.newaxis], ids[tf.newaxis, :])
            own = tf.eye(tf.shape(logits)[0], tf.shape(logits)[1], dtype=tf.bool)
            logits = tf.where(same & ~own, _REMOVED, logits)
        return logits

    def call(
        self,
        query_embeddings,
        candidate_embeddings,
        sample_weight=None,
        candidate_sampling_probability=None,
        candidate_ids=None,
    ):
        logits = self.logits(
            query_embeddings,
            candidate_embeddings,
            candidate_sampling_probability,
            candidate_ids,
        )
        rows = tf.shape(logits)[0]
        own = tf.eye(rows, tf.shape(logits)[1], dtype=tf.bool)
        if self.num_hard_negatives is not None:
            positive = tf.boolean_mask(logits, own)[:, tf.newaxis]  # (n, 1)
            negatives = tf.where(own, _REMOVED, logits)
            kept = tf.minimum(self.num_hard_negatives, tf.shape(logits)[1] - 1)
            hardest = tf.math.top_k(negatives, k=kept).values
            logits = tf.concat([positive, hardest], axis=1)
            labels = tf.one_hot(tf.zeros([rows], tf.int32), tf.shape(logits)[1])
        else:
            labels = tf.cast(own, tf.float32)
        losses = tf.nn.softmax_cross_entropy_with_logits(labels, logits)  # (n,)
        if sample_weight is not None:
            losses *= tf.reshape(tf.cast(sample_weight, tf.float32), [-1])
        total = tf.reduce_sum(losses)
        if self.reduction == "sum":
            return total
        return total / tf.cast(rows, tf.float32)

    def compute_output_shape(self, *args, **kwargs):
        return ()

    def get_config(self):
        config = {
            "temperature": self.temperature,
            "remove_accidental_hits": self.remove_accidental_hits,
            "num_hard_negatives": self.num_hard_negatives,
            "reduction": self.reduction,
        }
        return {**super().get_config(), **config}


def _merge_top_k(best, scores, ids, k):
    """The k best of the running `best` `(scores, ids)`, each `(batch, <= k)`, and
    a block's `scores` `(batch, block)` with their `ids` `(block,)`."""
    ids = tf.broadcast_to(ids[tf.newaxis], tf.shape(scores))
    if best is not None:
        # The earlier blocks first: equal scores keep the earlier candidate.
        scores = tf.concat([best[0], scores], axis=1)
        ids = tf.concat([best[1], ids], axis=1)
    width = scores.shape[1]
    # A static k where the width is known (a while loop keeps its shapes).
    k = min(k, width) if width is not None else tf.minimum(k, tf.shape(scores)[1])
    top = tf.math.top_k(scores, k=k)
    return top.values, tf.gather(ids, top.indices, batch_dims=1)


@register
class BruteForceTopK(Layer):
    """Each query's `k` highest-scoring candidates by dot product, exactly.

    The candidates are scored `block_size` at a time and merged into a running
    top-k, so memory stays `(batch, k + block_size)` however many candidates there
    are; one block when `block_size` is None. Equal scores rank the lower
    candidate index first. `exclude` leaves given candidates out per query (e.g.
    the items a user has seen). TensorFlow ops only: the layer exports in a
    SavedModel that TensorFlow Serving runs without custom ops, and compiles with
    XLA.

    Args:
        k: int. Candidates returned per query. Defaults to 10.
        block_size: int or None. Candidates scored per step. Defaults to None.

    Call arguments:
        queries: `(batch, dim)`.
        candidates: `(num_candidates, dim)`.
        exclude: optional int `(batch, n)`: candidate rows each query must not
            get (an index outside the candidates, e.g. -1, excludes nothing).

    Returns:
        `(scores, indices)`, each `(batch, k)`, best first; `indices` are rows of
        `candidates` (int32). A place with no candidate left (fewer than k
        candidates, or all the rest excluded) has score -inf.

    Example:

    >>> import numpy as np
    >>> top = BruteForceTopK(k=2, block_size=2)
    >>> scores, indices = top(np.array([[1.0, 0.0]]),
    ...                       np.array([[0.1, 0], [0.9, 0], [0.5, 0], [0.7, 0]]),
    ...                       exclude=np.array([[1, -1]]))
    >>> indices.numpy().tolist()
    [[3, 2]]
    """

    def __init__(self, k: int = 10, block_size: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.k = check_positive_int("k", k)
        self.block_size = check_positive_int("block_size", block_size, allow_none=True)

    def build(self, queries_shape, candidates_shape=None):
        self.built = True

    def call(self, queries, candidates, exclude=None):
        queries, candidates = self.cast_inputs(queries, candidates)
        check_rank("queries", queries, 2, "(batch, dim)")
        check_rank("candidates", candidates, 2, "(num_candidates, dim)")
        if exclude is not None:
            exclude = tf.cast(exclude, tf.int32)
            check_rank("exclude", exclude, 2, "(batch, n)")
        batch, total = tf.shape(queries)[0], tf.shape(candidates)[0]
        none = tf.cast(float("-inf"), queries.dtype)
        # The running top-k starts from k empty places (score -inf).
        best = (tf.fill([batch, self.k], none), tf.zeros([batch, self.k], tf.int32))

        def merge(best, block, ids):
            scores = tf.matmul(queries, block, transpose_b=True)  # (batch, block)
            left_out = (ids >= total)[tf.newaxis]  # padding of the last block
            if exclude is not None:
                hits = tf.equal(exclude[:, tf.newaxis, :], ids[tf.newaxis, :, None])
                left_out = left_out | tf.reduce_any(hits, axis=-1)
            scores = tf.where(left_out, none, scores)
            return _merge_top_k(best, scores, ids, self.k)

        if self.block_size is None:
            return merge(best, candidates, tf.range(total))
        size = self.block_size
        # Padded to whole blocks: XLA wants static slice sizes.
        blocks = (total + size - 1) // size
        padded = tf.pad(candidates, [[0, blocks * size - total], [0, 0]])

        def step(i, *best):
            block = tf.slice(padded, [i * size, 0], [size, -1])
            return (i + 1, *merge(best, block, i * size + tf.range(size)))

        _, scores, indices = tf.while_loop(
            lambda i, *_: i < blocks, step, (tf.constant(0), *best)
        )
        return scores, indices

    def compute_output_shape(self, queries_shape, candidates_shape=None):
        batch = static_shape(queries_shape)[0]
        return (batch, self.k), (batch, self.k)

    def get_config(self):
        return {**super().get_config(), "k": self.k, "block_size": self.block_size}


def streaming_top_k(queries, candidate_batches, k: int = 10):
    """Each query's `k` best candidates over a stream of candidate batches.

    For a corpus that is not held at once: `candidate_batches` yields
    `(identifiers, embeddings)` pairs (e.g. a batched `tf.data.Dataset` of ids and
    candidate-tower outputs); each batch is scored and merged into a running top-k,
    so memory stays `(num_queries, k + batch)`. Equal scores keep the earlier
    candidate.

    Args:
        queries: `(num_queries, dim)`.
        candidate_batches: iterable of `(identifiers (b,), embeddings (b, dim))`.
        k: int. Defaults to 10.

    Returns:
        `(scores, identifiers)`, each `(num_queries, k)`, best first.

    Example:

    >>> import numpy as np
    >>> batches = [(np.array([10, 11]), np.array([[0.1, 0.0], [0.9, 0.0]])),
    ...            (np.array([12]), np.array([[0.5, 0.0]]))]
    >>> scores, ids = streaming_top_k(np.array([[1.0, 0.0]]), batches, k=2)
    >>> ids.numpy().tolist()
    [[11, 12]]
    """
    check_positive_int("k", k)
    queries = tf.convert_to_tensor(queries)
    best, seen = None, 0
    for ids, embeddings in candidate_batches:
        embeddings = tf.cast(embeddings, queries.dtype)
        scores = tf.matmul(queries, embeddings, transpose_b=True)
        best = _merge_top_k(best, scores, tf.convert_to_tensor(ids), k)
        seen += int(scores.shape[1])
    if seen < k:
        raise ValueError(
            f"`candidate_batches` must hold at least k={k} candidates. Received: "
            f"{seen} candidates"
        )
    return best
