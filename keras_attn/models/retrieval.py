"""Sequential retrieval: a two-tower model whose query tower reads the history.

`HistoryEncoder` (the query tower) embeds a user's item history, adds learned
positions and runs causal Transformer encoder blocks over it (SASRec, Kang & McAuley,
ICDM 2018), padding masked; the state at the last (most recent) position, or an
attention pooling of all states, is the query. `ItemEncoder` (the candidate tower)
embeds an item's id and its genres. `SequentialRetrieval(query_tower,
candidate_tower, task)` takes both towers as objects and trains them with a
retrieval task: by default keras_attn's `RetrievalTask` (an in-batch softmax with
the logQ correction and accidental hits removed), which runs under Keras 3 and
under Keras 2 alike; under Keras 2 a `tfrs.tasks.Retrieval` works as the task too,
for code that mixes in TensorFlow Recommenders. `build_sequential_retrieval` is the
short spelling from flat arguments. `keras_attn.serving.export_retrieval_index`
writes the served form (TensorFlow alone at serving time).

Items are indices 1..num_items (0 is padding); `keras_attn.datasets.
load_movielens_sequences` makes such examples from MovieLens-100K. `top_k_metrics`
scores any (examples, items) score matrix by recall@k and NDCG@k with per-user
bootstrap intervals, and `most_popular_scores` is the baseline to beat.
"""

from __future__ import annotations

import warnings

import numpy as np

from keras_attn import training
from keras_attn._deprecation import moved
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
from keras_attn.backend import (
    keras,
    register,
    scale_loss,
    tf,
    unscale_gradients,
)
from keras_attn.layers.pooling import POOLINGS
from keras_attn.layers.pooling import HistoryPooling as _HistoryPooling
from keras_attn.layers.position import PositionEmbedding
from keras_attn.layers.retrieval import BruteForceTopK, RetrievalTask
from keras_attn.layers.transformer import TransformerEncoderBlock
from keras_attn.models.base import FunctionalModel, Parts, arguments_of

__all__ = [
    "HistoryEncoder",
    "ItemEncoder",
    "POOLINGS",
    "SequentialRetrieval",
    "build_sequential_retrieval",
    "fit_retrieval_model",
    "most_popular_scores",
    "pack_histories",
    "top_k_metrics",
]


#: Names that lived here until 0.x, and where they are now.
@register
class HistoryEncoder(FunctionalModel):
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

    Its parts are attributes: `item_embedding`, `position_embedding`, `blocks`,
    `final_norm`, `history_pooling`.

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
        arguments = arguments_of(locals())
        check_positive_int("num_items", num_items)
        check_positive_int("history_length", history_length)
        check_positive_int("embedding_dim", embedding_dim)
        check_int("num_layers", num_layers, minimum=0)
        check_positive_int("intermediate_dim", intermediate_dim, allow_none=True)
        check_rate("dropout", dropout)
        check_choice("pooling", pooling, POOLINGS)
        history = keras.Input((history_length,), dtype="int32", name="history")
        parts = Parts(
            item_embedding=keras.layers.Embedding(
                num_items + 1,
                embedding_dim,
                mask_zero=True,
                # Item vectors of norm about 1 at the start, as the positions'.
                embeddings_initializer=keras.initializers.RandomNormal(
                    stddev=embedding_dim**-0.5
                ),
                name="item_embedding",
            ),
            position_embedding=PositionEmbedding(history_length, name="position"),
            blocks=[
                TransformerEncoderBlock(
                    num_heads=num_heads,
                    intermediate_dim=intermediate_dim or embedding_dim,
                    dropout=dropout,
                    normalize_first=True,
                    name=f"block_{i}",
                )
                for i in range(num_layers)
            ],
            final_norm=keras.layers.LayerNormalization(epsilon=1e-5, name="final_norm"),
            history_pooling=_HistoryPooling(
                pooling, units=embedding_dim, name="pooling"
            ),
        )
        items = parts.item_embedding(history)  # (batch, history_length, dim), masked
        x = keras.layers.Add(name="add_positions")(
            [items, parts.position_embedding(items)]
        )
        x = keras.layers.Dropout(dropout, name="embedding_dropout")(x)
        for block in parts.blocks:
            x = block(x, use_causal_mask=True)
        query = parts.history_pooling(parts.final_norm(x))  # (batch, dim)
        self._init_functional(
            {"history": history},
            query,
            parts,
            arguments,
            name,
            settings=tuple(arguments),
            **kwargs,
        )


