"""The document scores of the cloze readers: `AttentionOverAttention` (Cui et al.
2017) and the Attention Sum Reader's `DocumentAttention` (Kadlec et al. 2016)."""

from __future__ import annotations

from keras_attn._validation import check_batch_sizes, check_mask_shape, static_shape
from keras_attn.backend import Layer, as_bool_mask, keras, masked_softmax, register, tf


@register
class AttentionOverAttention(Layer):
    """Attention over attention between a document and a query (Cui et al. 2017).

    `M = D Qᵀ` pairs every document word with every query word, `(|D|, |Q|)`.
    Query-to-document attention `α = softmax(M)` over the document axis (one
    distribution per query word); document-to-query attention `β = softmax(M)` over the
    query axis (one per document word); `β̄` is the mean of `β` over the real document
    words, and `s = α β̄` weighs every document word, `(|D|,)`. Padded document words
    get `s = 0`, padded query words get no weight, and an empty document or query gives
    all zeros. The reader then sums `s` over the occurrences of each candidate word.

    Paper: "Attention-over-Attention Neural Networks for Reading Comprehension", Cui
    et al., ACL 2017.

    Call arguments:
        document: `(batch, doc_len, dim)`, the contextual document embeddings.
        query: `(batch, query_len, dim)`, the contextual query embeddings.
        document_mask: optional boolean `(batch, doc_len)`, True at real words.
        query_mask: optional boolean `(batch, query_len)`, True at real words.
        return_attention_scores: bool. Also return `α` and `β`. Defaults to False.

    Returns:
        `s` of shape `(batch, doc_len)`, and with `return_attention_scores=True` also
        `α` and `β`, each `(batch, doc_len, query_len)`.

    Example:

    >>> import numpy as np
    >>> layer = AttentionOverAttention()
    >>> d, q = np.ones((2, 7, 8), "float32"), np.ones((2, 3, 8), "float32")
    >>> layer(d, q).shape
    TensorShape([2, 7])
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def build(self, document_shape, query_shape):
        _check_document_and_query(document_shape, query_shape)
        self.built = True

    def call(
        self,
        document,
        query,
        document_mask=None,
        query_mask=None,
        return_attention_scores=False,
    ):
        document, query, document_mask, query_mask = _document_and_query_inputs(
            self, document, query, document_mask, query_mask
        )
        matching = tf.einsum("bid,bjd->bij", document, query)  # (batch, |D|, |Q|)
        pair_mask = None
        if document_mask is not None:
            pair_mask = document_mask[:, :, tf.newaxis]
        if query_mask is not None:
            part = query_mask[:, tf.newaxis, :]
            pair_mask = part if pair_mask is None else pair_mask & part
        if pair_mask is not None:
            pair_mask = tf.broadcast_to(pair_mask, tf.shape(matching))
        alpha = masked_softmax(matching, pair_mask, axis=1)
        beta = masked_softmax(matching, pair_mask, axis=2)
        # β̄: the mean over real document words only.
        if document_mask is None:
            beta_mean = tf.reduce_mean(beta, axis=1)
        else:
            count = tf.reduce_sum(tf.cast(document_mask, beta.dtype), axis=1)
            beta_mean = tf.math.divide_no_nan(
                tf.reduce_sum(beta, axis=1), count[:, tf.newaxis]
            )  # (batch, |Q|)
        scores = tf.einsum("bij,bj->bi", alpha, beta_mean)  # (batch, |D|)
        if return_attention_scores:
            return scores, alpha, beta
        return scores

    def compute_mask(self, inputs, mask=None):
        return None


@register
class DocumentAttention(Layer):
    """Dot-product attention of a query vector over a document (Kadlec et al. 2016).

    The Attention Sum Reader's document scores: `q` is the mean of the query's
    vectors at the positions `query_mask` marks, and `s = softmax(D q)` over the
    real document words, `(|D|,)`. The cloze readers mark the placeholder's
    positions (`AoAReader(head="dot")`), so `q` is the encoding of the blank, as
    the Gated-Attention Reader (Dhingra et al. 2017) takes it; without a mask, every
    query position counts. Padded document words get `s = 0`, and an empty document
    or an empty query gives all zeros. The reader then sums `s` over the
    occurrences of each candidate word.

    Paper: "Text Understanding with the Attention Sum Reader Network", Kadlec et
    al., ACL 2016.

    Call arguments:
        document: `(batch, doc_len, dim)`, the contextual document embeddings.
        query: `(batch, query_len, dim)`, the contextual query embeddings.
        document_mask: optional boolean `(batch, doc_len)`, True at real words.
        query_mask: optional boolean `(batch, query_len)`, True at the positions
            whose mean is the query vector.

    Returns:
        `s` of shape `(batch, doc_len)`.

    Example:

    >>> import numpy as np
    >>> layer = DocumentAttention()
    >>> d, q = np.ones((2, 7, 8), "float32"), np.ones((2, 3, 8), "float32")
    >>> s = layer(d, q, document_mask=np.arange(7) < [[7], [4]])
    >>> s.shape, s.numpy()[1].round(2).tolist()
    (TensorShape([2, 7]), [0.25, 0.25, 0.25, 0.25, 0.0, 0.0, 0.0])
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def build(self, document_shape, query_shape):
        _check_document_and_query(document_shape, query_shape)
        self.built = True

    def call(self, document, query, document_mask=None, query_mask=None):
        document, query, document_mask, query_mask = _document_and_query_inputs(
            self, document, query, document_mask, query_mask
        )
        if query_mask is None:
            vector = tf.reduce_mean(query, axis=1)
        else:
            weights = tf.cast(query_mask, query.dtype)  # (batch, |Q|)
            count = tf.reduce_sum(weights, axis=1, keepdims=True)
            vector = tf.math.divide_no_nan(
                tf.einsum("bj,bjd->bd", weights, query), count
            )  # (batch, dim)
        logits = tf.einsum("bid,bd->bi", document, vector)  # (batch, |D|)
        scores = masked_softmax(logits, document_mask, axis=-1)
        if query_mask is not None:
            # An empty query points nowhere: zeros, not the uniform softmax of 0.
            scores *= tf.cast(tf.reduce_any(query_mask, axis=1), scores.dtype)[:, None]
        return scores

    def compute_mask(self, inputs, mask=None):
        return None


