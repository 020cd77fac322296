"""The served form of a retrieval model: a raw history in, its top-k items out.

`export_retrieval_index` writes a SavedModel holding the query tower and every
item's candidate embedding (computed at export), searched exactly by
`BruteForceTopK`: TensorFlow ops only, so TF Serving (or `tf.saved_model.load`)
runs it without keras_attn, Keras, TensorFlow Recommenders or a custom op, under
either Keras generation.
"""

from __future__ import annotations

import numpy as np

from keras_attn._publish import written_whole
from keras_attn._validation import (
    check_at_most,
    check_bool,
    check_positive_int,
    check_shape,
)
from keras_attn.backend import quiet_save, tf
from keras_attn.layers.retrieval import BruteForceTopK

__all__ = ["export_retrieval_index"]


class _RetrievalServing(tf.Module):
    """Raw history in, top-k raw ids and scores out."""

    def __init__(self, model, vocabulary, k, exclude_history):
        super().__init__()
        vocabulary = np.asarray(vocabulary)
        self.integer_ids = vocabulary.dtype.kind in "iu"
        self.history_length = model.history_length
        self.exclude_history = exclude_history
        self.query_tower = model.query_tower
        # Row r holds item index r + 1 (index 0 is padding and never returned).
        self.candidates = tf.Variable(
            model.candidate_embeddings()[1:], trainable=False, name="candidates"
        )
        self.top_k = BruteForceTopK(k=k)
        indices = tf.range(1, len(vocabulary) + 1, dtype=tf.int32)
        strings = tf.constant(vocabulary.astype(str))
        self.string_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(strings, indices), default_value=0
        )
        self.string_ids = tf.concat([[""], strings], axis=0)
        if self.integer_ids:
            integers = tf.constant(vocabulary.astype("int64"))
            self.integer_table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(integers, indices),
                default_value=0,
            )
            self.integer_ids_table = tf.concat(
                [tf.zeros([1], tf.int64), integers], axis=0
            )
            self.serve = tf.function(
                self._serve_integers,
                input_signature=[tf.TensorSpec([None, None], tf.int64, name="history")],
            )
        self.serve_strings = tf.function(
            self._serve_strings,
            input_signature=[tf.TensorSpec([None, None], tf.string, name="history")],
        )

    def _top_k(self, history):
        """Top-k `(indices, scores)` of a `(batch, T)` history of item indices."""
        real = history != 0
        # Left-pack the last `history_length` real items: item j goes to column
        # L - 1 - (number of real items after it); earlier ones fall off (-1).
        after = tf.reduce_sum(tf.cast(real, tf.int32), axis=1, keepdims=True) - (
            tf.cumsum(tf.cast(real, tf.int32), axis=1)
        )
        column = tf.where(
            real & (after < self.history_length), self.history_length - 1 - after, -1
        )
        slots = tf.one_hot(column, self.history_length, dtype=tf.int32)
        packed = tf.reduce_sum(slots * history[..., tf.newaxis], axis=1)  # (batch, L)
        query = self.query_tower({"history": packed}, training=False)
        # Candidate rows of the history's items (padding 0 -> row -1: none).
        exclude = history - 1 if self.exclude_history else None
        scores, rows = self.top_k(
            tf.cast(query, tf.float32), self.candidates, exclude=exclude
        )
        return rows + 1, scores

    def _serve_integers(self, history):
        indices, scores = self._top_k(self.integer_table.lookup(history))
        return {
            "item_ids": tf.gather(self.integer_ids_table, indices),
            "scores": scores,
        }

    def _serve_strings(self, history):
        indices, scores = self._top_k(self.string_table.lookup(history))
        return {"item_ids": tf.gather(self.string_ids, indices), "scores": scores}


def export_retrieval_index(
    model,
    export_dir: str,
    vocabulary,
    k: int = 10,
    exclude_history: bool = True,
    overwrite: bool = False,
) -> str:
    """Writes a SavedModel that maps a raw history to its top-k items.

    The query tower and every item's candidate embedding (computed now) are in
    the SavedModel; the search is exact (`BruteForceTopK`), in TensorFlow ops
    alone. The history is a `(batch, T)` tensor of raw item ids of any length `T`,
    padded with 0 (or "") anywhere; ids absent from `vocabulary` are read as
    padding. Its last `history_length` real items are encoded, oldest first; with
    `exclude_history` no item of the whole history is returned (when the history
    leaves fewer than k items, the rest have score -inf). Signatures, outputs
    `item_ids` and `scores`, each `(batch, k)`, best first:

    - `serving_default`: `history` int64 (when the vocabulary is integers) or
      string ids;
    - `serve_strings` (integer vocabularies): `history` as decimal strings,
      `item_ids` as strings.

    The folder is written beside `export_dir` and moved in whole (with
    `overwrite`, an existing one swapped out), so a server polling it never sees
    half an export.

    Args:
        model: a trained `SequentialRetrieval` (any retrieval task).
        export_dir: str. Where to write (e.g. `saved_models/movies/1`).
        vocabulary: the raw id of each index 1..num_items, in order (ints or
            strings), e.g. `data.items["item_id"]`.
        k: int. Items returned per history. Defaults to 10.
        exclude_history: bool. Leave the history's items out. Defaults to True.
        overwrite: bool. Replace an existing `export_dir` (else an error before
            anything is written). Defaults to False.

    Returns:
        `export_dir`.
    """
    check_bool("overwrite", overwrite)
    vocabulary = np.asarray(vocabulary)
    check_shape("vocabulary", vocabulary.shape, (model.num_items,), "(num_items,)")
    check_at_most(
        "len(vocabulary)",
        len(vocabulary),
        len(set(vocabulary.tolist())),
        "its number of distinct ids",
    )
    check_positive_int("k", k)
    check_at_most("k", k, model.num_items, "the number of items")
    serving = _RetrievalServing(model, vocabulary, k, exclude_history)
    if serving.integer_ids:
        signatures = {
            "serving_default": serving.serve,
            "serve_strings": serving.serve_strings,
        }
    else:
        signatures = {"serving_default": serving.serve_strings}
    # An existing export (with `overwrite`) is swapped out whole, never removed
    # first.
    with written_whole(export_dir, overwrite=overwrite) as folder, quiet_save():
        tf.saved_model.save(serving, str(folder), signatures=signatures)
    return export_dir