@register
class ItemEncoder(FunctionalModel):
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

    Its parts are attributes: `id_embedding`, `genre_table`, `genre_dense`,
    `output_dense`.

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
        arguments = arguments_of(locals())
        del arguments["item_genres"]  # in the weights, not the config
        check_positive_int("num_items", num_items)
        check_positive_int("num_genres", num_genres)
        check_positive_int("embedding_dim", embedding_dim)
        item = keras.Input((), dtype="int32", name="item")
        parts = Parts(
            id_embedding=keras.layers.Embedding(
                num_items + 1, embedding_dim, name="id_embedding"
            ),
            # A lookup of the genre multi-hot by index: a frozen table.
            genre_table=keras.layers.Embedding(
                num_items + 1,
                num_genres,
                embeddings_initializer="zeros",
                trainable=False,
                name="genre_table",
            ),
            genre_dense=keras.layers.Dense(embedding_dim, name="genre_dense"),
            output_dense=keras.layers.Dense(embedding_dim, name="output_dense"),
        )
        joined = keras.layers.Concatenate(name="join")(
            [parts.id_embedding(item), parts.genre_dense(parts.genre_table(item))]
        )
        self._init_functional(
            {"item": item},
            parts.output_dense(joined),
            parts,
            arguments,
            name,
            settings=tuple(arguments),
            **kwargs,
        )
        if item_genres is not None:
            self.set_item_genres(item_genres)

    def set_item_genres(self, item_genres) -> None:
        """Writes the multi-hot genre table `(num_items + 1, num_genres)`."""
        table = np.asarray(item_genres, dtype="float32")
        expected = (self.num_items + 1, self.num_genres)
        check_shape("item_genres", table.shape, expected, "(num_items + 1, num_genres)")
        self.genre_table.set_weights([table])


#: The flat arguments of the old `SequentialRetrieval(num_items, ...)` call.
_FLAT_ARGUMENTS = (
    "num_items",
    "num_genres",
    "item_genres",
    "history_length",
    "embedding_dim",
    "num_layers",
    "num_heads",
    "intermediate_dim",
    "dropout",
    "pooling",
    "temperature",
    "remove_accidental_hits",
)


def _as_part(value):
    """A layer or model from itself or its serialized config (None stays None)."""
    if isinstance(value, dict) and "class_name" in value:
        return keras.layers.deserialize(value)
    return value


def _serialize(layer):
    config = keras.layers.serialize(layer)
    config.pop("build_config", None)  # the model builds its parts by calling them
    return config


