"""Sequential retrieval: a two-tower model whose query tower reads the history.

`HistoryEncoder` (the query tower) embeds a user's item history, adds learned
positions and runs causal Transformer encoder blocks over it (SASRec, Kang & McAuley,
ICDM 2018), padding masked; the state at the last (most recent) position, or an
attention pooling of all states, is the query. `ItemEncoder` (the candidate tower)
embeds an item's id and its genres. `SequentialRetrieval` holds both and trains them
with TensorFlow Recommenders' `tfrs.tasks.Retrieval`: a softmax over the batch's
candidates. `export_retrieval_index` writes a SavedModel holding a
`tfrs.layers.factorized_top_k.BruteForce` index over all items, which maps a raw
history to the top-k item ids and scores in TensorFlow alone.

The towers are plain Keras and work under both Keras generations. Training and
export use TensorFlow Recommenders, which needs Keras 2: run with
`TF_USE_LEGACY_KERAS=1` (importing this module never loads it; building a
`SequentialRetrieval` under Keras 3 raises an ImportError that says so).

Items are indices 1..num_items (0 is padding); `keras_attn.datasets.
load_movielens_sequences` makes such examples from MovieLens-100K. `top_k_metrics`
scores any (examples, items) score matrix by recall@k and NDCG@k with per-user
bootstrap intervals, and `most_popular_scores` is the baseline to beat.
"""

from __future__ import annotations

import numpy as np

from keras_attn._publish import written_whole
from keras_attn._validation import (
    check_at_most,
    check_choice,
    check_finite,
    check_ids,
    check_int,
    check_positive_int,
    check_rate,
    check_shape,
)
from keras_attn.backend import KERAS_3, Layer, keras, register, tf
from keras_attn.layers.attention import ContextAttentionPooling
from keras_attn.layers.position import PositionEmbedding
from keras_attn.layers.transformer import TransformerEncoderBlock

__all__ = [
    "HistoryEncoder",
    "HistoryPooling",
    "ItemEncoder",
    "POOLINGS",
    "SequentialRetrieval",
    "export_retrieval_index",
    "fit_retrieval_model",
    "most_popular_scores",
    "pack_histories",
    "top_k_metrics",
]

POOLINGS = ("last", "attention", "mean")


def require_tfrs():
    """`tensorflow_recommenders`, or an ImportError that says what to do."""
    if KERAS_3:
        raise ImportError(
            "SequentialRetrieval and export_retrieval_index use TensorFlow "
            "Recommenders, which needs Keras 2, and keras_attn runs under Keras 3 "
            "here: set TF_USE_LEGACY_KERAS=1 before TensorFlow is imported."
        )
    try:
        import tensorflow_recommenders as tfrs
    except ImportError as error:
        raise ImportError(
            "SequentialRetrieval needs tensorflow-recommenders: install it with "
            "pip (`pip install tensorflow-recommenders`)."
        ) from error
    return tfrs


