"""FieldEmbedding: one embedding vector per field of a CTR model."""

from __future__ import annotations

from keras_attn._validation import (
    check_bool,
    check_int,
    check_positive_int,
    check_positive_int_list,
    static_shape,
)
from keras_attn.backend import KERAS_3, Layer, clone_initializer, keras, register, tf

# Past this many rows the ids of a shared table no longer fit in int32.
_INT32_ROWS = 2**31 - 1


@register
class FieldEmbedding(Layer):
    """One embedding vector per field, from categorical ids and numeric values.

    Categorical field `i` looks its id up in its own table `E_i` (or, with
    `shared_table=True`, in one table of all fields' rows, at the field's offset).
    Numeric field `j` has a learned vector `v_j` scaled by its value, `x_j v_j`, as in
    AutoInt (Song et al., CIKM 2019). Lookups are gathers, never one-hot products, so
    vocabularies in the millions cost only the rows they touch.

    Args:
        vocabulary_sizes: list of int. Number of ids of each categorical field; ids of
            field `i` must lie in `[0, vocabulary_sizes[i])`.
        embedding_dim: int. Size of every field's vector.
        num_numeric: int. Number of numeric fields. Defaults to 0.
        shared_table: bool. One table for all categorical fields, with per-field row
            offsets, instead of one table per field. Defaults to False.
        embeddings_initializer: initializer of the tables and numeric vectors.
            Defaults to "uniform".
        embeddings_regularizer: optional regularizer of the tables and numeric vectors.
        validate_ids: bool. Check that every id lies in its field's range and fail
            with the field's name otherwise (an out-of-range id in a shared table
            would silently read another field's row). With False, an id outside its
            field's range gets a zero vector (on every device), without a check.
            Defaults to True.

    Call arguments:
        categorical: int `(batch, num_categorical)`, column `i` holds field `i`'s id;
            None when `vocabulary_sizes` is empty.
        numeric: float `(batch, num_numeric)`; required when `num_numeric > 0`.

    Returns:
        `(batch, num_categorical + num_numeric, embedding_dim)`, categorical fields
        first, in column order.

    Example:

    >>> import numpy as np
    >>> layer = FieldEmbedding([10, 1000], embedding_dim=4, num_numeric=3)
    >>> ids = np.array([[1, 999], [0, 5]])
    >>> layer(ids, numeric=np.ones((2, 3), "float32")).shape
    TensorShape([2, 5, 4])
    """

    def __init__(
        self,
        vocabulary_sizes: list[int],
        embedding_dim: int,
        num_numeric: int = 0,
        shared_table: bool = False,
        embeddings_initializer="uniform",
        embeddings_regularizer=None,
        validate_ids: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(vocabulary_sizes, (str, bytes)) or not hasattr(
            vocabulary_sizes, "__iter__"
        ):
            raise ValueError(
                "`vocabulary_sizes` must be a list of positive integers. Received: "
                f"vocabulary_sizes={vocabulary_sizes!r}"
            )
        vocabulary_sizes = list(vocabulary_sizes)
        if vocabulary_sizes:  # none when every field is numeric
            check_positive_int_list("vocabulary_sizes", vocabulary_sizes)
        check_positive_int("embedding_dim", embedding_dim)
        check_int("num_numeric", num_numeric, minimum=0)
        if not vocabulary_sizes and not num_numeric:
            raise ValueError(
                "FieldEmbedding needs at least one field. Received: "
                "vocabulary_sizes=[], num_numeric=0"
            )
        self.vocabulary_sizes = vocabulary_sizes
        self.embedding_dim = embedding_dim
        self.num_numeric = num_numeric
        self.shared_table = check_bool("shared_table", shared_table)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.embeddings_regularizer = keras.regularizers.get(embeddings_regularizer)
        self.validate_ids = check_bool("validate_ids", validate_ids)
        if KERAS_3:
            # Keras 3 would cast a whole (maybe huge) table to the compute dtype on
            # every read; the rows gathered are cast instead. (tf_keras' autocast
            # variables already cast only what a gather reads.)
            self.autocast = False
        total = sum(vocabulary_sizes)
        self._id_dtype = tf.int64 if total > _INT32_ROWS else tf.int32
        offsets, start = [], 0
        for size in vocabulary_sizes:
            offsets.append(start)
            start += size
        self._offsets = offsets

    def _table(self, name, rows):
        return self.add_weight(
            name=name,
            shape=(rows, self.embedding_dim),
            initializer=clone_initializer(self.embeddings_initializer),
            regularizer=self.embeddings_regularizer,
        )

    def build(self, categorical_shape=None, numeric_shape=None):
        # Keras builds from the tensor arguments only: without categorical fields
        # `categorical` is None and so is its shape.
        fields = len(self.vocabulary_sizes)
        if fields or categorical_shape is not None:
            shape = None
            if categorical_shape is not None:
                shape = static_shape(categorical_shape)
            if shape is None or len(shape) != 2 or shape[-1] not in (None, fields):
                received = "=None" if shape is None else f".shape={tuple(shape)}"
                raise ValueError(
                    f"`categorical` must have shape (batch, {fields}), one column "
                    f"per entry of `vocabulary_sizes`. Received: "
                    f"categorical{received}"
                )
        if numeric_shape is not None:
            numeric_shape = static_shape(numeric_shape)
            if len(numeric_shape) != 2 or numeric_shape[-1] not in (
                None,
                self.num_numeric,
            ):
                raise ValueError(
                    f"`numeric` must have shape (batch, {self.num_numeric}) "
                    f"(num_numeric={self.num_numeric}). Received: "
                    f"numeric.shape={tuple(numeric_shape)}"
                )
        if self.shared_table:
            self.tables = [self._table("embeddings", sum(self.vocabulary_sizes))]
        else:
            self.tables = [
                self._table(f"embeddings_{i}", size)
                for i, size in enumerate(self.vocabulary_sizes)
            ]
        self.numeric_embeddings = (
            self._table("numeric_embeddings", self.num_numeric)
            if self.num_numeric
            else None
        )
        self.built = True

    def _check_ids(self, ids):
        vocab = tf.constant(self.vocabulary_sizes, ids.dtype)
        ok = tf.reduce_all((ids >= 0) & (ids < vocab))
        if tf.executing_eagerly():
            if not bool(ok):
                bad = (ids.numpy() < 0) | (ids.numpy() >= vocab.numpy())
                row, col = (int(i[0]) for i in bad.nonzero())
                raise ValueError(
                    f"Categorical field {col} takes ids in [0, "
                    f"{self.vocabulary_sizes[col]}) (vocabulary_sizes[{col}]). "
                    f"Received: categorical[{row}, {col}]={int(ids[row, col])}"
                )
            return ids
        message = (
            "FieldEmbedding: a categorical id lies outside [0, vocabulary_sizes[i]) "
            f"for its field i; vocabulary_sizes={self.vocabulary_sizes}"
        )
        with tf.control_dependencies([tf.debugging.Assert(ok, [message])]):
            return tf.identity(ids)

    def call(self, categorical, numeric=None):
        if self.num_numeric and numeric is None:
            raise ValueError(
                f"FieldEmbedding was built with num_numeric={self.num_numeric}: "
                "pass `numeric` of shape (batch, num_numeric). Received: numeric=None"
            )
        if not self.num_numeric and numeric is not None:
            raise ValueError(
                "FieldEmbedding was built with num_numeric=0, so it takes no "
                f"`numeric`. Received: numeric.shape={tuple(numeric.shape)}"
            )
        compute = self.compute_dtype
        parts = []
        if self.vocabulary_sizes:
            ids = tf.convert_to_tensor(categorical)
            if ids.dtype.is_floating:
                ids = tf.floor(ids)
            # (batch, fields), with the field count static (tf_keras traces the
            # stacked columns as (None, None)).
            ids = tf.reshape(
                tf.cast(ids, self._id_dtype), [-1, len(self.vocabulary_sizes)]
            )
            vocab = tf.constant(self.vocabulary_sizes, self._id_dtype)
            in_range = None
            if self.validate_ids:
                ids = self._check_ids(ids)
            else:
                # (batch, fields): an out-of-range id reads row 0, then is zeroed.
                in_range = (ids >= 0) & (ids < vocab)
                ids = tf.where(in_range, ids, tf.zeros_like(ids))
            if self.shared_table:
                ids = ids + tf.constant(self._offsets, self._id_dtype)
                # (batch, fields, dim)
                parts.append(tf.cast(_lookup(self.tables[0], ids), compute))
                if in_range is not None:
                    parts[-1] *= tf.cast(in_range, compute)[:, :, tf.newaxis]
            else:
                columns = tf.unstack(ids, num=len(self.tables), axis=1)
                parts.append(
                    tf.stack(
                        [_lookup(t, c) for t, c in zip(self.tables, columns)], axis=1
                    )
                )
                parts[-1] = tf.cast(parts[-1], compute)
                if in_range is not None:
                    parts[-1] *= tf.cast(in_range, compute)[:, :, tf.newaxis]
        if self.num_numeric:
            numeric = tf.cast(tf.convert_to_tensor(numeric), compute)
            vectors = tf.cast(self.numeric_embeddings, compute)
            # (batch, num_numeric, dim): each field's vector scaled by its value.
            parts.append(numeric[:, :, tf.newaxis] * vectors)
        return parts[0] if len(parts) == 1 else tf.concat(parts, axis=1)

    def compute_output_shape(self, categorical_shape=None, numeric_shape=None):
        batch = static_shape(
            numeric_shape if categorical_shape is None else categorical_shape
        )[0]
        return (
            batch,
            len(self.vocabulary_sizes) + self.num_numeric,
            self.embedding_dim,
        )

    def get_config(self):
        config = {
            "vocabulary_sizes": list(self.vocabulary_sizes),
            "embedding_dim": self.embedding_dim,
            "num_numeric": self.num_numeric,
            "shared_table": self.shared_table,
            "embeddings_initializer": keras.initializers.serialize(
                self.embeddings_initializer
            ),
            "embeddings_regularizer": keras.regularizers.serialize(
                self.embeddings_regularizer
            )
            if self.embeddings_regularizer
            else None,
            "validate_ids": self.validate_ids,
        }
        return {**super().get_config(), **config}


def _lookup(table, ids):
    """`tf.gather(table, ids)`, and the rows of a table split over parameter
    servers (a `ShardedVariable`, held as such by tf_keras and inside `.value` by
    Keras 3), which gathers only 1-D ids: `tf.nn.embedding_lookup` reads each row
    from its shard instead of joining the whole table."""
    sharded = tf.__internal__.distribute.ShardedVariable
    inner = table if isinstance(table, sharded) else getattr(table, "value", None)
    if isinstance(inner, sharded):
        return tf.nn.embedding_lookup(inner, ids)
    return tf.gather(table, ids)