@register
class SequentialRetrieval(FunctionalModel):
    """A two-tower retrieval model: a query tower of the history, a candidate
    tower of the item, and the task that trains them.

    Called on `{"history": (batch, history_length)}` it returns the query
    embeddings (the query tower's output); `candidate_embeddings()` gives every
    item's, `recommend` the top items of histories. Training (`fit`, or
    `fit_retrieval_model`) reads batches `{"history", "item"[,
    "item_probability"]}` and minimizes the task's loss on the batch's query and
    candidate embeddings: the in-batch softmax of `RetrievalTask` by default.
    Under Keras 2 the task may also be TensorFlow Recommenders' `tfrs.tasks.
    Retrieval` (called the same way, with `compute_metrics=False`).

    The towers, the task and `num_items` are attributes; a `.keras` file keeps
    them all (the genre table is among the candidate tower's weights) when the
    task is a `RetrievalTask`; with a TFRS task keep the weights with
    `save_weights`. `keras_attn.serving.export_retrieval_index` writes the served
    form.

    Args:
        query_tower: a model from `{"history": (batch, history_length)}` item
            indices to `(batch, dim)`, e.g. a `HistoryEncoder`.
        candidate_tower: a model from `{"item": (batch,)}` item indices to
            `(batch, dim)`, e.g. an `ItemEncoder`.
        task: the retrieval task. Defaults to `RetrievalTask(
            remove_accidental_hits=True)`.
        num_items: int. Item indices run 1..num_items. Defaults to the candidate
            tower's `num_items`.
        name: str. Defaults to "sequential_retrieval".

    The flat form of 0.x, `SequentialRetrieval(num_items, num_genres=...,
    history_length=..., ...)`, still builds the same model (through
    `build_sequential_retrieval`) for one release, with a DeprecationWarning.

    Example:

    >>> import numpy as np
    >>> model = SequentialRetrieval(
    ...     HistoryEncoder(num_items=20, history_length=4, embedding_dim=8,
    ...                    num_layers=1),
    ...     ItemEncoder(num_items=20, num_genres=2, embedding_dim=8))
    >>> tuple(model({"history": np.array([[0, 3, 5, 2]])}).shape)
    (1, 8)
    >>> model.num_items, model.history_length, type(model.task).__name__
    (20, 4, 'RetrievalTask')
    """

    def __init__(
        self,
        query_tower=None,
        candidate_tower=None,
        task=None,
        num_items: int | None = None,
        name: str = "sequential_retrieval",
        **kwargs,
    ):
        flat = {k: kwargs.pop(k) for k in _FLAT_ARGUMENTS if k in kwargs}
        if query_tower is None or isinstance(query_tower, int):
            if isinstance(query_tower, int):
                flat["num_items"] = query_tower
            if num_items is not None:
                flat["num_items"] = num_items
            query_tower, candidate_tower, task, num_items = _flat_parts(
                candidate_tower, task, flat
            )
        elif flat:
            raise TypeError(
                "SequentialRetrieval takes its towers as objects: "
                f"{sorted(flat)} are arguments of build_sequential_retrieval"
            )
        query_tower = _as_part(query_tower)
        candidate_tower = _as_part(candidate_tower)
        task = _as_part(task)
        for argument, tower, key in [
            ("query_tower", query_tower, "history"),
            ("candidate_tower", candidate_tower, "item"),
        ]:
            if not isinstance(tower, keras.Model):
                raise ValueError(
                    f"`{argument}` must be a Keras model taking "
                    f"{{{key!r}: ...}}. Received: {argument}={tower!r}"
                )
        if num_items is None:
            num_items = getattr(candidate_tower, "num_items", None)
        check_positive_int("num_items", num_items)
        if task is None:
            task = RetrievalTask(remove_accidental_hits=True, name="task")
        history_length = _input_length(query_tower, "history")
        history = keras.Input((history_length,), dtype="int32", name="history")
        query = query_tower({"history": history})
        parts = Parts(
            query_tower=query_tower, candidate_tower=candidate_tower, task=task
        )
        arguments = {"num_items": num_items}
        self._init_functional(
            {"history": history},
            query,
            parts,
            arguments,
            name,
            settings=("num_items",),
            **kwargs,
        )
        self.history_length = history_length
        self.loss_tracker = keras.metrics.Mean(name="loss")

    def get_config(self):
        if not isinstance(self.task, RetrievalTask):
            raise NotImplementedError(
                f"A SequentialRetrieval with a {type(self.task).__name__} task has "
                "no config: keep its weights with save_weights (a RetrievalTask "
                "saves to .keras)"
            )
        return {
            **super().get_config(),
            "query_tower": _serialize(self.query_tower),
            "candidate_tower": _serialize(self.candidate_tower),
            "task": _serialize(self.task),
        }

    @property
    def metrics(self):
        return [self.loss_tracker]

    def retrieval_loss(self, features, training=False):
        """The task's loss on a batch `{"history", "item"[, "item_probability"]}`;
        `item_probability` (each target's share of the training targets) turns on
        the sampling-bias correction of the in-batch softmax (logQ)."""
        query = self.query_tower({"history": features["history"]}, training=training)
        candidates = self.candidate_tower({"item": features["item"]}, training=training)
        arguments = {
            "candidate_sampling_probability": features.get("item_probability"),
            "candidate_ids": features["item"],
        }
        if not isinstance(self.task, RetrievalTask):
            # TFRS's task: its ids turn on nothing by themselves, and its
            # factorized metrics are not wanted in the training step.
            arguments["compute_metrics"] = False
        return self.task(query, candidates, training=training, **arguments)

    def train_step(self, data):
        with tf.GradientTape() as tape:
            loss = self.retrieval_loss(data, training=True)
            total = loss + tf.add_n(self.losses) if self.losses else loss
            scaled = scale_loss(self.optimizer, total)
        variables = self.trainable_variables
        gradients = unscale_gradients(self.optimizer, tape.gradient(scaled, variables))
        self.optimizer.apply_gradients(zip(gradients, variables))
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result()}

    def test_step(self, data):
        self.loss_tracker.update_state(self.retrieval_loss(data, training=False))
        return {"loss": self.loss_tracker.result()}

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

    def recommend(
        self,
        histories,
        k: int = 10,
        exclude_history: bool = True,
        batch_size: int = 1024,
    ):
        """Top-k `(indices, scores)`, each `(n, k)`, of histories `(n, T)` of item
        indices (0 = padding, any layout; the last `history_length` real items
        are encoded), searched exactly by `BruteForceTopK` over every item (the
        export's search); with `exclude_history`, no item of the history is
        recommended. Ties go to the lower index."""
        histories = np.asarray(histories, "int32")
        queries = self.query_embeddings(
            pack_histories(histories, self.history_length), batch_size
        )
        candidates = self.candidate_embeddings()[1:]  # row r: item r + 1
        top_k = BruteForceTopK(k=k, block_size=4096)
        indices, scores = [], []
        for start in range(0, len(histories), batch_size):
            part = slice(start, start + batch_size)
            # An item's row is its index - 1: padding (0) excludes nothing.
            exclude = histories[part] - 1 if exclude_history else None
            top_scores, rows = top_k(queries[part], candidates, exclude=exclude)
            indices.append(rows.numpy() + 1)
            scores.append(top_scores.numpy())
        return np.concatenate(indices), np.concatenate(scores)