@register
class HistoryPooling(Layer):
    """One vector per history from its per-position states, padding masked.

    "last": the state at the last real position (the most recent item, wherever
    the padding sits); "attention": `ContextAttentionPooling` over the real
    positions; "mean": their mean. A history with no real position gives zeros.

    Args:
        pooling: str. One of "last", "attention", "mean". Defaults to "last".
        units: int. Width of the attention pooling's projection. Defaults to 64.

    Call arguments:
        inputs: `(batch, seq_len, dim)`.
        mask: boolean `(batch, seq_len)`, True at real positions.

    Returns:
        `(batch, dim)`.

    Example:

    >>> import numpy as np
    >>> states = np.arange(12, dtype="float32").reshape(1, 3, 4)
    >>> pooled = HistoryPooling("last")(states, mask=np.array([[True, True, False]]))
    >>> pooled.numpy().tolist()
    [[4.0, 5.0, 6.0, 7.0]]
    """

    def __init__(self, pooling: str = "last", units: int = 64, **kwargs):
        super().__init__(**kwargs)
        check_choice("pooling", pooling, POOLINGS)
        check_positive_int("units", units)
        self.pooling = pooling
        self.units = units
        self.supports_masking = True
        self.attention = None
        if pooling == "attention":
            self.attention = ContextAttentionPooling(
                units, dtype=self.dtype_policy, name="attention"
            )

    def build(self, inputs_shape):
        if self.attention is not None:
            self.attention.build(inputs_shape)
        self.built = True

    def call(self, inputs, mask=None):
        inputs = self.cast_inputs(inputs)
        if mask is None:
            mask = tf.ones(tf.shape(inputs)[:2], tf.bool)
        mask = tf.cast(mask, tf.bool)
        real = tf.cast(mask, inputs.dtype)[..., tf.newaxis]  # (batch, seq_len, 1)
        if self.pooling == "attention":
            return self.attention(inputs, mask=mask)
        if self.pooling == "mean":
            total = tf.reduce_sum(inputs * real, axis=1)
            return tf.math.divide_no_nan(total, tf.reduce_sum(real, axis=1))
        # The last True position of each row; a row without one gathers position 0
        # and is zeroed below.
        steps = tf.range(tf.shape(inputs)[1])
        last = tf.reduce_max(tf.where(mask, steps, -1), axis=1)  # (batch,)
        state = tf.gather(inputs, tf.maximum(last, 0), axis=1, batch_dims=1)
        return state * tf.cast(last >= 0, inputs.dtype)[:, tf.newaxis]

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[-1])

    def get_config(self):
        return {**super().get_config(), "pooling": self.pooling, "units": self.units}


