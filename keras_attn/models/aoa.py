"""The cloze readers: Attention-over-Attention (Cui et al. 2017) or the Attention
Sum Reader's dot-product head (Kadlec et al. 2016), on GRU encoders (`AoAReader`) or
a shared BERT encoder (`BertClozeReader`), and training them on
`keras_attn.text.cloze` questions against the baselines."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from keras_attn import distribute, training
from keras_attn._validation import (
    check_choice,
    check_positive_int,
    check_rate,
)
from keras_attn.backend import keras, register, tf
from keras_attn.layers.aoa import (
    AttentionOverAttention,
    CandidateSum,
    DocumentAttention,
)
from keras_attn.layers.labels import PredictedLabel
from keras_attn.layers.token_ids import PlaceholderMask, SegmentIds, TokenMask
from keras_attn.models.base import (
    FunctionalModel,
    Parts,
    arguments_of,
    output_tensors,
)
from keras_attn.models.bert import check_backbone
from keras_attn.precision import check_mixed_precision, policy_scope
from keras_attn.text.cloze import (
    ClozeQuestion,
    cloze_accuracy,
    encode_cloze,
    most_frequent_candidate,
)

__all__ = [
    "READER_HEADS",
    "AoAReader",
    "AoAReaderResult",
    "BertClozeReader",
    "build_aoa_reader",
    "candidate_crossentropy",
    "fit_aoa_reader",
]


#: The readers' heads: Attention-over-Attention, or the Attention Sum Reader's
#: dot product of the placeholder's encoding with each document word.
READER_HEADS = ("aoa", "dot")

#: The id of `PLACEHOLDER` in a `build_cloze_vocabulary` vocabulary (and of
#: `[MASK]` in its `cloze_bert_vocabulary`).
PLACEHOLDER_ID = 2


def _check_head(head, placeholder_id, vocabulary_size):
    check_choice("head", head, READER_HEADS)
    check_positive_int("placeholder_id", placeholder_id)
    if placeholder_id >= vocabulary_size:
        raise ValueError(
            f"`placeholder_id` must be an id of the vocabulary ({vocabulary_size} "
            f"ids). Received: placeholder_id={placeholder_id}"
        )


def _head_layers(head: str, placeholder_id: int) -> dict:
    """The layers of a head, by attribute name."""
    if head == "aoa":
        return {
            "attention_over_attention": AttentionOverAttention(
                name="attention_over_attention"
            )
        }
    return {
        "placeholder_mask": PlaceholderMask(placeholder_id, name="placeholder_mask"),
        "document_attention": DocumentAttention(name="document_attention"),
    }


def _document_scores(parts, head, d, q, document_mask, query_mask, query):
    """The head's `s` `(batch, doc_len)` from the encodings `d` and `q`."""
    if head == "aoa":
        return parts.attention_over_attention(
            d, q, document_mask=document_mask, query_mask=query_mask
        )
    return parts.document_attention(
        d, q, document_mask=document_mask, query_mask=parts.placeholder_mask(query)
    )


def _scores_layer(reader):
    """The head's layer, whose output is the document scores `s`."""
    if reader.head == "aoa":
        return reader.attention_over_attention
    return reader.document_attention


def _scores_model(reader):
    """A model (sharing the weights) from the reader's inputs to its `s`."""
    s = _scores_layer(reader).output
    return keras.Model(reader.inputs, s, name=f"{reader.name}_s")


def _explain_model(reader):
    """A model from the reader's inputs to its outputs and `document_scores`."""
    outputs = {
        **output_tensors(reader),
        "document_scores": _scores_layer(reader).output,
    }
    return keras.Model(reader.inputs, outputs, name=f"{reader.name}_explain")