def _input_length(tower, key: str) -> int:
    """The length of a tower's `key` input `(batch, length)`."""
    inputs = tower.input if isinstance(tower.input, dict) else {}
    shape = tuple(inputs[key].shape) if key in inputs else None
    if shape is None or len(shape) != 2 or shape[1] is None:
        raise ValueError(
            f"`query_tower` must take {{{key!r}: (batch, history_length)}}. "
            f"Received: inputs {getattr(tower, 'input', None)!r}"
        )
    return int(shape[1])


def _flat_parts(candidate_tower, task, flat):
    """The towers of the 0.x flat call `SequentialRetrieval(num_items, ...)`."""
    warnings.warn(
        "SequentialRetrieval(num_items, ...) with flat arguments is deprecated: "
        "pass the towers, SequentialRetrieval(HistoryEncoder(...), "
        "ItemEncoder(...)), or call build_sequential_retrieval(num_items, ...)",
        DeprecationWarning,
        stacklevel=3,
    )
    if candidate_tower is not None or task is not None:
        raise TypeError(
            "The flat SequentialRetrieval call takes its arguments by keyword "
            "after num_items"
        )
    if "num_items" not in flat:
        raise TypeError("SequentialRetrieval needs query_tower and candidate_tower")
    model = build_sequential_retrieval(**flat)
    return model.query_tower, model.candidate_tower, model.task, model.num_items


