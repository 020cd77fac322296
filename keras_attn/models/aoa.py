"""The Attention-over-Attention reader for cloze-style questions (Cui et al. 2017),
and training it on `keras_attn.text.cloze` questions against the baselines."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from keras_attn._validation import check_positive_int, check_rate
from keras_attn.backend import keras, register, tf
from keras_attn.layers.aoa import AttentionOverAttention
from keras_attn.layers.text import CandidateSum, PredictedLabel, TokenMask
from keras_attn.models.base import FunctionalModel, Parts, arguments_of
from keras_attn.text.cloze import (
    ClozeQuestion,
    cloze_accuracy,
    encode_cloze,
    most_frequent_candidate,
)

__all__ = [
    "AoAReader",
    "AoAReaderResult",
    "build_aoa_reader",
    "candidate_crossentropy",
    "fit_aoa_reader",
]


@register
class AoAReader(FunctionalModel):
    """Attention-over-Attention reader for cloze-style questions.

    Shared word embeddings -> bidirectional GRU encodings of the document and the
    query -> `AttentionOverAttention` document scores `s` -> the sum of `s` over each
    candidate's positions in the document -> the most probable candidate. Id 0 is
    padding everywhere. The parts are attributes: `token_embedding` (shared by the
    document and the query), `document_encoder`, `query_encoder`,
    `attention_over_attention`, `candidate_sum`.

    Paper: "Attention-over-Attention Neural Networks for Reading Comprehension", Cui
    et al., ACL 2017.

    Args:
        vocabulary_size: int. Number of token ids.
        embedding_dim: int. Embedding width. Defaults to 128.
        units: int. GRU units per direction. Defaults to 128.
        dropout: float. Dropout on the embeddings. Defaults to 0.1.
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
    """

    def __init__(
        self,
        vocabulary_size: int,
        embedding_dim: int = 128,
        units: int = 128,
        dropout: float = 0.1,
        name: str = "aoa_reader",
        **kwargs,
    ):
        arguments = arguments_of(locals())
        for arg in ("vocabulary_size", "embedding_dim", "units"):
            check_positive_int(arg, locals()[arg])
        check_rate("dropout", dropout)
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
            attention_over_attention=AttentionOverAttention(
                name="attention_over_attention"
            ),
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
        scores = parts.attention_over_attention(
            d, q, document_mask=document_mask, query_mask=query_mask
        )  # (batch, doc_len)
        probabilities = parts.candidate_sum(scores, document, candidates)
        self._init_functional(
            {"document_ids": document, "query_ids": query, "candidate_ids": candidates},
            {
                "probabilities": probabilities,
                "label": parts.predicted_label(probabilities),
            },
            parts,
            arguments,
            name,
            **kwargs,
        )

    def scores_model(self):
        """A model (sharing the weights) from the same inputs to the document
        scores `s` `(batch, doc_len)` of `AttentionOverAttention`."""
        return keras.Model(
            self.inputs, self.attention_over_attention.output, name=f"{self.name}_s"
        )


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
    """A trained AoA reader and its test accuracy beside the two baselines."""

    model: object
    vocabulary: list[str]
    test_accuracy: float
    most_frequent_accuracy: float
    random_accuracy: float
    train_questions: int
    test_questions: int
    test_predictions: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    history: dict = field(default_factory=dict)
    seconds: float = 0.0

    def summary(self) -> dict:
        return {
            "aoa_reader": self.test_accuracy,
            "most_frequent": self.most_frequent_accuracy,
            "random": self.random_accuracy,
        }


def _dataset(features, answers, batch_size, shuffle, seed):
    """Batches of questions of similar document length, trimmed to the longest
    real document and query of the batch rounded up to a multiple of 32 (the GRUs
    run fewer steps, and the few distinct shapes keep retracing rare)."""
    order = np.argsort((features["document_ids"] != 0).sum(axis=1), kind="stable")
    x = {k: v[order] for k, v in features.items()}
    ds = tf.data.Dataset.from_tensor_slices((x, answers[order])).batch(batch_size)

    def trim(x, y):
        def longest(ids):
            real = tf.reduce_max(tf.reduce_sum(tf.cast(ids != 0, tf.int32), axis=1))
            return tf.minimum(-(-real // 32) * 32, tf.shape(ids)[1])

        x = dict(x)
        x["document_ids"] = x["document_ids"][:, : longest(x["document_ids"])]
        x["query_ids"] = x["query_ids"][:, : longest(x["query_ids"])]
        return x, {"probabilities": y}

    ds = ds.map(trim).cache()
    if shuffle:
        ds = ds.shuffle(len(answers) // batch_size + 1, seed=seed)
    return ds.prefetch(tf.data.AUTOTUNE), order


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
) -> AoAReaderResult:
    """Trains an `AoAReader` on cloze questions and reports test accuracy.

    The loss is `candidate_crossentropy` on the `probabilities` output (Adam,
    gradient norm clipped at `clipnorm` as in Cui et al. 2017). The reader predicts
    the candidate with the most attention mass; its test accuracy is reported
    beside the most-frequent-candidate baseline and chance on the same questions.

    Args:
        train_questions, test_questions: lists of `ClozeQuestion` (make the test
            questions from held-out documents, with `vocabulary=vocabulary`).
        vocabulary: list of str from `build_cloze_vocabulary` on training documents.
        epochs, batch_size, learning_rate, clipnorm: training settings.
        embedding_dim, units, dropout: passed to `build_aoa_reader`.
        seed: int. Random seed. Defaults to 0.
        verbose: Keras verbosity. Defaults to 0.

    Returns:
        An `AoAReaderResult`.
    """
    check_positive_int("epochs", epochs)
    check_positive_int("batch_size", batch_size)
    keras.utils.set_random_seed(seed)
    start = time.perf_counter()
    vocabulary = list(vocabulary)
    train_x, train_y = encode_cloze(train_questions, vocabulary)
    test_x, test_y = encode_cloze(test_questions, vocabulary)
    train_ds, _ = _dataset(train_x, train_y, batch_size, True, seed)
    test_ds, test_order = _dataset(test_x, test_y, batch_size, False, seed)
    model = build_aoa_reader(
        len(vocabulary), embedding_dim=embedding_dim, units=units, dropout=dropout
    )
    optimizer = keras.optimizers.Adam(learning_rate, clipnorm=clipnorm)
    model.compile(optimizer=optimizer, loss={"probabilities": candidate_crossentropy})
    history = model.fit(train_ds, epochs=epochs, verbose=verbose)
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
        history=dict(history.history),
        seconds=time.perf_counter() - start,
    )