@register
class AoAReader(FunctionalModel):
    """Attention-over-Attention reader for cloze-style questions.

    Shared word embeddings -> bidirectional GRU encodings of the document and the
    query -> `AttentionOverAttention` document scores `s` -> the sum of `s` over each
    candidate's positions in the document -> the most probable candidate. Id 0 is
    padding everywhere. With `head="dot"` the scores are the Attention Sum Reader's
    instead (`DocumentAttention`: the softmax over the document of each word's dot
    product with the query's encoding at the placeholder), the same encoders
    otherwise. The parts are attributes: `token_embedding` (shared by the document
    and the query), `document_encoder`, `query_encoder`, the head's
    `attention_over_attention` (or `placeholder_mask` and `document_attention`),
    `candidate_sum`.

    Paper: "Attention-over-Attention Neural Networks for Reading Comprehension", Cui
    et al., ACL 2017; "Text Understanding with the Attention Sum Reader Network",
    Kadlec et al., ACL 2016.

    Args:
        vocabulary_size: int. Number of token ids.
        embedding_dim: int. Embedding width. Defaults to 128.
        units: int. GRU units per direction. Defaults to 128.
        dropout: float. Dropout on the embeddings. Defaults to 0.1.
        head: str. "aoa" (Attention-over-Attention) or "dot" (the Attention Sum
            Reader's). Defaults to "aoa".
        placeholder_id: int. The id of the query's blank, read by the "dot" head.
            Defaults to 2 (`PLACEHOLDER` in `build_cloze_vocabulary`).
        name: str. Model name. Defaults to "aoa_reader".

    Call arguments:
        inputs: `{"document_ids": (batch, doc_len), "query_ids": (batch, query_len),
            "candidate_ids": (batch, candidates)}`, int32.

    Returns:
        `{"probabilities": (batch, candidates)` (the attention mass of each
        candidate), `"label": (batch,)` (the index of the best candidate)`}`.

    Example:

    >>> import numpy as np
    >>> reader = AoAReader(30, embedding_dim=8, units=4)
    >>> out = reader({"document_ids": np.ones((2, 7), "int32"),
    ...               "query_ids": np.ones((2, 3), "int32"),
    ...               "candidate_ids": np.ones((2, 4), "int32")})
    >>> out["probabilities"].shape, out["label"].shape
    (TensorShape([2, 4]), TensorShape([2]))
    >>> reader.token_embedding.output_dim
    8
    >>> AoAReader(30, embedding_dim=8, units=4, head="dot").document_attention.name
    'document_attention'
    """

    def __init__(
        self,
        vocabulary_size: int,
        embedding_dim: int = 128,
        units: int = 128,
        dropout: float = 0.1,
        head: str = "aoa",
        placeholder_id: int = PLACEHOLDER_ID,
        name: str = "aoa_reader",
        **kwargs,
    ):
        arguments = arguments_of(locals())
        for arg in ("vocabulary_size", "embedding_dim", "units"):
            check_positive_int(arg, locals()[arg])
        check_rate("dropout", dropout)
        _check_head(head, placeholder_id, vocabulary_size)
        parts = Parts(
            document_mask=TokenMask(name="document_mask"),
            query_mask=TokenMask(name="query_mask"),
            token_embedding=keras.layers.Embedding(
                vocabulary_size, embedding_dim, name="embedding"
            ),
            embedding_dropout=keras.layers.Dropout(dropout, name="embedding_dropout"),
            document_encoder=keras.layers.Bidirectional(
                keras.layers.GRU(units, return_sequences=True), name="document_encoder"
            ),
            query_encoder=keras.layers.Bidirectional(
                keras.layers.GRU(units, return_sequences=True), name="query_encoder"
            ),
            **_head_layers(head, placeholder_id),
            candidate_sum=CandidateSum(name="probabilities"),
            predicted_label=PredictedLabel(name="label"),
        )

        document = keras.Input(shape=(None,), dtype="int32", name="document_ids")
        query = keras.Input(shape=(None,), dtype="int32", name="query_ids")
        candidates = keras.Input(shape=(None,), dtype="int32", name="candidate_ids")
        document_mask = parts.document_mask(document)
        query_mask = parts.query_mask(query)
        d = parts.embedding_dropout(parts.token_embedding(document))
        q = parts.embedding_dropout(parts.token_embedding(query))
        d = parts.document_encoder(d, mask=document_mask)
        q = parts.query_encoder(q, mask=query_mask)
        scores = _document_scores(
            parts, head, d, q, document_mask, query_mask, query
        )  # (batch, doc_len)
        self._init_functional(
            *_reader_graph(parts, document, query, candidates, scores),
            parts,
            arguments,
            name,
            ("head", "placeholder_id"),
            **kwargs,
        )

    def scores_model(self):
        """A model (sharing the weights) from the same inputs to the document
        scores `s` `(batch, doc_len)` of the head (`AttentionOverAttention` or
        `DocumentAttention`)."""
        return _scores_model(self)

    def explain_model(self):
        """A model (sharing the weights) from the same inputs to the outputs and
        `"document_scores"` `(batch, doc_len)`, the head's attention over the
        document (see `scores_model`)."""
        return _explain_model(self)