def build_sequential_retrieval(
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
    num_hard_negatives: int | None = None,
    name: str = "sequential_retrieval",
) -> SequentialRetrieval:
    """A `SequentialRetrieval` of a `HistoryEncoder`, an `ItemEncoder` and a
    `RetrievalTask`, from flat arguments.

    Args:
        num_items: int. Item indices run 1..num_items.
        num_genres: int. Width of the genre multi-hot. Defaults to 19.
        item_genres: optional array `(num_items + 1, num_genres)`.
        history_length, embedding_dim, num_layers, num_heads, intermediate_dim,
            dropout, pooling: the `HistoryEncoder`'s (embedding_dim is also the
            `ItemEncoder`'s).
        temperature, remove_accidental_hits, num_hard_negatives: the
            `RetrievalTask`'s (accidental hits removed by default).
        name: str. Defaults to "sequential_retrieval".

    Example:

    >>> model = build_sequential_retrieval(num_items=20, num_genres=2,
    ...                                    history_length=4, embedding_dim=8,
    ...                                    num_layers=1)
    >>> model.query_tower.pooling, model.task.remove_accidental_hits
    ('last', True)
    """
    return SequentialRetrieval(
        HistoryEncoder(
            num_items,
            history_length=history_length,
            embedding_dim=embedding_dim,
            num_layers=num_layers,
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            dropout=dropout,
            pooling=pooling,
        ),
        ItemEncoder(
            num_items,
            num_genres=num_genres,
            embedding_dim=embedding_dim,
            item_genres=item_genres,
        ),
        RetrievalTask(
            temperature=temperature,
            remove_accidental_hits=remove_accidental_hits,
            num_hard_negatives=num_hard_negatives,
            name="task",
        ),
        name=name,
    )


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
    jit_compile: bool | str | None = "auto",
    strategy=None,
    tpu: str | None = None,
    backup_dir=None,
    checkpoint_dir=None,
    mixed_precision: str | None = None,
):
    """Trains a `SequentialRetrieval` on (history, next item) examples.

    The examples are shuffled each epoch and batched (the last, smaller batch is
    dropped: every in-batch softmax has `batch_size` candidates); Adam. Epoch `e`
    visits them in the order `keras_attn.training.epoch_batches` gives for
    `(seed, e)`, so a run resumed from `backup_dir` sees the batches an
    uninterrupted run saw.

    Args:
        model: a `SequentialRetrieval`.
        train: `SequenceExamples` or a dict with `history` `(n, history_length)`
            and `item` `(n,)`.
        epochs: int. Defaults to 10.
        batch_size: int. Examples (and candidates) per batch, the global batch
            under a strategy. Defaults to 256.
        learning_rate: float. Adam's. Defaults to 1e-3.
        sampling_correction: bool. Correct the in-batch softmax for popular items
            appearing more often as negatives: each candidate's logit minus the
            log of its share of the training targets (logQ; Yi et al., RecSys
            2019). Without it the model learns to push popular items down: on
            MovieLens-100K's validation part, recall@10 0.063 without and 0.197
            with it (benchmarks/RESULTS.md, bench_retrieval_select). Defaults to
            True.
        validation: optional examples like `train`: their loss after each epoch.
        seed: int. The data order, and the run's dropout
            (`keras_attn.training.seed_run`). Defaults to 0.
        callbacks: list of Keras callbacks.
        verbose: Keras' `fit` verbosity (2: one line per epoch). Defaults to
            "auto".
        jit_compile: bool, or "auto" / None: Keras' own default (XLA where the
            model supports it under Keras 3), except for a bfloat16 model on a CPU
            (see `keras_attn.precision`). Defaults to "auto".
        strategy: a `tf.distribute.Strategy` or a `get_strategy` kind; the model
            must have been built inside its `scope()`. None trains under the
            strategy the model was built under. Each replica's in-batch softmax
            then has its share of the batch as candidates.
        tpu: str. TPU name for `strategy="tpu"`.
        backup_dir: str. `BackupAndRestore` directory: a run stopped and started
            again with the same arguments resumes after its last finished epoch,
            with that epoch's data order.
        checkpoint_dir: str. The weights after each epoch go to
            `checkpoint_dir/epoch_NNN.weights.h5`.
        mixed_precision: str or None. The policy the model was built under (build
            the towers inside `keras_attn.precision.policy_scope(...)`); a
            different value raises. None reads it from the model. Defaults to None.

    Returns:
        The Keras `History` (`history.model` is `model`).
    """
    check_positive_int("epochs", epochs)
    check_positive_int("batch_size", batch_size)
    check_finite("learning_rate", learning_rate, minimum=0, exclusive_minimum=True)
    features = _features(train, model.history_length)
    n = len(features["item"])
    check_at_most("batch_size", batch_size, n, "the number of training examples")
    options = training.fit_options(
        model,
        "fit_retrieval_model",
        strategy=strategy,
        tpu=tpu,
        backup_dir=backup_dir,
        checkpoint_dir=checkpoint_dir,
        mixed_precision=mixed_precision,
        jit_compile=jit_compile,
        jit_default=None,
        callbacks=callbacks,
        seed=seed,
    )
    strategy = options.strategy
    probability = None
    if sampling_correction:
        counts = np.bincount(features["item"], minlength=model.num_items + 1)
        probability = (counts / n).astype("float32")

    def with_probability(part):
        part = dict(part)
        if probability is not None:
            part["item_probability"] = probability[part["item"]]
        return part

    features = with_probability(features)

    def dataset_fn(size, context):
        return training.epoch_batches(
            features, n, size, seed=seed, start_epoch=options.start_epoch
        )

    validation_data = None
    if validation is not None:
        validation_data = (
            tf.data.Dataset.from_tensor_slices(
                with_probability(_features(validation, model.history_length))
            )
            .batch(batch_size, drop_remainder=True)
            .prefetch(2)
        )
    with strategy.scope():
        model.compile(
            optimizer=keras.optimizers.Adam(learning_rate), **options.compile_options()
        )
    return model.fit(
        training.distribute_dataset(strategy, dataset_fn, batch_size),
        epochs=epochs,
        steps_per_epoch=n // batch_size,
        validation_data=validation_data,
        callbacks=options.callbacks,
        verbose=verbose,
        shuffle=False,  # the dataset shuffles (Keras 3 warns when asked again)
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


# The old spellings: the pooling is a layer, the index export a serving function.
__getattr__ = moved(
    __name__,
    {
        "HistoryPooling": "keras_attn.layers.pooling:HistoryPooling",
        "export_retrieval_index": "keras_attn.serving.retrieval:export_retrieval_index",
    },
)
