"""One call from raw documents to a trained text classifier (used by the CLI, the
quickstart, the benchmark and the notebooks): `fit_text_classifier` returns a
`TextClassifier`, the model with its tokenizer and class names
(`keras_attn.serving.export` writes one for TF Serving)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from keras_attn import distribute
from keras_attn._validation import check_choice
from keras_attn.backend import keras, tf
from keras_attn.layers.text import HashedNgrams
from keras_attn.models.han import build_han_classifier
from keras_attn.models.text import (
    build_text_serving_model,
    compile_text_classifier,
    wide_layer,
)
from keras_attn.models.transformer_classifier import build_transformer_classifier
from keras_attn.precision import (
    check_mixed_precision,
    policy_scope,
    resolve_jit_compile,
)
from keras_attn.text.datasets import stratified_split
from keras_attn.text.tokenizers import (
    SentenceTokenizer,
    Tokenizer,
    build_vocabulary,
    split_sentences,
    split_words,
)

__all__ = [
    "LIMIT_CAPS",
    "MODELS",
    "MODEL_DEFAULTS",
    "WIDE_DEFAULTS",
    "TextClassifier",
    "corpus_limits",
    "fit_text_classifier",
]

MODELS = ("han", "transformer", "bert")

#: Upper bounds of the limits `corpus_limits` reads off a corpus (memory and time
#: on a CPU): HAN reads at most `han_tokens` = sentences x words per document.
LIMIT_CAPS = {
    "max_sentences": 48,
    "max_words": 40,
    "han_tokens": 1024,
    "sequence_length": 512,
    "max_ngrams": 4096,
}


@dataclass
class TextClassifier:
    """A trained classifier with what serving it needs."""

    model: object
    tokenizer: object
    class_names: list[str]
    history: dict = field(default_factory=dict)
    val_accuracy: float | None = None
    seconds_per_epoch: float | None = None
    #: Indices into the training `texts` carved off for early stopping (None when
    #: validation data was given or no early stopping ran).
    validation_indices: np.ndarray | None = None
    #: The settings the defaults resolved to (limits, vocabulary, wide, ...).
    settings: dict = field(default_factory=dict)

    def serving_model(self):
        """The raw-string model (`{"text"}` -> `{"probabilities", "label"}`);
        `keras_attn.serving.export(classifier, base_dir)` exports it."""
        return build_text_serving_model(self.model, self.tokenizer, self.class_names)

    def model_inputs(self, texts):
        """The model's inputs for raw strings: token ids, and n-gram ids when wide.

        These are what training fed the model (and what `han_attention_model` of
        it takes).
        """
        texts = tf.constant(list(texts))
        ids = self.tokenizer(texts)
        wide = wide_layer(self.model)
        if wide is None:
            return ids
        return {"token_ids": ids, "ngram_ids": wide.hasher()(texts)}

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


#: Model widths `fit_text_classifier` uses unless given (`**model_kwargs`): sized so
#: a default fit on a few thousand documents takes minutes on 2 CPU cores (the
#: settings benchmarks/bench_text.py used before the wide part; the wide part
#: carries the bag-of-n-grams signal). The builders' own defaults are the papers'.
MODEL_DEFAULTS = {
    "han": {"embedding_dim": 64, "units": 25, "attention_units": 50},
    "transformer": {
        "hidden_dim": 64,
        "num_layers": 1,
        "num_heads": 2,
        "dropout": 0.3,
        "pooling": "attention",
    },
    "bert": {},
}


#: The wide part's settings in `fit_text_classifier` (over `NgramLinear`'s): chosen
#: on an inner 80/20 split of review_polarity's fitting part, the wide part alone
#: (benchmarks/RESULTS.md, bench_text): 10x step and n-gram dropout 0.5 reached
#: 0.809 there, 1x without dropout 0.754 after 15 epochs, still climbing.
WIDE_DEFAULTS = {"scale": 10.0, "dropout": 0.5}


def corpus_limits(
    texts, percentile: float = 95.0, caps: dict | None = None, batch_size: int = 512
) -> dict:
    """Length limits that fit a corpus: a high percentile of its documents, capped.

    Sentences and words are split as `SentenceTokenizer` and the word tokenizers
    split them (`split_sentences`, `split_words`), n-grams as `HashedNgrams`
    (unigrams and bigrams inside sentences). Each limit is the `percentile` of its
    count over `texts` (per document; words per sentence over all sentences),
    rounded up, at least 1, at most its cap in `caps` (`LIMIT_CAPS` by default). If
    `max_sentences · max_words` exceeds `caps["han_tokens"]`, `max_sentences` is
    lowered to fit (the words of a sentence are kept, later sentences dropped).

    Args:
        texts: list of str, the training documents.
        percentile: float in (0, 100]. Defaults to 95.
        caps: optional dict overriding entries of `LIMIT_CAPS`.
        batch_size: int. Documents split per TensorFlow call. Defaults to 512.

    Returns:
        dict with `max_sentences`, `max_words` (HAN), `sequence_length` (the
        Transformer, words of the flat document) and `max_ngrams` (the wide part).

    Example:

    >>> corpus_limits(["One two. Three.", "Four five six."], percentile=100)
    {'max_sentences': 2, 'max_words': 4, 'sequence_length': 5, 'max_ngrams': 8}
    """
    if (
        isinstance(percentile, bool)
        or not isinstance(percentile, (int, float))
        or not 0 < percentile <= 100
    ):
        raise ValueError(
            f"`percentile` must be a number in (0, 100]. Received: "
            f"percentile={percentile!r}"
        )
    texts = list(texts)
    if not texts:
        raise ValueError("`texts` must not be empty. Received: texts=[]")
    caps = {**LIMIT_CAPS, **(caps or {})}
    sentences, words, flat, ngrams = [], [], [], []
    hasher = HashedNgrams()
    for start in range(0, len(texts), batch_size):
        batch = tf.constant(texts[start : start + batch_size])
        split = split_words(split_sentences(batch))  # (batch, sentences, words)
        sentences.append(split.row_lengths().numpy())
        words.append(split.values.row_lengths().numpy())
        flat.append(split.merge_dims(1, 2).row_lengths().numpy())
        ngrams.append(hasher.ngrams(batch).row_lengths().numpy())

    def pick(counts, cap):
        counts = np.concatenate(counts)
        value = np.percentile(counts, percentile) if counts.size else 1
        return int(min(max(np.ceil(value), 1), cap))

    limits = {
        "max_sentences": pick(sentences, caps["max_sentences"]),
        "max_words": pick(words, caps["max_words"]),
        "sequence_length": pick(flat, caps["sequence_length"]),
        "max_ngrams": pick(ngrams, caps["max_ngrams"]),
    }
    budget = max(caps["han_tokens"] // limits["max_words"], 1)
    limits["max_sentences"] = min(limits["max_sentences"], budget)
    return limits


def _vocabulary_limits(texts) -> tuple[int, int]:
    """`(max_tokens, min_count)` for a corpus: min count 3 from 500k words on.

    ../shared/FINDINGS.md: min count 3 beat 2 for HAN on 1,280 reviews (~1M words);
    a smaller corpus keeps words seen twice.
    """
    total = 0
    for start in range(0, len(texts), 512):
        total += int(
            split_words(tf.constant(texts[start : start + 512])).values.shape[0]
        )
    return 50000, (3 if total >= 500_000 else 2)


class _WarmUp(keras.callbacks.Callback):
    """Raises the learning rate linearly from ~0 to its value over `steps` batches."""

    def __init__(self, learning_rate, steps):
        super().__init__()
        self.learning_rate = float(learning_rate)
        self.steps = max(int(steps), 1)
        self._step = 0

    def on_train_batch_begin(self, batch, logs=None):
        if self._step < self.steps:
            self._step += 1
            rate = self.learning_rate * self._step / self.steps
            self.model.optimizer.learning_rate.assign(rate)


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
    epochs: int = 20,
    batch_size: int = 32,
    learning_rate: float = 1e-3,
    vocabulary=None,
    max_tokens: int | None = None,
    min_count: int | None = None,
    max_sentences: int | None = None,
    max_words: int | None = None,
    sequence_length: int | None = None,
    patience: int | None = 5,
    verbose: int = 0,
    seed: int = 0,
    wide: bool | dict | None = None,
    validation_fraction: float = 0.1,
    percentile: float = 95.0,
    strategy=None,
    tpu: str | None = None,
    backup_dir=None,
    checkpoint_dir=None,
    mixed_precision: str = "float32",
    jit_compile: bool | str | None = "auto",
    **model_kwargs,
) -> TextClassifier:
    """Tokenizes, builds and trains a HAN, Transformer or BERT-style classifier.

    HAN uses a word vocabulary built from `texts` (or `vocabulary`, e.g.
    "bert-base-uncased" for WordPiece). The Transformer uses words the same way over
    the flat sequence; "bert" is a BERT-style encoder (WordPiece with a BERT vocab,
    learned positions, `[CLS]` pooling, GELU) trained from scratch.

    Defaults fit the data: limits left as None come from `corpus_limits` (the 95th
    percentile of the training documents, capped by `LIMIT_CAPS`); model widths not
    given in `**model_kwargs` come from `MODEL_DEFAULTS` (CPU-sized); the vocabulary
    keeps at most 50,000 words, seen at least 3 times in a corpus of 500k words or
    more, else twice; HAN and the Transformer get a wide part (`wide=None`: hashed
    word uni- and bigrams, `NgramLinear`, logits added to the deep model's). Early
    stopping watches validation accuracy with `patience` and restores the best
    weights; without `validation_texts` a stratified `validation_fraction` of the
    *training* documents is carved off for it (their indices are
    `result.validation_indices`), so documents scored elsewhere never steer
    training. The learning rate halves when the validation loss has not improved
    for 2 epochs (down to 1/32 of it); the Transformer and "bert" warm it up
    linearly over the first epoch.

    Args:
        texts: list of str. Training documents.
        labels: list of labels (any hashable; sorted to class indices).
        model: str. "han", "transformer" or "bert". Defaults to "han".
        validation_texts, validation_labels: optional validation data (for early
            stopping); when absent, carved from `texts`.
        epochs: int. At most this many epochs. Defaults to 20.
        batch_size, learning_rate: training settings (Adam, 1e-3).
        vocabulary: optional vocabulary (list, vocab.txt path or shipped name).
        max_tokens, min_count: vocabulary limits when building one (None: from the
            corpus size, see above).
        max_sentences, max_words: HAN's limits (None: from the corpus).
        sequence_length: the Transformer's limit (None: from the corpus).
        patience: early-stopping patience on validation accuracy, or None (no
            validation, no early stopping). Defaults to 5.
        verbose: Keras verbosity. Defaults to 0.
        seed: random seed (weights, shuffling, the validation carve). Defaults to 0.
        wide: bool, dict or None. The wide part (see `build_han_classifier`); None
            is True for "han" and "transformer", False for "bert". A dict gives
            `NgramLinear` arguments over `WIDE_DEFAULTS`; its `max_ngrams` defaults
            to the corpus's.
        validation_fraction: float in (0, 1). Share of `texts` carved off for early
            stopping when no validation data is given. Defaults to 0.1.
        percentile: float. Percentile of `corpus_limits`. Defaults to 95.
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
        mixed_precision: str. The Keras dtype policy the model is built under
            (`keras_attn.precision.POLICIES`); the probabilities stay float32 and
            the global policy is restored afterwards. Defaults to "float32".
        jit_compile: bool, or "auto" / None: Keras' own default, except no XLA
            for "mixed_bfloat16" on a machine without GPU or TPU (see
            `keras_attn.precision`). Defaults to "auto".
        **model_kwargs: passed to the model builder (over `MODEL_DEFAULTS`).

    Returns:
        A `TextClassifier`.

    Example:

    >>> from keras_attn.text import load_review_sample
    >>> texts, labels = load_review_sample()
    >>> clf = fit_text_classifier(texts[::8], labels[::8], epochs=1,
    ...                           embedding_dim=8, units=4, attention_units=8)
    >>> clf.predict(["A wonderful, moving film."])[0] in ("neg", "pos")
    True
    """
    check_choice("model", model, MODELS)
    check_mixed_precision(mixed_precision)
    jit_compile = resolve_jit_compile(jit_compile, mixed_precision, default=None)
    _check_pairs("texts", texts, "labels", labels)
    if validation_texts is not None or validation_labels is not None:
        _check_pairs(
            "validation_texts", validation_texts, "validation_labels", validation_labels
        )
    if (
        isinstance(validation_fraction, bool)
        or not isinstance(validation_fraction, (int, float))
        or not 0 < validation_fraction < 1
    ):
        raise ValueError(
            "`validation_fraction` must be a float in (0, 1). Received: "
            f"validation_fraction={validation_fraction!r}"
        )
    strategy = distribute.as_strategy(strategy, tpu) or tf.distribute.get_strategy()
    keras.utils.set_random_seed(seed)
    model_kwargs = {**MODEL_DEFAULTS[model], **model_kwargs}
    texts, labels = list(texts), list(labels)
    class_names = sorted({str(v) for v in labels})
    if len(class_names) < 2:
        raise ValueError(
            f"`labels` must hold at least 2 classes. Received: {class_names}"
        )
    index = {c: i for i, c in enumerate(class_names)}

    def encode(values):
        return np.array([index[str(v)] for v in values], "int32")

    # Early stopping on documents carved from the training ones, never scored ones.
    validation_indices = None
    if validation_texts is None and patience:
        train_idx, validation_indices = stratified_split(
            labels, validation_fraction, seed=seed
        )
        validation_texts = [texts[i] for i in validation_indices]
        validation_labels = [labels[i] for i in validation_indices]
        texts = [texts[i] for i in train_idx]
        labels = [labels[i] for i in train_idx]

    # Limits from the training part of the corpus (what the model will read).
    limits = corpus_limits(texts, percentile)
    max_sentences = max_sentences or limits["max_sentences"]
    max_words = max_words or limits["max_words"]
    sequence_length = sequence_length or limits["sequence_length"]
    if wide is None:
        wide = model != "bert"
    if wide is True:
        wide = {}
    if isinstance(wide, dict):
        wide = {"max_ngrams": limits["max_ngrams"], **WIDE_DEFAULTS, **wide}

    if model == "bert":
        vocabulary = vocabulary or "bert-base-uncased"
    method = "word"
    if vocabulary is None:
        default_tokens, default_count = _vocabulary_limits(texts)
        max_tokens = max_tokens or default_tokens
        min_count = min_count or default_count
        vocabulary = build_vocabulary(texts, max_tokens=max_tokens, min_count=min_count)
    elif isinstance(vocabulary, str) and vocabulary.startswith("bert"):
        method = "wordpiece"
        if model != "han":
            sequence_length = min(sequence_length + 2, LIMIT_CAPS["sequence_length"])
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
    compile_kwargs = {} if jit_compile is None else {"jit_compile": jit_compile}
    # The model's and the optimizer's variables; its layers take the policy.
    with strategy.scope(), policy_scope(mixed_precision):
        if model == "han":
            net = build_han_classifier(
                tokenizer.vocabulary_size,
                len(class_names),
                max_sentences,
                max_words,
                wide=wide,
                **model_kwargs,
            )
        else:
            net = build_transformer_classifier(
                tokenizer.vocabulary_size,
                len(class_names),
                sequence_length,
                wide=wide,
                **model_kwargs,
            )
        compile_text_classifier(net, learning_rate=learning_rate, **compile_kwargs)
    # The wide part's ids come from the layer the serving model also uses.
    wide_part = wide_layer(net)
    hasher = wide_part.hasher() if wide_part is not None else None
    # TPUs compile one program per shape: every batch full.
    static = isinstance(strategy, tf.distribute.TPUStrategy)

    def dataset(xs, ys, shuffle):
        # Tokenized and hashed once (not every epoch), on the host: the ids are
        # small next to the model, and no string reaches the replicas.
        y = encode(ys)
        ids = _tokenize_all(tokenizer, list(xs))
        if hasher is not None:
            ids = {"token_ids": ids, "ngram_ids": _tokenize_all(hasher, list(xs))}
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
    if model != "han":
        callbacks.append(_WarmUp(learning_rate, -(-len(texts) // batch_size)))
    if validation_texts is not None:
        val_ds = dataset(validation_texts, validation_labels, shuffle=False).cache()
        callbacks.append(
            keras.callbacks.ReduceLROnPlateau(
                monitor="val_loss",
                factor=0.5,
                patience=2,
                min_lr=learning_rate / 32,
            )
        )
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
        validation_indices=validation_indices,
        settings={
            "max_sentences": max_sentences,
            "max_words": max_words,
            "sequence_length": sequence_length,
            "vocabulary_size": tokenizer.vocabulary_size,
            "max_tokens": max_tokens,
            "min_count": min_count,
            "wide": _wide_settings(wide_part),
            "epochs_run": len(timer.times),
        },
    )
    if val_ds is not None:
        probs = net.predict(val_ds.map(lambda x, y: x), verbose=0)["probabilities"]
        result.val_accuracy = float(
            np.mean(probs.argmax(-1) == encode(validation_labels))
        )
    return result


def _wide_settings(layer):
    """The hashing and combining settings of a wide part, or False without one."""
    if layer is None:
        return False
    config = layer.get_config()
    keys = ("num_buckets", "combiner", "dropout", "scale", "ngram_widths", "max_ngrams")
    return {k: config[k] for k in keys}


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
