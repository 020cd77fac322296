"""One call from raw documents to a trained text classifier (used by the CLI, the
quickstart, the benchmark and the notebooks)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from keras_attn._validation import check_choice
from keras_attn.backend import keras, tf
from keras_attn.text.tokenizers import SentenceTokenizer, Tokenizer, build_vocabulary

__all__ = ["MODELS", "TextClassifier", "fit_text_classifier", "stratified_split"]

MODELS = ("han", "transformer", "bert")


@dataclass
class TextClassifier:
    """A trained classifier with what serving it needs."""

    model: object
    tokenizer: object
    class_names: list[str]
    history: dict = field(default_factory=dict)
    val_accuracy: float | None = None
    seconds_per_epoch: float | None = None

    def serving_model(self):
        """The raw-string model (`{"text"}` -> `{"probabilities", "label"}`)."""
        from keras_attn.models.text import build_text_serving_model

        return build_text_serving_model(self.model, self.tokenizer, self.class_names)

    def export(
        self, base_dir, version=None, overwrite=False, warmup=None, explain=False
    ):
        """Exports for TF Serving as `base_dir/<version>/`; returns the path.

        `warmup` (raw strings) and `explain` as for `export_text_classifier`."""
        from keras_attn.models.text import export_text_classifier

        return export_text_classifier(
            self.model,
            self.tokenizer,
            base_dir,
            version=version,
            class_names=self.class_names,
            overwrite=overwrite,
            warmup=warmup,
            explain=explain,
        )

    def predict(self, texts) -> list[str]:
        """Predicted class names of a list of raw strings (an empty list gives
        an empty list)."""
        if isinstance(texts, (str, bytes)):
            raise ValueError(
                "`texts` must be a list of strings, not one string. "
                f"Received: texts={texts!r}"
            )
        texts = list(texts)
        if not texts:
            return []
        out = self.serving_model()({"text": tf.constant(texts, tf.string)})
        return [v.decode("utf-8") for v in out["label"].numpy()]


def _check_pairs(x_name, xs, y_name, ys):
    # One label per text: a length mismatch must not fail later as a shape error.
    if isinstance(xs, (str, bytes)) or xs is None or ys is None:
        raise ValueError(
            f"`{x_name}` and `{y_name}` must be lists of the same length. "
            f"Received: {x_name}={xs!r:.80}, {y_name}={ys!r:.80}"
        )
    if len(xs) != len(ys):
        raise ValueError(
            f"`{x_name}` and `{y_name}` must have the same length. Received: "
            f"{len(xs)} {x_name} and {len(ys)} {y_name}"
        )


def stratified_split(labels, validation_fraction=0.2, seed=0):
    """Indices `(train, validation)` of a split stratified by label."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    train, val = [], []
    for value in sorted(set(labels.tolist())):
        idx = np.flatnonzero(labels == value)
        rng.shuffle(idx)
        n_val = int(round(len(idx) * validation_fraction))
        val.extend(idx[:n_val].tolist())
        train.extend(idx[n_val:].tolist())
    return np.array(sorted(train)), np.array(sorted(val))