@register
class HistoryEncoder(keras.Model):
    """The query tower: a SASRec-style encoder of a history of item indices.

    `history` `(batch, history_length)` holds item indices, 0 = padding; put the
    most recent item last (left padding), so that learned position
    `history_length - 1` is always the most recent. Item embeddings plus
    position embeddings, dropout, `num_layers`
    pre-LN `TransformerEncoderBlock`s with a causal and a padding mask, a final
    LayerNorm, then `HistoryPooling`. An empty history gives a zero query.

    Paper: "Self-Attentive Sequential Recommendation", Kang & McAuley, ICDM 2018.

    Args:
        num_items: int. Item indices run 1..num_items.
        history_length: int. Positions of the history. Defaults to 50.
        embedding_dim: int. Width of the embeddings and of the query. Defaults
            to 64.
        num_layers: int. Transformer blocks. Defaults to 2.
        num_heads: int. Attention heads; must divide `embedding_dim`. Defaults
            to 2.
        intermediate_dim: int. Feed-forward width. Defaults to `embedding_dim`.
        dropout: float. Dropout on the embeddings and in the blocks. Defaults
            to 0.2.
        pooling: str. "last", "attention" or "mean" (see `HistoryPooling`).
            Defaults to "last".
        name: str. Defaults to "history_encoder".

    Example:

    >>> import numpy as np
    >>> tower = HistoryEncoder(num_items=20, history_length=5, embedding_dim=8,
    ...                        num_layers=1)
    >>> tower({"history": np.array([[0, 0, 3, 7, 9], [0, 0, 0, 0, 0]])}).shape
    TensorShape([2, 8])
    """

    def __init__(
        self,
        num_items: int,
        history_length: int = 50,
        embedding_dim: int = 64,
        num_layers: int = 2,
        num_heads: int = 2,
        intermediate_dim: int | None = None,
        dropout: float = 0.2,
        pooling: str = "last",
        name: str = "history_encoder",
        **kwargs,
    ):
        check_positive_int("num_items", num_items)
        check_positive_int("history_length", history_length)
        check_positive_int("embedding_dim", embedding_dim)
        check_int("num_layers", num_layers, minimum=0)
        check_positive_int("intermediate_dim", intermediate_dim, allow_none=True)
        check_rate("dropout", dropout)
        check_choice("pooling", pooling, POOLINGS)
        history = keras.Input((history_length,), dtype="int32", name="history")
        item_embedding = keras.layers.Embedding(
            num_items + 1,
            embedding_dim,
            mask_zero=True,
            # Item vectors of norm about 1 at the start, as the positions'.
            embeddings_initializer=keras.initializers.RandomNormal(
                stddev=embedding_dim**-0.5
            ),
            name="item_embedding",
        )
        position_embedding = PositionEmbedding(history_length, name="position")
        blocks = [
            TransformerEncoderBlock(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim or embedding_dim,
                dropout=dropout,
                normalize_first=True,
                name=f"block_{i}",
            )
            for i in range(num_layers)
        ]
        items = item_embedding(history)  # (batch, history_length, dim), masked
        x = keras.layers.Add(name="add_positions")([items, position_embedding(items)])
        x = keras.layers.Dropout(dropout, name="embedding_dropout")(x)
        for block in blocks:
            x = block(x, use_causal_mask=True)
        x = keras.layers.LayerNormalization(epsilon=1e-5, name="final_norm")(x)
        query = HistoryPooling(pooling, units=embedding_dim, name="pooling")(x)
        super().__init__(
            inputs={"history": history}, outputs=query, name=name, **kwargs
        )
        self.item_embedding = item_embedding
        self.position_embedding = position_embedding
        self.blocks = blocks
        self._settings = {
            "num_items": num_items,
            "history_length": history_length,
            "embedding_dim": embedding_dim,
            "num_layers": num_layers,
            "num_heads": num_heads,
            "intermediate_dim": intermediate_dim,
            "dropout": dropout,
            "pooling": pooling,
        }

    def get_config(self):
        return {**self._settings, "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


@register
class ItemEncoder(keras.Model):
    """The candidate tower: an item's id embedding plus a projection of its genres.

    `item` `(batch,)` holds item indices 1..num_items. The genres are a fixed
    multi-hot table `(num_items + 1, num_genres)` kept as a non-trainable weight
    (set with `item_genres` or `set_item_genres`; it is saved with the weights), so
    the tower needs only the index. Output: `Dense(embedding_dim)` of the id
    embedding concatenated with `Dense(embedding_dim)` of the genres.

    Args:
        num_items: int. Item indices run 1..num_items.
        num_genres: int. Width of the genre multi-hot. Defaults to 19 (MovieLens).
        embedding_dim: int. Width of the output. Defaults to 64.
        item_genres: optional array `(num_items + 1, num_genres)` (row 0 is
            padding). Not part of the config: it lives in the weights.
        name: str. Defaults to "item_encoder".

    Example:

    >>> import numpy as np
    >>> tower = ItemEncoder(num_items=3, num_genres=2, embedding_dim=4,
    ...                     item_genres=np.eye(4, 2, k=-1))
    >>> tower({"item": np.array([1, 3])}).shape
    TensorShape([2, 4])
    """

    def __init__(
        self,
        num_items: int,
        num_genres: int = 19,
        embedding_dim: int = 64,
        item_genres=None,
        name: str = "item_encoder",
        **kwargs,
    ):
        check_positive_int("num_items", num_items)
        check_positive_int("num_genres", num_genres)
        check_positive_int("embedding_dim", embedding_dim)
        item = keras.Input((), dtype="int32", name="item")
        id_embedding = keras.layers.Embedding(
            num_items + 1, embedding_dim, name="id_embedding"
        )
        # A lookup of the genre multi-hot by index: a frozen table.
        genre_table = keras.layers.Embedding(
            num_items + 1,
            num_genres,
            embeddings_initializer="zeros",
            trainable=False,
            name="genre_table",
        )
        genre_dense = keras.layers.Dense(embedding_dim, name="genre_dense")
        joined = keras.layers.Concatenate(name="join")(
            [id_embedding(item), genre_dense(genre_table(item))]
        )
        output = keras.layers.Dense(embedding_dim, name="output_dense")(joined)
        super().__init__(inputs={"item": item}, outputs=output, name=name, **kwargs)
        self.id_embedding = id_embedding
        self.genre_table = genre_table
        self.genre_dense = genre_dense
        self._settings = {
            "num_items": num_items,
            "num_genres": num_genres,
            "embedding_dim": embedding_dim,
        }
        if item_genres is not None:
            self.set_item_genres(item_genres)

    def set_item_genres(self, item_genres) -> None:
        """Writes the multi-hot genre table `(num_items + 1, num_genres)`."""
        table = np.asarray(item_genres, dtype="float32")
        expected = (self._settings["num_items"] + 1, self._settings["num_genres"])
        check_shape("item_genres", table.shape, expected, "(num_items + 1, num_genres)")
        self.genre_table.set_weights([table])

    def get_config(self):
        return {**self._settings, "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


class SequentialRetrieval(keras.Model):
    """Two towers trained with `tfrs.tasks.Retrieval` (Keras 2 only).

    `query_tower` is a `HistoryEncoder`, `candidate_tower` an `ItemEncoder`, `task`
    the TFRS retrieval task: a softmax of each query over the batch's candidates
    (its own target and the other examples' targets). Called on
    `{"history": ...}` it returns the query embeddings; `candidate_embeddings()`
    gives every item's; `recommend` the top items of histories. Keep its weights
    with `save_weights`/`load_weights` (the genre table is among them); each tower
    is a functional model that also saves to `.keras` on its own, and
    `export_retrieval_index` writes the served form.

    Args:
        num_items: int. Item indices run 1..num_items.
        num_genres: int. Width of the genre multi-hot. Defaults to 19.
        item_genres: optional array `(num_items + 1, num_genres)`.
        history_length, embedding_dim, num_layers, num_heads, intermediate_dim,
            dropout, pooling: the `HistoryEncoder`'s (embedding_dim is also the
            `ItemEncoder`'s).
        temperature: float or None. Logits are divided by it. Defaults to None.
        remove_accidental_hits: bool. A batch's other example with the same target
            item is not a negative. Defaults to True.
        name: str. Defaults to "sequential_retrieval".

    Raises:
        ImportError: under Keras 3, or without tensorflow-recommenders.

    Example:

    >>> import numpy as np
    >>> from keras_attn.backend import KERAS_3
    >>> if not KERAS_3:  # TFRS needs TF_USE_LEGACY_KERAS=1
    ...     model = SequentialRetrieval(num_items=20, num_genres=2,
    ...                                 history_length=4, embedding_dim=8,
    ...                                 num_layers=1)
    ...     shape = tuple(model({"history": np.array([[0, 3, 5, 2]])}).shape)
    ... else:
    ...     shape = (1, 8)
    >>> shape
    (1, 8)
    """

    def __init__(
        self,
        num_items: int,
        num_genres: int = 19,
        item_genres=None,
        history_length: int = 50,
        embedding_dim: int = 64,
        num_layers: int = 2,
        num_heads: int = 2,
        intermediate_dim: int | None = None,
        dropout: float = 0.2,
        pooling: str = "last",
        temperature: float | None = None,
        remove_accidental_hits: bool = True,
        name: str = "sequential_retrieval",
        **kwargs,
    ):
        tfrs = require_tfrs()
        if temperature is not None:
            check_finite("temperature", temperature, minimum=0, exclusive_minimum=True)
        super().__init__(name=name, **kwargs)
        self.query_tower = HistoryEncoder(
            num_items,
            history_length=history_length,
            embedding_dim=embedding_dim,
            num_layers=num_layers,
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            dropout=dropout,
            pooling=pooling,
        )
        self.candidate_tower = ItemEncoder(
            num_items,
            num_genres=num_genres,
            embedding_dim=embedding_dim,
            item_genres=item_genres,
        )
        self.task = tfrs.tasks.Retrieval(
            temperature=temperature,
            remove_accidental_hits=remove_accidental_hits,
        )
        self.num_items = num_items
        self.history_length = history_length
        self.remove_accidental_hits = remove_accidental_hits
        self._settings = {
            "num_items": num_items,
            "num_genres": num_genres,
            "history_length": history_length,
            "embedding_dim": embedding_dim,
            "num_layers": num_layers,
            "num_heads": num_heads,
            "intermediate_dim": intermediate_dim,
            "dropout": dropout,
            "pooling": pooling,
            "temperature": temperature,
            "remove_accidental_hits": remove_accidental_hits,
        }

    def get_config(self):
        # The genre table is not here: it lives in the candidate tower's weights.
        return {**self._settings, "name": self.name, "trainable": self.trainable}

    def call(self, inputs, training=None):
        return self.query_tower({"history": inputs["history"]}, training=training)

    def retrieval_loss(self, features, training=False):
        """The task's loss on a batch `{"history", "item"[, "item_probability"]}`;
        `item_probability` (each target's share of the training targets) turns on
        the sampling-bias correction of the in-batch softmax (logQ)."""
        query = self.query_tower({"history": features["history"]}, training=training)
        candidates = self.candidate_tower({"item": features["item"]}, training=training)
        return self.task(
            query,
            candidates,
            candidate_sampling_probability=features.get("item_probability"),
            candidate_ids=features["item"] if self.remove_accidental_hits else None,
            compute_metrics=False,
            training=training,
        )

    def train_step(self, data):
        with tf.GradientTape() as tape:
            loss = self.retrieval_loss(data, training=True)
            total = loss + tf.add_n(self.losses) if self.losses else loss
        variables = self.trainable_variables
        gradients = tape.gradient(total, variables)
        self.optimizer.apply_gradients(zip(gradients, variables))
        return {"loss": loss}

    def test_step(self, data):
        return {"loss": self.retrieval_loss(data, training=False)}

    def candidate_embeddings(self, batch_size: int = 4096) -> np.ndarray:
        """Every item's embedding, `(num_items + 1, dim)`; row 0 (padding) is
        zeros."""
        items = np.arange(1, self.num_items + 1, dtype="int32")
        embedded = self.candidate_tower.predict(
            {"item": items}, batch_size=batch_size, verbose=0
        )
        return np.concatenate([np.zeros_like(embedded[:1]), embedded])

    def query_embeddings(self, histories, batch_size: int = 1024) -> np.ndarray:
        """Queries `(n, dim)` of histories `(n, history_length)` (left-padded
        item indices)."""
        return self.query_tower.predict(
            {"history": np.asarray(histories, "int32")},
            batch_size=batch_size,
            verbose=0,
        )

    def scores(self, histories, batch_size: int = 1024) -> np.ndarray:
        """Dot products `(n, num_items + 1)` of each history's query with every
        item (column 0, padding, is -inf)."""
        scores = self.query_embeddings(histories, batch_size) @ (
            self.candidate_embeddings().T
        )
        scores[:, 0] = -np.inf
        return scores

    def recommend(self, histories, k: int = 10, exclude_history: bool = True):
        """Top-k `(indices, scores)`, each `(n, k)`, of histories `(n, T)` of item
        indices (0 = padding, any layout; the last `history_length` real items
        are encoded), computed in NumPy; with `exclude_history`, no item of the
        history is recommended. Ties go to the lower index."""
        histories = np.asarray(histories)
        packed = pack_histories(histories, self.history_length)
        scores = self.scores(packed)
        if exclude_history:
            rows = np.repeat(np.arange(len(histories)), histories.shape[1])
            scores[rows, histories.ravel()] = -np.inf
            scores[:, 0] = -np.inf
        top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return top, np.take_along_axis(scores, top, axis=1)


def pack_histories(histories, history_length: int) -> np.ndarray:
    """Left-padded `(n, history_length)` int32 from histories `(n, T)` of item
    indices with 0 as padding anywhere: each row's real items in order, the last
    `history_length` of them, the most recent in the last column.

    Example:

    >>> pack_histories([[5, 6, 0, 0], [0, 1, 2, 3]], 3)
    array([[0, 5, 6],
           [1, 2, 3]], dtype=int32)
    """
    histories = np.asarray(histories)
    out = np.zeros((len(histories), history_length), dtype="int32")
    for row, items in enumerate(histories):
        real = items[items != 0][-history_length:]
        if len(real):
            out[row, -len(real) :] = real
    return out


def fit_retrieval_model(
    model: SequentialRetrieval,
    train,
    epochs: int = 10,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    sampling_correction: bool = True,
    validation=None,
    seed: int = 0,
    callbacks=None,
    verbose="auto",
):
    """Trains a `SequentialRetrieval` on (history, next item) examples.

    The examples are shuffled each epoch and batched (the last, smaller batch is
    dropped: every in-batch softmax has `batch_size` candidates); Adam.

    Args:
        model: a `SequentialRetrieval`.
        train: `SequenceExamples` or a dict with `history` `(n, history_length)`
            and `item` `(n,)`.
        epochs: int. Defaults to 10.
        batch_size: int. Examples (and candidates) per batch. Defaults to 256.
        learning_rate: float. Adam's. Defaults to 1e-3.
        sampling_correction: bool. Correct the in-batch softmax for popular items
            appearing more often as negatives: each candidate's logit minus the
            log of its share of the training targets (logQ; Yi et al., RecSys
            2019). Without it the model learns to push popular items down: on
            MovieLens-100K's validation part, recall@10 0.063 without and 0.197
            with it (benchmarks/RESULTS.md, bench_retrieval_select). Defaults to
            True.
        validation: optional examples like `train`: their loss after each epoch.
        seed: int. Shuffle seed. Defaults to 0.
        callbacks: list of Keras callbacks.
        verbose: Keras' `fit` verbosity (2: one line per epoch). Defaults to
            "auto".

    Returns:
        The Keras `History`.
    """
    check_positive_int("epochs", epochs)
    check_positive_int("batch_size", batch_size)
    check_finite("learning_rate", learning_rate, minimum=0, exclusive_minimum=True)
    features = _features(train, model.history_length)
    n = len(features["item"])
    check_at_most("batch_size", batch_size, n, "the number of training examples")
    probability = None
    if sampling_correction:
        counts = np.bincount(features["item"], minlength=model.num_items + 1)
        probability = (counts / n).astype("float32")

    def dataset(part, shuffle):
        part = dict(part)
        if probability is not None:
            part["item_probability"] = probability[part["item"]]
        data = tf.data.Dataset.from_tensor_slices(part)
        if shuffle:
            data = data.shuffle(
                len(part["item"]), seed=seed, reshuffle_each_iteration=True
            )
        return data.batch(batch_size, drop_remainder=True).prefetch(2)

    model.compile(optimizer=keras.optimizers.Adam(learning_rate))
    return model.fit(
        dataset(features, shuffle=True),
        epochs=epochs,
        validation_data=None
        if validation is None
        else dataset(_features(validation, model.history_length), shuffle=False),
        callbacks=callbacks,
        verbose=verbose,
    )


def _features(examples, history_length: int) -> dict:
    if hasattr(examples, "features"):
        examples = examples.features()
    history = np.asarray(examples["history"], "int32")
    item = np.asarray(examples["item"], "int32")
    check_shape(
        "history",
        history.shape,
        (len(item), history_length),
        "(number of examples, the model's history_length)",
    )
    return {"history": history, "item": item}


def most_popular_scores(train_items, num_items: int) -> np.ndarray:
    """Each item's count among `train_items` (indices 1..num_items), `(num_items
    + 1,)` float64 with -inf for index 0: the most-popular baseline's scores.

    Example:

    >>> most_popular_scores([1, 2, 2], num_items=3)
    array([-inf,   1.,   2.,   0.])
    """
    scores = np.bincount(np.asarray(train_items), minlength=num_items + 1)
    scores = scores[: num_items + 1].astype("float64")
    scores[0] = -np.inf
    return scores


def top_k_metrics(
    scores,
    targets,
    users,
    exclude=None,
    ks=(10, 50),
    ndcg_k: int | None = 10,
    num_bootstrap: int = 1000,
    seed: int = 0,
) -> dict:
    """Recall@k (hit rate of the one target) and NDCG@k, with 95% intervals.

    The rank of each example's target among all items is the number of items
    with a higher score, plus those of equal score and lower index (ties go to
    the lower index, for every model alike). Items marked in `exclude` (e.g.
    the ones the user rated before) are left out of the ranking. Intervals: the
    2.5% and 97.5% quantiles over `num_bootstrap` resamplings of the users (with
    replacement, all examples of a drawn user together), since one user's
    examples are not independent.

    Args:
        scores: `(n, num_items + 1)` or one row `(num_items + 1,)` shared by all
            examples (a baseline); column 0 is padding and never ranked.
        targets: int `(n,)` item indices.
        users: `(n,)` user ids (for the bootstrap).
        exclude: optional boolean `(n, num_items + 1)`.
        ks: recall cut-offs. Defaults to (10, 50).
        ndcg_k: NDCG cut-off, or None. Defaults to 10.
        num_bootstrap: int. Resamplings of the users. Defaults to 1000.
        seed: int. Seed of the resampling. Defaults to 0.

    Returns:
        `{"recall@10": (value, low, high), ..., "ndcg@10": (...)}`, plus
        `"ranks"`: the targets' 0-based ranks.

    Example:

    >>> scores = np.array([[0., 3., 2., 1.], [0., 3., 2., 1.]])
    >>> out = top_k_metrics(scores, [2, 3], users=[1, 2], ks=(1, 2), ndcg_k=None)
    >>> out["recall@2"][0], out["ranks"].tolist()
    (0.5, [1, 2])
    """
    targets = np.asarray(targets)
    users = np.asarray(users)
    n = len(targets)
    scores = np.asarray(scores, dtype="float64")
    if scores.ndim == 1:
        scores = np.broadcast_to(scores, (n, scores.shape[0]))
    check_shape("scores", scores.shape, (n, None), "(len(targets), num_items + 1)")
    check_shape("users", users.shape, (n,), "(len(targets),)")
    check_ids("targets", tf.convert_to_tensor(targets), scores.shape[1])
    target_scores = scores[np.arange(n), targets][:, None]
    index = np.arange(scores.shape[1])
    ahead = (scores > target_scores) | (
        (scores == target_scores) & (index < targets[:, None])
    )
    ahead[:, 0] = False
    if exclude is not None:
        exclude = np.asarray(exclude, dtype=bool)
        check_shape("exclude", exclude.shape, scores.shape)
        ahead &= ~exclude
    ranks = ahead.sum(axis=1)
    per_example = {f"recall@{k}": (ranks < k).astype("float64") for k in ks}
    if ndcg_k is not None:
        per_example[f"ndcg@{ndcg_k}"] = np.where(
            ranks < ndcg_k, 1.0 / np.log2(ranks + 2.0), 0.0
        )
    # Per-user sums and counts, resampled over users.
    unique, user_of = np.unique(users, return_inverse=True)
    counts = np.bincount(user_of, minlength=len(unique))
    draws = np.random.default_rng(seed).integers(
        0, len(unique), size=(num_bootstrap, len(unique))
    )
    drawn_counts = counts[draws].sum(axis=1)
    out = {}
    for name, values in per_example.items():
        sums = np.bincount(user_of, weights=values, minlength=len(unique))
        resampled = sums[draws].sum(axis=1) / drawn_counts
        low, high = np.quantile(resampled, [0.025, 0.975])
        out[name] = (float(values.mean()), float(low), float(high))
    out["ranks"] = ranks
    return out


class _RetrievalServing(tf.Module):
    """Raw history in, top-k raw ids and scores out, with a BruteForce index."""

    def __init__(self, model, vocabulary, k, exclude_history, tfrs):
        super().__init__()
        vocabulary = np.asarray(vocabulary)
        self.integer_ids = vocabulary.dtype.kind in "iu"
        self.k = k
        self.history_length = model.history_length
        self.exclude_history = exclude_history
        indices = tf.range(1, len(vocabulary) + 1, dtype=tf.int32)
        self.index = tfrs.layers.factorized_top_k.BruteForce(
            query_model=model.query_tower, k=k
        )
        candidates = model.candidate_embeddings()[1:]
        self.index.index(tf.constant(candidates), identifiers=indices)
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
        num_items = tf.shape(self.string_ids)[0] - 1
        if not self.exclude_history:
            scores, indices = self.index({"history": packed}, k=self.k)
            return indices, scores
        # Ask for k more than the history holds, then drop the history's items.
        wanted = tf.minimum(self.k + tf.shape(history)[1], num_items)
        scores, indices = self.index({"history": packed}, k=wanted)
        seen = tf.reduce_any(
            tf.equal(indices[:, :, tf.newaxis], history[:, tf.newaxis, :]), axis=-1
        )
        scores = tf.where(seen, tf.constant(-np.inf, scores.dtype), scores)
        top_scores, order = tf.math.top_k(scores, k=self.k)
        return tf.gather(indices, order, batch_dims=1), top_scores

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
    model: SequentialRetrieval,
    export_dir: str,
    vocabulary,
    k: int = 10,
    exclude_history: bool = True,
) -> str:
    """Writes a SavedModel that maps a raw history to its top-k items.

    A `tfrs.layers.factorized_top_k.BruteForce` index holds every item's
    candidate embedding (computed now) and the query tower. The history is a
    `(batch, T)` tensor of raw item ids of any length `T`, padded with 0 (or "")
    anywhere; ids absent from `vocabulary` are read as padding. Its last
    `history_length` real items are encoded, oldest first; with `exclude_history`
    no item of the whole history is returned (when the history leaves fewer than
    k items, the rest have score -inf). Signatures, outputs `item_ids` and
    `scores`, each `(batch, k)`, best first:

    - `serving_default`: `history` int64 (when the vocabulary is integers) or
      string ids;
    - `serve_strings` (integer vocabularies): `history` as decimal strings,
      `item_ids` as strings.

    Args:
        model: a trained `SequentialRetrieval`.
        export_dir: str. Where to write; it must not exist yet (the SavedModel is
            written beside it and moved in whole).
        vocabulary: the raw id of each index 1..num_items, in order (ints or
            strings), e.g. `data.items["item_id"]`.
        k: int. Items returned per history. Defaults to 10.
        exclude_history: bool. Leave the history's items out. Defaults to True.

    Returns:
        `export_dir`.
    """
    tfrs = require_tfrs()
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
    serving = _RetrievalServing(model, vocabulary, k, exclude_history, tfrs)
    signatures = {"serve_strings": serving.serve_strings}
    signatures["serving_default"] = (
        serving.serve if serving.integer_ids else serving.serve_strings
    )
    if not serving.integer_ids:
        del signatures["serve_strings"]
    # TFRS's BruteForce is a Keras Model without a config: tf_keras warns on save
    # that it defaults to an empty one (the SavedModel does not use it), and logs
    # where the assets went. Neither is the user's concern.
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")
    try:
        # Written beside and moved in whole: a server never sees half a model.
        with written_whole(export_dir) as folder:
            tf.saved_model.save(serving, str(folder), signatures=signatures)
    finally:
        logger.setLevel(level)
    return export_dir