@register
class BertClozeReader(FunctionalModel):
    """A cloze reader on a (pretrained) `BertBackbone`: AoA or dot-product head.

    The document and the query are each encoded by the one `backbone` (segment 0,
    the same weights for both), and its `sequence_output`s go to the head:
    `AttentionOverAttention` (`head="aoa"`, Cui et al. 2017) or the Attention Sum
    Reader's `DocumentAttention` of the query's encoding at the placeholder
    (`head="dot"`, Kadlec et al. 2016); `CandidateSum` then sums the document
    scores `s` over each candidate's occurrences. The backbone reads the cloze
    word ids: build it with `vocabulary_size=len(cloze_bert_vocabulary(vocab))`
    (the placeholder's id is `[MASK]` there, so masked-LM pretraining on the
    training documents teaches the encoder what the blank of a query is). A
    `BertBackbone` takes fixed-length ids, so documents and queries are both
    `(batch, backbone.sequence_length)` (`encode_cloze` with both lengths; 0 pads).

    The backbone object is used as is (not copied) and travels in the config, so a
    `.keras` file reloads both. The parts are attributes: `backbone`, the head's
    `attention_over_attention` (or `placeholder_mask` and `document_attention`),
    `candidate_sum`.

    Args:
        backbone: a `BertBackbone`.
        head: str. "aoa" or "dot". Defaults to "aoa".
        placeholder_id: int. The id of the query's blank, read by the "dot" head.
            Defaults to 2 (`PLACEHOLDER` in `build_cloze_vocabulary`).
        name: str. Defaults to "bert_cloze_reader".

    Call arguments:
        inputs: `{"document_ids": (batch, sequence_length), "query_ids": (batch,
            sequence_length), "candidate_ids": (batch, candidates)}`, int32.

    Returns:
        `{"probabilities": (batch, candidates)` (the attention mass of each
        candidate), `"label": (batch,)` (the index of the best candidate)`}`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import BertBackbone
    >>> bert = BertBackbone(30, sequence_length=8, hidden_dim=8, num_layers=1,
    ...                     num_heads=2)
    >>> reader = BertClozeReader(bert, head="dot")
    >>> out = reader({"document_ids": np.ones((2, 8), "int32"),
    ...               "query_ids": np.array([[2, 5] + [0] * 6] * 2, "int32"),
    ...               "candidate_ids": np.ones((2, 4), "int32")})
    >>> out["probabilities"].shape, reader.backbone is bert
    (TensorShape([2, 4]), True)
    """

    def __init__(
        self,
        backbone,
        head: str = "aoa",
        placeholder_id: int = PLACEHOLDER_ID,
        name: str = "bert_cloze_reader",
        **kwargs,
    ):
        if isinstance(backbone, dict):  # from a config
            backbone = keras.saving.deserialize_keras_object(backbone)
        check_backbone(backbone)
        _check_head(head, placeholder_id, backbone.vocabulary_size)
        arguments = {"head": head, "placeholder_id": placeholder_id}
        parts = Parts(
            backbone=backbone,
            segment_ids=SegmentIds(name="segment_ids"),
            document_mask=TokenMask(name="document_mask"),
            query_mask=TokenMask(name="query_mask"),
            **_head_layers(head, placeholder_id),
            candidate_sum=CandidateSum(name="probabilities"),
            predicted_label=PredictedLabel(name="label"),
        )

        length = backbone.sequence_length
        document = keras.Input(shape=(length,), dtype="int32", name="document_ids")
        query = keras.Input(shape=(length,), dtype="int32", name="query_ids")
        candidates = keras.Input(shape=(None,), dtype="int32", name="candidate_ids")

        def encode(ids):
            inputs = {"token_ids": ids, "segment_ids": parts.segment_ids(ids)}
            return backbone(inputs)["sequence_output"]  # (batch, length, hidden)

        scores = _document_scores(
            parts,
            head,
            encode(document),
            encode(query),
            parts.document_mask(document),
            parts.query_mask(query),
            query,
        )  # (batch, length)
        self._init_functional(
            *_reader_graph(parts, document, query, candidates, scores),
            parts,
            arguments,
            name,
            tuple(arguments),
            **kwargs,
        )

    def get_config(self):
        return {
            **super().get_config(),
            "backbone": keras.saving.serialize_keras_object(self.backbone),
        }

    def scores_model(self):
        """A model (sharing the weights) from the same inputs to the document
        scores `s` `(batch, sequence_length)` of the head."""
        return _scores_model(self)

    def explain_model(self):
        """A model (sharing the weights) from the same inputs to the outputs and
        `"document_scores"` `(batch, sequence_length)` (see `scores_model`)."""
        return _explain_model(self)