class _EpochTimer(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.times = []

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.times.append(time.perf_counter() - self._start)


def fit_text_classifier(
    texts,
    labels,
    model: str = "han",
    validation_texts=None,
    validation_labels=None,
    epochs: int = 10,
    batch_size: int = 32,
    learning_rate: float = 1e-3,
    vocabulary=None,
    max_tokens: int = 30000,
    min_count: int = 2,
    max_sentences: int = 16,
    max_words: int = 32,
    sequence_length: int = 256,
    patience: int | None = 5,
    verbose: int = 0,
    seed: int = 0,
    strategy=None,
    tpu: str | None = None,
    backup_dir=None,
    checkpoint_dir=None,
    **model_kwargs,
) -> TextClassifier:
    """Tokenizes, builds and trains a HAN, Transformer or BERT-style classifier.

    HAN uses a word vocabulary built from `texts` (or `vocabulary`, e.g.
    "bert-base-uncased" for WordPiece). The Transformer uses words the same way over
    the flat sequence; "bert" is a BERT-style encoder (WordPiece with a BERT vocab,
    learned positions, `[CLS]` pooling, GELU) trained from scratch. With validation
    data and `patience`, training stops early and restores the best weights.

    Args:
        texts: list of str. Training documents.
        labels: list of labels (any hashable; sorted to class indices).
        model: str. "han", "transformer" or "bert". Defaults to "han".
        validation_texts, validation_labels: optional validation data.
        epochs, batch_size, learning_rate: training settings.
        vocabulary: optional vocabulary (list, vocab.txt path or shipped name).
        max_tokens, min_count: vocabulary limits when building one.
        max_sentences, max_words: HAN's limits.
        sequence_length: the Transformer's limit.
        patience: early-stopping patience on validation accuracy, or None.
        verbose: Keras verbosity. Defaults to 0.
        seed: random seed. Defaults to 0.
        strategy: a `tf.distribute.Strategy` or a kind of
            `keras_attn.distribute.get_strategy`; the model is built inside its
            scope. Tokenization runs on the host, before training; `batch_size`
            is the global batch. Defaults to none.
        tpu: str. TPU name for `strategy="tpu"`.
        backup_dir: str. `BackupAndRestore` directory: a killed run started again
            with the same arguments resumes from its last finished epoch with that
            epoch's data order (shuffled by `(seed, epoch)`).
        checkpoint_dir: str. Weights after each epoch go to
            `checkpoint_dir/epoch_NNN.weights.h5`.
        **model_kwargs: passed to the model builder.

    Returns:
        A `TextClassifier`.
    """
    from keras_attn import distribute
    from keras_attn.models.text import (
        build_han_classifier,
        build_transformer_classifier,
        compile_text_classifier,
    )

    check_choice("model", model, MODELS)
    _check_pairs("texts", texts, "labels", labels)
    if validation_texts is not None or validation_labels is not None:
        _check_pairs(
            "validation_texts", validation_texts, "validation_labels", validation_labels
        )
    strategy = distribute.as_strategy(strategy, tpu) or tf.distribute.get_strategy()
    keras.utils.set_random_seed(seed)
    class_names = sorted({str(v) for v in labels})
    if len(class_names) < 2:
        raise ValueError(
            f"`labels` must hold at least 2 classes. Received: {class_names}"
        )
    index = {c: i for i, c in enumerate(class_names)}

    def encode(values):
        return np.array([index[str(v)] for v in values], "int32")

    if model == "bert":
        vocabulary = vocabulary or "bert-base-uncased"
    method = "word"
    if vocabulary is None:
        vocabulary = build_vocabulary(texts, max_tokens=max_tokens, min_count=min_count)
    elif isinstance(vocabulary, str) and vocabulary.startswith("bert"):
        method = "wordpiece"
    # The tokenizer runs on the host (tf.data, serving): outside the scope.
    if model == "han":
        tokenizer = SentenceTokenizer(
            vocabulary, max_sentences=max_sentences, max_words=max_words, method=method
        )
    else:
        tokenizer = Tokenizer(
            vocabulary, sequence_length=sequence_length, method=method
        )
    if model == "bert":
        model_kwargs = {
            "positions": "learned",
            "pooling": "cls",
            "activation": "gelu",
            **model_kwargs,
        }
    with strategy.scope():  # the model's and the optimizer's variables
        if model == "han":
            net = build_han_classifier(
                tokenizer.vocabulary_size,
                len(class_names),
                max_sentences,
                max_words,
                **model_kwargs,
            )
        else:
            net = build_transformer_classifier(
                tokenizer.vocabulary_size,
                len(class_names),
                sequence_length,
                **model_kwargs,
            )
        compile_text_classifier(net, learning_rate=learning_rate)
    # TPUs compile one program per shape: every batch full.
    static = isinstance(strategy, tf.distribute.TPUStrategy)

    def dataset(xs, ys, shuffle):
        # Tokenized once (not every epoch), on the host: the ids are small next to
        # the model, and no string reaches the replicas.
        y = encode(ys)
        ids = _tokenize_all(tokenizer, list(xs))
        if shuffle and backup_dir is not None:
            ds = distribute.epoch_batches(
                (ids, y),
                len(y),
                batch_size,
                seed=seed,
                start_epoch=distribute.completed_epochs(backup_dir),
                drop_remainder=static,
            )
        else:
            ds = tf.data.Dataset.from_tensor_slices((ids, y))
            if shuffle:
                ds = ds.shuffle(len(y), seed=seed, reshuffle_each_iteration=True)
            ds = ds.batch(batch_size, drop_remainder=static)
        ds = ds.map(
            lambda t, y: (t, {"probabilities": y, "label": y}),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        return ds.prefetch(tf.data.AUTOTUNE)

    train_ds = dataset(texts, labels, shuffle=True)
    steps = None
    if backup_dir is not None:  # an endless stream: `fit` counts the epochs
        steps = len(texts) // batch_size if static else -(-len(texts) // batch_size)
    val_ds = None
    timer = _EpochTimer()
    callbacks = distribute.fit_callbacks([timer], backup_dir, checkpoint_dir)
    if validation_texts is not None:
        val_ds = dataset(validation_texts, validation_labels, shuffle=False).cache()
        if patience:
            callbacks.append(
                keras.callbacks.EarlyStopping(
                    monitor="val_probabilities_accuracy"
                    if _metric_prefixed(net)
                    else "val_accuracy",
                    mode="max",
                    patience=patience,
                    restore_best_weights=True,
                )
            )
    history = net.fit(
        train_ds,
        validation_data=val_ds,
        epochs=epochs,
        steps_per_epoch=steps,
        callbacks=callbacks,
        verbose=verbose,
    )
    result = TextClassifier(
        net,
        tokenizer,
        class_names,
        history=dict(history.history),
        seconds_per_epoch=float(np.mean(timer.times)) if timer.times else None,
    )
    if val_ds is not None:
        probs = net.predict(val_ds.map(lambda x, y: x), verbose=0)["probabilities"]
        result.val_accuracy = float(
            np.mean(probs.argmax(-1) == encode(validation_labels))
        )
    return result


def _tokenize_all(tokenizer, texts, batch_size=256):
    """Token ids of all `texts` as one NumPy array (tokenized in batches)."""
    parts = [
        tokenizer.tokenize(tf.constant(texts[i : i + batch_size])).numpy()
        for i in range(0, len(texts), batch_size)
    ]
    return np.concatenate(parts) if parts else np.zeros((0,), "int64")


def _metric_prefixed(net) -> bool:
    """Whether the accuracy of the `probabilities` output is logged with a prefix.

    Keras 3 and tf_keras both prefix per-output metrics with the output name when a
    model has several outputs.
    """
    return len(net.outputs) > 1