def _document_and_query_inputs(layer, document, query, document_mask, query_mask):
    """`layer`'s inputs cast, with their masks (given, or the Keras masks the tensors
    carry) as booleans of shapes (batch, doc_len) and (batch, query_len), checked."""
    document, query = layer.cast_inputs(document, query)
    if document_mask is None:
        document_mask = getattr(document, "_keras_mask", None)
    if query_mask is None:
        query_mask = getattr(query, "_keras_mask", None)
    document, query = check_batch_sizes(document=document, query=query)
    document_mask, query_mask = as_bool_mask(document_mask), as_bool_mask(query_mask)
    check_mask_shape(
        "document_mask", document_mask, static_shape(document)[:-1], "document"
    )
    check_mask_shape("query_mask", query_mask, static_shape(query)[:-1], "query")
    return document, query, document_mask, query_mask


def _check_document_and_query(document_shape, query_shape) -> None:
    """Both rank 3, with the same known last dim."""
    d_shape, q_shape = static_shape(document_shape), static_shape(query_shape)
    if (
        len(d_shape) != 3
        or len(q_shape) != 3
        or d_shape[-1] is None
        or d_shape[-1] != q_shape[-1]
    ):
        raise ValueError(
            "`document` and `query` must have shapes (batch, doc_len, dim) and "
            "(batch, query_len, dim) with the same known dim. Received: "
            f"document.shape={tuple(d_shape)}, query.shape={tuple(q_shape)}"
        )


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