def build_aoa_reader(*args, **kwargs) -> AoAReader:
    """`build_aoa_reader(...)` is `AoAReader(...)`: the same arguments.

    Example:

    >>> reader = build_aoa_reader(30, embedding_dim=8, units=4)
    >>> type(reader).__name__, reader.get_config()["units"]
    ('AoAReader', 4)
    """
    return AoAReader(*args, **kwargs)


def candidate_crossentropy(y_true, y_pred):
    """Cross-entropy of the answer under the reader's mass normalized over the
    candidates: `-log(P(answer) / Σ_c P(c))`.

    The reader's `probabilities` are attention mass summed per candidate; they sum
    to the mass that falls on candidate words (below 1 when other document words
    get some). Normalizing turns them into a distribution over the candidates.
    Keras's own `sparse_categorical_crossentropy` on probabilities computes the same
    (it takes `log(clip(p, ε, 1 - ε))` as logits, and the softmax of `log p` is
    `p / Σ p`), except that a padding candidate (mass 0) counts as ε there and as
    nothing here. A row with no mass on any candidate gives `-log ε`, not NaN.

    Args:
        y_true: int `(batch,)` or `(batch, 1)`, the answer index.
        y_pred: float `(batch, candidates)`, the reader's `probabilities`.

    Returns:
        float `(batch,)`.
    """
    y_pred = tf.cast(y_pred, tf.float32)
    y_true = tf.reshape(tf.cast(y_true, tf.int32), [-1])
    epsilon = keras.backend.epsilon()
    total = tf.reduce_sum(y_pred, axis=-1)
    answer = tf.gather(y_pred, y_true, axis=1, batch_dims=1)
    return -tf.math.log((answer + epsilon) / (total + epsilon))


@dataclass
class AoAReaderResult:
    """A trained cloze reader and its test accuracy beside the two baselines.

    Like every `fit_*` helper's result it has the fit's Keras `History` as
    `.history` (its logs are `.history.history`; reading `.history` itself as
    that dict still works for one release, with a warning) and the model as
    `.model`.
    """

    model: object
    vocabulary: list[str]
    test_accuracy: float
    most_frequent_accuracy: float
    random_accuracy: float
    train_questions: int
    test_questions: int
    test_predictions: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    history: object = None
    seconds: float = 0.0

    def summary(self) -> dict:
        return {
            "aoa_reader": self.test_accuracy,
            "most_frequent": self.most_frequent_accuracy,
            "random": self.random_accuracy,
        }


def _dataset(features, answers, batch_size, shuffle, seed, trim=True):
    """Batches of questions of similar document length, trimmed to the longest
    real document and query of the batch rounded up to a multiple of 32 (the GRUs
    run fewer steps, and the few distinct shapes keep retracing rare); untrimmed
    with `trim=False` (a `BertClozeReader` takes its fixed length). `shuffle`:
    None for one epoch in order, or `(start_epoch, epochs)` for those epochs'
    orders one after the other (`_epoch_orders`)."""
    order = np.argsort((features["document_ids"] != 0).sum(axis=1), kind="stable")
    x = {k: v[order] for k, v in features.items()}
    ds = tf.data.Dataset.from_tensor_slices((x, answers[order])).batch(batch_size)

    def trimmed(x, y):
        if not trim:
            return x, {"probabilities": y}

        def longest(ids):
            real = tf.reduce_max(tf.reduce_sum(tf.cast(ids != 0, tf.int32), axis=1))
            return tf.minimum(-(-real // 32) * 32, tf.shape(ids)[1])

        x = dict(x)
        x["document_ids"] = x["document_ids"][:, : longest(x["document_ids"])]
        x["query_ids"] = x["query_ids"][:, : longest(x["query_ids"])]
        return x, {"probabilities": y}

    ds = ds.map(trimmed).cache()
    if shuffle:
        ds = _epoch_orders(ds, -(-len(answers) // batch_size), *shuffle, seed)
    return ds.prefetch(tf.data.AUTOTUNE), order


def _epoch_orders(batches, num_batches, start_epoch, epochs, seed):
    """Epochs `start_epoch .. epochs - 1` of `batches`, epoch `e` in an order drawn
    from `(seed, e)` only: a run resumed at an epoch sees the batches an
    uninterrupted one saw."""
    orders = [
        batches.shuffle(
            num_batches,
            seed=int(np.random.SeedSequence([seed, epoch]).generate_state(1)[0]),
            reshuffle_each_iteration=False,
        )
        for epoch in range(start_epoch, epochs)
    ]
    ds = orders[0]
    for order in orders[1:]:
        ds = ds.concatenate(order)
    return ds


def _check_lengths(questions, length, name):
    """No document or query longer than the backbone reads (truncating one could
    cut its answer out)."""
    longest = max(max(len(q.document), len(q.query)) for q in questions)
    if longest > length:
        raise ValueError(
            f"`{name}` must fit the backbone's sequence_length ({length} tokens). "
            f"Received: a document or query of {longest} tokens"
        )


def fit_aoa_reader(
    train_questions: Sequence[ClozeQuestion],
    test_questions: Sequence[ClozeQuestion],
    vocabulary: Sequence[str],
    epochs: int = 5,
    batch_size: int = 32,
    learning_rate: float = 1e-3,
    embedding_dim: int = 64,
    units: int = 64,
    dropout: float = 0.1,
    clipnorm: float | None = 5.0,
    seed: int = 0,
    verbose: int = 0,
    head: str = "aoa",
    model=None,
    callbacks=None,
    jit_compile: bool | str | None = "auto",
    strategy=None,
    tpu: str | None = None,
    backup_dir=None,
    checkpoint_dir=None,
    mixed_precision: str | None = None,
) -> AoAReaderResult:
    """Trains a cloze reader on cloze questions and reports test accuracy.

    The reader is `model` when given (an `AoAReader` or a `BertClozeReader`, e.g.
    on a pretrained backbone), otherwise a new `AoAReader` of `embedding_dim`,
    `units`, `dropout` and `head`, built under `strategy` and `mixed_precision`.
    The loss is `candidate_crossentropy` on the `probabilities` output (Adam,
    gradient norm clipped at `clipnorm` as in Cui et al. 2017). The reader
    predicts the candidate with the most attention mass; its test accuracy is
    reported beside the most-frequent-candidate baseline and chance on the same
    questions.

    Args:
        train_questions, test_questions: lists of `ClozeQuestion` (make the test
            questions from held-out documents, with `vocabulary=vocabulary`).
        vocabulary: list of str from `build_cloze_vocabulary` on training documents.
        epochs, batch_size, learning_rate, clipnorm: training settings
            (`batch_size` is the global batch under a strategy).
        embedding_dim, units, dropout, head: passed to `build_aoa_reader` (unused
            with `model`).
        seed: int. The initial weights of a reader built here, each epoch's order
            of the batches (drawn from `(seed, epoch)`) and the dropout
            (`keras_attn.training.seed_run`). Defaults to 0.
        verbose: Keras verbosity. Defaults to 0.
        model: optional reader to train. A `BertClozeReader` reads documents and
            queries padded to its backbone's `sequence_length`; a longer one raises
            ValueError. Build it inside `strategy.scope()` (and the policy's
            scope) to train it under them. Defaults to None.
        callbacks: optional list of Keras callbacks for `fit`.
        jit_compile: bool, or "auto" / None: Keras' own default (XLA where the
            model supports it under Keras 3; one program per trimmed batch shape),
            except for a bfloat16 model on a CPU (see `keras_attn.precision`).
            Defaults to "auto".
        strategy: a `tf.distribute.Strategy` or a `get_strategy` kind. A reader
            built here is built inside its scope; a given `model` must have been.
            None: the model's (the default strategy for one built here).
        tpu: str. TPU name for `strategy="tpu"`.
        backup_dir: str. `BackupAndRestore` directory: a run stopped and started
            again with the same arguments resumes after its last finished epoch,
            with that epoch's order of the batches.
        checkpoint_dir: str. The weights after each epoch go to
            `checkpoint_dir/epoch_NNN.weights.h5`.
        mixed_precision: str or None. The policy a reader built here is built
            under ("float32", "mixed_bfloat16", "mixed_float16"; the scores stay
            float32); a given `model` must have been built under it. None:
            float32, or the given model's. Defaults to None.

    Returns:
        An `AoAReaderResult` (`.history` the Keras `History`, `.model` the reader).
    """
    check_positive_int("epochs", epochs)
    check_positive_int("batch_size", batch_size)
    if model is not None and not isinstance(model, (AoAReader, BertClozeReader)):
        raise ValueError(
            "`model` must be an AoAReader or a BertClozeReader. Received: "
            f"model={type(model).__name__}"
        )
    if mixed_precision is not None:
        check_mixed_precision(mixed_precision)
    # Seeded before the reader is built: its initial weights too.
    epoch_seeds = training.seed_run(seed)
    start = time.perf_counter()
    vocabulary = list(vocabulary)
    length = None
    if isinstance(model, BertClozeReader):
        length = model.backbone.sequence_length
        _check_lengths(train_questions, length, "train_questions")
        _check_lengths(test_questions, length, "test_questions")
    # Resolved once: a "tpu" kind connects to the TPU.
    strategy = distribute.as_strategy(strategy, tpu)
    if model is None:
        with (
            (strategy or tf.distribute.get_strategy()).scope(),
            policy_scope(mixed_precision or "float32"),
        ):
            model = build_aoa_reader(
                len(vocabulary),
                embedding_dim=embedding_dim,
                units=units,
                dropout=dropout,
                head=head,
            )
    options = training.fit_options(
        model,
        "fit_aoa_reader",
        strategy=strategy,
        backup_dir=backup_dir,
        checkpoint_dir=checkpoint_dir,
        mixed_precision=mixed_precision,
        jit_compile=jit_compile,
        jit_default=None,
        callbacks=callbacks,
    )
    train_x, train_y = encode_cloze(train_questions, vocabulary, length, length)
    test_x, test_y = encode_cloze(test_questions, vocabulary, length, length)
    trim = length is None
    epoch_range = (options.start_epoch, max(epochs, options.start_epoch + 1))
    train_ds, _ = _dataset(train_x, train_y, batch_size, epoch_range, seed, trim)
    test_ds, test_order = _dataset(test_x, test_y, batch_size, None, seed, trim)
    with options.strategy.scope():
        model.compile(
            optimizer=keras.optimizers.Adam(learning_rate, clipnorm=clipnorm),
            loss={"probabilities": candidate_crossentropy},
            **options.compile_options(),
        )
    history = model.fit(
        train_ds,
        epochs=epochs,
        steps_per_epoch=-(-len(train_y) // batch_size),
        verbose=verbose,
        callbacks=[epoch_seeds, *options.callbacks],
    )
    probabilities = model.predict(test_ds.map(lambda x, y: x), verbose=0)[
        "probabilities"
    ]
    predictions = np.empty(len(test_y), "int64")
    predictions[test_order] = probabilities.argmax(axis=-1)
    return AoAReaderResult(
        model=model,
        vocabulary=vocabulary,
        test_accuracy=cloze_accuracy(predictions, test_questions),
        most_frequent_accuracy=cloze_accuracy(
            most_frequent_candidate(test_questions), test_questions
        ),
        random_accuracy=float(np.mean([1 / len(q.candidates) for q in test_questions])),
        train_questions=len(train_questions),
        test_questions=len(test_questions),
        test_predictions=predictions,
        history=training.readable_as_logs(history, "AoAReaderResult.history"),
        seconds=time.perf_counter() - start,
    )


def _reader_graph(parts, document, query, candidates, scores):
    """A cloze reader's `(inputs, outputs)`: the attention-sum over each
    candidate's occurrences of the document scores, and its label."""
    probabilities = parts.candidate_sum(scores, document, candidates)
    inputs = {"document_ids": document, "query_ids": query, "candidate_ids": candidates}
    outputs = {
        "probabilities": probabilities,
        "label": parts.predicted_label(probabilities),
    }
    return inputs, outputs
