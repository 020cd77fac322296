"""One call from raw documents to a trained text classifier (used by the CLI, the
quickstart, the benchmark and the notebooks): `fit_text_classifier` returns a
`TextClassifier`, the model with its preprocessor and class names
(`keras_attn.serving.export` writes one for TF Serving).

The model kinds it trains are the rows of `TEXT_MODELS` and `PRETRAINED_MODELS`
(`TextModelKind`, in `text_kinds`), walked by one recipe of stages: the limits read
off the corpus (`text_limits`), the wide part fitted and mixed (`text_wide`), the
deep part pretrained and trained (`text_deep`). Their names are importable from
here too."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from keras_attn import distribute, training
from keras_attn._validation import check_choice, check_folder, check_int
from keras_attn.backend import keras, tf
from keras_attn.layers.labels import PredictedLabel
from keras_attn.models.bert_pretraining import BertPretrainer
from keras_attn.models.hf_checkpoint import HFCheckpoint
from keras_attn.models.text import build_text_serving_model, wide_layer

# The names moved out of this module stay importable from it (the benchmarks and
# tests import private ones too): hence the noqa on what this module does not use.
from keras_attn.models.text_deep import (  # noqa: F401
    _NO_DECAY,
    FINE_TUNING,
    _deep_inputs,
    _deep_optimizer,
    _deep_stage,
    _metric_prefixed,
    _predict,
    _pretrain,
)
from keras_attn.models.text_kinds import (  # noqa: F401
    MODEL_DEFAULTS,
    MODELS,
    PRETRAINED_MODELS,
    TEXT_MODELS,
    TextFit,
    TextModelKind,
    _bert_model,
    _bert_preprocessor,
    _checkpoint_preprocessor,
    _han_model,
    _han_preprocessor,
    _names,
    _pretrained_bert_model,
    _pretrained_bert_preprocessor,
    _pretrained_classifier,
    _sequence_tokenizer,
    _transformer_model,
    _transformer_preprocessor,
    _vocabulary,
    text_model_kind,
)
from keras_attn.models.text_limits import (  # noqa: F401
    LIMIT_CAPS,
    _vocabulary_limits,
    corpus_limits,
)
from keras_attn.models.text_preprocessor import (
    TextPreprocessor,
    model_structure,
    text_preprocessor,
)
from keras_attn.models.text_wide import (  # noqa: F401
    _MIX_TEMPERATURES,
    _MIX_WEIGHTS,
    WIDE_DEFAULTS,
    WIDE_FIT,
    WIDE_JOINT,
    WIDE_TRAININGS,
    _choose_mix,
    _fit_wide_part,
    _fold_mix,
    _mix_stage,
    _ngram_stage,
    _resolve_wide,
    _wide_settings,
    _wide_stage,
)
from keras_attn.precision import (
    check_mixed_precision,
    policy_scope,
    resolve_jit_compile,
)
from keras_attn.text.bert_tokenizer import TRUNCATE
from keras_attn.text.labels import early_stopping_split, text_labels

__all__ = [
    "FINE_TUNING",
    "LIMIT_CAPS",
    "MODELS",
    "MODEL_DEFAULTS",
    "PRETRAINED_MODELS",
    "TEXT_MODELS",
    "WIDE_DEFAULTS",
    "WIDE_FIT",
    "WIDE_JOINT",
    "WIDE_TRAININGS",
    "TextClassifier",
    "TextFit",
    "TextModelKind",
    "corpus_limits",
    "fit_text_classifier",
    "text_model_kind",
]


#: Texts per call of `TextClassifier.predict`'s function (bounds its memory).
PREDICT_BATCH = 256


@dataclass
class TextClassifier:
    """A trained classifier with what serving it needs: the model and its
    `preprocessor` (raw strings -> the model's inputs; made from `model` and
    `tokenizer` when not given)."""

    model: object
    tokenizer: object
    class_names: list[str]
    #: The Keras `History` of the deep part's fit (`.history` its logs by epoch,
    #: `.model` the network); read as that logs dict it still answers, with a
    #: `DeprecationWarning` (it was the dict until 0.x). None for a loaded one.
    history: object = None
    #: Accuracy on the validation part (given or carved). With the ensemble's
    #: wide refit it is the mix's, measured before the refit trained on that part.
    val_accuracy: float | None = None
    seconds_per_epoch: float | None = None
    #: Indices into the training `texts` carved off for early stopping (None when
    #: validation data was given or no early stopping ran).
    validation_indices: np.ndarray | None = None
    #: The settings the defaults resolved to (limits, vocabulary, wide, ...).
    settings: dict = field(default_factory=dict)
    #: The `TextPreprocessor` of `model` (its kind's class, `tokenizer` inside): what
    #: training fed the model, and what `predict`, the export and explain call.
    preprocessor: TextPreprocessor | None = None
    #: `predict`'s traced function (made on first use).
    _labels_fn: object = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.preprocessor is None and self.tokenizer is not None:
            self.preprocessor = text_preprocessor(self.model, self.tokenizer)

    def serving_model(self):
        """The raw-string model (`{"text"}` -> `{"probabilities", "label"}`);
        `keras_attn.serving.export(classifier, base_dir)` exports it."""
        return build_text_serving_model(self.model, self.preprocessor, self.class_names)

    def save(self, filepath) -> None:
        """Writes the classifier to one `.keras` file: its serving model, which
        holds the preprocessor, the model and the class names
        (`TextClassifier.load` reads it back; `history` and `settings` are not
        kept)."""
        self.serving_model().save(filepath)

    @classmethod
    def load(cls, filepath) -> TextClassifier:
        """The classifier `save` wrote: its model, `preprocessor` (and so its
        `tokenizer`) and class names, restored from their configs and weights."""
        serving = keras.models.load_model(filepath)
        layers = {type(layer): layer for layer in serving.layers}
        preprocessor = next(
            (x for x in layers.values() if isinstance(x, TextPreprocessor)), None
        )
        model = next((x for x in layers.values() if isinstance(x, keras.Model)), None)
        if preprocessor is None or model is None or PredictedLabel not in layers:
            names = sorted(t.__name__ for t in layers)
            raise ValueError(
                "`filepath` must be a file written by `TextClassifier.save` (a "
                "serving model with a TextPreprocessor). Received: "
                f"filepath={str(filepath)!r} with layers {names}"
            )
        class_names = layers[PredictedLabel].class_names
        return cls(
            model,
            preprocessor.tokenizer,
            list(class_names) if class_names is not None else None,
            preprocessor=preprocessor,
        )

    def model_inputs(self, texts):
        """The model's inputs for raw strings (`preprocessor`'s): token ids, and
        n-gram ids when wide (a BertClassifier: token ids and segment ids).

        These are what training fed the model (and what `han_attention_model` of
        it takes).
        """
        return self.preprocessor(tf.constant(list(texts)))

    def evaluate(self, texts, labels) -> dict:
        """Accuracy and mean log loss on labelled raw strings, through the
        `preprocessor` (labels read as `fit_text_classifier` reads them: "3" for
        3 and 3.0; every one must be a class of the classifier).

        Returns:
            `{"accuracy": float, "loss": float}`.
        """
        _check_pairs("texts", texts, "labels", labels)
        texts, labels = text_labels(texts, labels)
        unknown = sorted(set(labels) - set(self.class_names))
        if not texts or unknown:
            raise ValueError(
                f"`labels` must be classes of the classifier {self.class_names}. "
                f"Received: {len(texts)} documents"
                + (f", classes {unknown} not among them" if unknown else "")
            )
        index = {c: i for i, c in enumerate(self.class_names)}
        y = np.array([index[v] for v in labels])
        inputs = model_structure(self.preprocessor.inputs(texts))
        probabilities = _predict(self.model, inputs)
        chosen = np.maximum(probabilities[np.arange(len(y)), y], 1e-30)
        return {
            "accuracy": float(np.mean(probabilities.argmax(-1) == y)),
            "loss": float(-np.mean(np.log(chosen))),
        }

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
        parts = (self.model, self.preprocessor, tuple(self.class_names))
        if self._labels_fn is None or self._labels_fn[0] != parts:
            # Traced once for any number of texts (a new serving model per call
            # retraced every time); again only when the parts are replaced.
            serving = self.serving_model()
            labels_fn = tf.function(
                lambda text: serving({"text": text})["label"],
                input_signature=[tf.TensorSpec([None], tf.string)],
            )
            self._labels_fn = (parts, labels_fn)
        labels_fn = self._labels_fn[1]
        labels = []
        for start in range(0, len(texts), PREDICT_BATCH):
            batch = tf.constant(texts[start : start + PREDICT_BATCH], tf.string)
            labels += [v.decode("utf-8") for v in labels_fn(batch).numpy()]
        return labels


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


def fit_text_classifier(
    texts,
    labels,
    model: str = "han",
    validation_texts=None,
    validation_labels=None,
    epochs: int | None = None,
    batch_size: int = 32,
    learning_rate: float | None = None,
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
    wide_training: str = "ensemble",
    validation_fraction: float = 0.1,
    percentile: float = 95.0,
    strategy=None,
    tpu: str | None = None,
    backup_dir=None,
    checkpoint_dir=None,
    callbacks=None,
    mixed_precision: str = "float32",
    jit_compile: bool | str | None = "auto",
    pretrain_epochs: int = 0,
    pretrain_steps: int | None = None,
    checkpoint=None,
    truncate: str | None = None,
    **model_kwargs,
) -> TextClassifier:
    """Tokenizes, builds and trains a HAN, Transformer or BERT-style classifier.

    HAN uses a word vocabulary built from `texts` (or `vocabulary`, e.g.
    "bert-base-uncased" for WordPiece). The Transformer uses words the same way over
    the flat sequence; "bert" is a `BertClassifier` on a `BertBackbone` (WordPiece
    with the "bert-base-uncased" vocabulary by default, each document one segment:
    `[CLS] tokens [SEP]`, segment ids 0), trained from scratch, or with
    `pretrain_epochs` first pretrained on the training documents.

    Each kind is a row of `TEXT_MODELS` (with `checkpoint`, of `PRETRAINED_MODELS`;
    `text_model_kind` picks it): its preprocessor stage makes the kind's
    `TextPreprocessor` for the training documents, its model stage the classifier.
    Every kind then goes through the same recipe: preprocessor -> model ->
    [pretrain] -> [wide] -> deep -> [mix]; the result holds the preprocessor that
    fed training (`result.preprocessor`), which `predict` and the export call.

    In-domain pretraining ("bert", `pretrain_epochs` > 0): before fine-tuning, the
    encoder is trained with masked LM on the *training* documents only (never
    `validation_texts`, never the part carved off for early stopping):
    `pretraining_dataset(..., sentence_pairs=False)`, each document's whole text in
    `[CLS] window [SEP]` windows of the classifier's length, 15% of the tokens
    masked afresh on every pass; no NSP (a document is one segment, as the
    classifier reads it, and RoBERTa found MLM alone as good). A pretraining epoch
    is `pretrain_steps` batches, by default one pass over the windows; Adam at
    `learning_rate`, warmed up linearly over the first 10% of the steps. The MLM
    head is then dropped and the classifier fine-tunes the same encoder object.
    `result.settings["pretraining"]` holds the last epoch's MLM loss and accuracy,
    the steps and the seconds. With `backup_dir`, a restarted run pretrains again
    (seeded) before its fine-tuning is restored.

    Fine-tuning a pretrained checkpoint ("bert" with `checkpoint`, a Hugging Face
    folder of model type bert, distilbert or albert): the classifier is
    `BertClassifier.from_pretrained`'s encoder (the folder's own head when its
    `id2label` names the classes of `labels`, else a new one) and its tokenizer the
    folder's (`BertPreprocessor.from_pretrained`), which the export keeps in front.
    `sequence_length` is read off the corpus in WordPiece pieces (the `percentile`
    of the training documents', `[CLS]` and `[SEP]` included), at most
    `LIMIT_CAPS["bert_tokens"]` and the checkpoint's position count; a longer
    document loses its middle (its first quarter and last three quarters kept;
    `FINE_TUNING["truncate"]`), or with `truncate="end"` its end. Training
    follows `FINE_TUNING` (AdamW, linear warm-up and decay; `epochs` and
    `learning_rate` default to its values) with early stopping as below; the wide
    part is on by default and trained as for the other kinds.

    Defaults fit the data: limits left as None come from `corpus_limits` (the 95th
    percentile of the training documents, capped by `LIMIT_CAPS`); model widths not
    given in `**model_kwargs` come from `MODEL_DEFAULTS` (CPU-sized); the vocabulary
    keeps at most 50,000 words, seen at least 3 times in a corpus of 500k words or
    more, else twice. Early stopping watches validation accuracy with `patience`
    and restores the best weights; without `validation_texts` a stratified
    `validation_fraction` of the *training* documents is carved off for it (their
    indices are `result.validation_indices`), so documents scored elsewhere never
    steer training. The learning rate halves when the validation loss has not
    improved for 2 epochs (down to 1/32 of it); the Transformer and "bert" warm it
    up linearly over the first epoch (a checkpoint's fine-tuning: see above).

    HAN and the Transformer get a wide part by default (`wide=None`): a logistic
    regression on TF-IDF features of the word uni- and bigrams of at least
    `min_df` (2) training documents (`NgramVocabulary`; `wide={"min_df": None}`
    or a `num_buckets` hashes them all instead) (`NgramLinear` with
    `WIDE_DEFAULTS`, the IDF read off the training documents)
    whose logits are added to the deep model's, in one graph, so the export still
    takes raw strings. `wide_training` says how the two are trained:

    - "ensemble" (the default): the wide part is fitted alone (`WIDE_FIT`), then
      the deep part alone (early stopping as above), then the two are mixed:
      `logits = t·(α·wide + (1 - α)·deep)`, with the weight α and the temperature
      t that minimize the validation part's log loss (α = 0.5, t = 1 without a
      validation part). When that part was carved from `texts`, the wide part is
      then fitted again on all of `texts` (it needs no early stopping). α and t
      are folded into the two parts' last weights, so the model is wide + deep
      logits. A product of experts: each part is trained to its own best.
    - "residual": the wide part fitted alone, frozen, then the deep part trained on
      top of its logits (it learns what the linear model misses).
    - "joint": both trained together from the start (with `WIDE_JOINT`).

    Args:
        texts: list of str. Training documents.
        labels: list of labels (any hashable; sorted to class indices).
        model: str. "han", "transformer" or "bert". Defaults to "han".
        validation_texts, validation_labels: optional validation data (for early
            stopping and the mix); when absent, carved from `texts`.
        epochs: int. At most this many epochs (of the deep part). Defaults to 20
            (with `checkpoint`, `FINE_TUNING["epochs"]`).
        batch_size, learning_rate: training settings (Adam, 1e-3; with
            `checkpoint`, AdamW at `FINE_TUNING["learning_rate"]`).
        vocabulary: optional vocabulary (list, vocab.txt path or shipped name).
        max_tokens, min_count: vocabulary limits when building one (None: from the
            corpus size, see above).
        max_sentences, max_words: HAN's limits (None: from the corpus).
        sequence_length: the Transformer's and "bert"'s limit in words or pieces
            (None: from the corpus; "bert" then reads at most
            `LIMIT_CAPS["bert_tokens"]` pieces, `[CLS]` and `[SEP]` included).
        patience: early-stopping patience on validation accuracy, or None (no
            validation, no early stopping). Defaults to 5.
        verbose: Keras verbosity. Defaults to 0.
        seed: random seed (weights, shuffling, the validation carve). Defaults to 0.
        wide: bool, dict or None. The wide part (see `build_han_classifier`); None
            is True for "han", "transformer" and a checkpoint, False for "bert"
            from scratch (which has none: True raises). A dict gives
            `NgramLinear` arguments over `WIDE_DEFAULTS`; its `max_ngrams` defaults
            to the corpus's.
        wide_training: str. "ensemble", "residual" or "joint" (see above).
            Defaults to "ensemble".
        validation_fraction: float in (0, 1). Share of `texts` carved off for early
            stopping when no validation data is given. Defaults to 0.1.
        percentile: float. Percentile of `corpus_limits`. Defaults to 95.
        strategy: a `tf.distribute.Strategy` or a kind of
            `keras_attn.distribute.get_strategy`; the model is built inside its
            scope. Tokenization runs on the host, before training; `batch_size`
            is the global batch. Defaults to none.
        tpu: str. TPU name for `strategy="tpu"`.
        backup_dir: str. `BackupAndRestore` directory of the deep part's epochs: a
            killed run started again with the same arguments refits the wide part
            (seconds, seeded) and resumes the deep part from its last finished
            epoch with that epoch's data order (shuffled by `(seed, epoch)`).
        checkpoint_dir: str. The whole classifier's weights after each epoch go to
            `checkpoint_dir/epoch_NNN.weights.h5`.
        callbacks: optional list of Keras callbacks for the deep part's epochs,
            called after keras_attn's own (timer, backup, checkpoints, warm-up,
            learning-rate halving, early stopping). Defaults to None.
        mixed_precision: str. The Keras dtype policy the model is built under
            (`keras_attn.precision.POLICIES`); the probabilities stay float32 and
            the global policy is restored afterwards. Defaults to "float32".
        jit_compile: bool, or "auto" / None: Keras' own default, except no XLA
            for "mixed_bfloat16" on a machine without GPU or TPU (see
            `keras_attn.precision`). Defaults to "auto".
        pretrain_epochs: int >= 0. Masked-LM pretraining epochs of the "bert"
            encoder before fine-tuning (see above). Defaults to 0 (none).
        pretrain_steps: int or None. Batches of a pretraining epoch (None: one pass
            over the training documents' windows).
        checkpoint: a Hugging Face model folder to fine-tune (`model="bert"`; see
            above). Defaults to None (a "bert" from scratch).
        truncate: str or None. With `checkpoint`: what a document longer than
            the sequence loses, "end" or "middle" (`BertPreprocessor`). Defaults
            to None: `FINE_TUNING["truncate"]`.
        **model_kwargs: passed to the model builder (over `MODEL_DEFAULTS`); for
            "bert", `BertBackbone`'s arguments (its `dropout` is the head's too);
            with `checkpoint`, `BertBackbone` arguments over the folder's config
            (e.g. `dropout`), and no `MODEL_DEFAULTS`.

    Returns:
        A `TextClassifier`; its `settings` hold what the defaults resolved to and,
        with a wide part, each part's validation accuracy and the mix; for "bert",
        `pretraining` (None without it); with `checkpoint`, `checkpoint` (the
        folder) and `fine_tuning` (the schedule).

    Example:

    >>> from keras_attn.text import load_review_sample
    >>> texts, labels = load_review_sample()
    >>> clf = fit_text_classifier(texts[::8], labels[::8], epochs=1,
    ...                           embedding_dim=8, units=4, attention_units=8)
    >>> clf.predict(["A wonderful, moving film."])[0] in ("neg", "pos")
    True
    """
    check_choice("model", model, TEXT_MODELS)
    check_choice("wide_training", wide_training, WIDE_TRAININGS)
    check_mixed_precision(mixed_precision)
    user_callbacks = list(callbacks) if isinstance(callbacks, (list, tuple)) else []
    wrong = [c for c in user_callbacks if not isinstance(c, keras.callbacks.Callback)]
    if wrong or callbacks is not None and not isinstance(callbacks, (list, tuple)):
        raise ValueError(
            "`callbacks` must be a list of `keras.callbacks.Callback`s. Received: "
            f"callbacks={callbacks!r}"
        )
    check_int("pretrain_epochs", pretrain_epochs, minimum=0)
    check_int("pretrain_steps", pretrain_steps, minimum=1, allow_none=True)
    # Written after pretraining and the wide part: a file in the way fails now.
    for name, folder in (
        ("backup_dir", backup_dir),
        ("checkpoint_dir", checkpoint_dir),
    ):
        if folder is not None:
            check_folder(name, folder)
    kind = text_model_kind(model, checkpoint, pretrain_epochs)
    if pretrain_steps is not None and not pretrain_epochs:
        raise ValueError(
            "`pretrain_steps` needs `pretrain_epochs` > 0. Received: "
            f"pretrain_steps={pretrain_steps}, pretrain_epochs={pretrain_epochs}"
        )
    if kind.fine_tune:
        if vocabulary is not None:
            raise ValueError(
                "`vocabulary` cannot be used with `checkpoint` (the folder's "
                f"vocab.txt is the model's). Received: vocabulary={vocabulary!r}"
            )
        # A missing folder, an unsupported model type: said before any work.
        checkpoint = HFCheckpoint(checkpoint)
        truncate = check_choice(
            "truncate", truncate or FINE_TUNING["truncate"], TRUNCATE
        )
    elif truncate is not None:
        raise ValueError(
            "`truncate` needs a `checkpoint` (it says how the fine-tuned "
            f"encoder's tokenizer cuts long documents). Received: truncate="
            f"{truncate!r}, checkpoint=None"
        )
    elif not kind.wide and wide not in (None, False):
        raise ValueError(
            f"`wide` must be None or False for model={model!r} from scratch (give a "
            f"`checkpoint` for a wide part). Received: wide={wide!r}"
        )
    if epochs is None:
        epochs = FINE_TUNING["epochs"] if kind.fine_tune else 20
    if learning_rate is None:
        learning_rate = FINE_TUNING["learning_rate"] if kind.fine_tune else 1e-3
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
    # Class names read once ("3" for 3 and 3.0), missing ones refused by row.
    texts, labels = text_labels(texts, labels)
    class_names = sorted(set(labels))
    if len(class_names) < 2:
        raise ValueError(
            f"`labels` must hold at least 2 classes. Received: {class_names}"
        )
    if validation_texts is not None:
        validation_texts, validation_labels = text_labels(
            validation_texts,
            validation_labels,
            names=("validation_texts", "validation_labels"),
        )
        unknown = sorted(set(validation_labels) - set(class_names))
        if not validation_texts or unknown:
            raise ValueError(
                "`validation_texts` must hold documents of the training classes "
                f"{class_names}. Received: {len(validation_texts)} documents"
                + (f", classes {unknown} not in training" if unknown else "")
            )
    index = {c: i for i, c in enumerate(class_names)}

    def encode(values):
        return np.array([index[v] for v in values], "int32")

    # Early stopping on documents carved from the training ones, never scored ones.
    validation_indices = None
    if validation_texts is None and patience:
        train_idx, validation_indices = early_stopping_split(
            labels, validation_fraction, seed=seed
        )
        validation_texts = [texts[i] for i in validation_indices]
        validation_labels = [labels[i] for i in validation_indices]
        texts = [texts[i] for i in train_idx]
        labels = [labels[i] for i in train_idx]

    # Limits from the training part of the corpus (what the model will read).
    limits = corpus_limits(texts, percentile)
    run = TextFit(
        texts=texts,
        class_names=class_names,
        sizes={
            "max_sentences": max_sentences or limits["max_sentences"],
            "max_words": max_words or limits["max_words"],
            "sequence_length": sequence_length or limits["sequence_length"],
            "max_tokens": max_tokens,
            "min_count": min_count,
        },
        length_given=sequence_length is not None,
        vocabulary=vocabulary,
        percentile=percentile,
        checkpoint=checkpoint,
        truncate=truncate or FINE_TUNING["truncate"],
        wide=_resolve_wide(kind, wide, wide_training, limits, len(texts)),
        model_kwargs={**kind.model_defaults, **model_kwargs},
        strategy=strategy,
        # TPUs compile one program per shape: every batch full.
        static=isinstance(strategy, tf.distribute.TPUStrategy),
        compile_kwargs={} if jit_compile is None else {"jit_compile": jit_compile},
        batch_size=batch_size,
        learning_rate=learning_rate,
        seed=seed,
        verbose=verbose,
    )

    # preprocessor -> model -> [pretrain] -> [wide] -> deep -> [mix]
    # The tokenizer runs on the host (tf.data, serving): outside the scope.
    preprocessor = kind.preprocessor(run)
    # [ngrams]: the wide part's n-gram vocabulary, before the model is sized.
    preprocessor, ngram_settings = _ngram_stage(run, preprocessor)
    # The model's and the optimizer's variables; its layers take the policy.
    with strategy.scope(), policy_scope(mixed_precision):
        net = kind.model(run, preprocessor)
    # The wide part's hasher is the one its `NgramLinear` records.
    preprocessor = preprocessor.for_classifier(net)
    # Tokenized and hashed once (not every epoch), on the host: the ids are small
    # next to the model, and no string reaches the replicas.
    train = (preprocessor.inputs(texts), encode(labels))
    validation = None
    if validation_texts is not None:
        validation = (preprocessor.inputs(validation_texts), encode(validation_labels))
    settings = (
        {"checkpoint": str(checkpoint.path), "truncate": run.truncate}
        if kind.fine_tune
        else {}
    )
    settings.update(kind.settings)
    settings.update(ngram_settings)
    if pretrain_epochs:
        # `texts` is the training part: the early-stopping part is carved off.
        with strategy.scope(), policy_scope(mixed_precision):
            # The MLM head; dropped after pretraining (the encoder is shared).
            pretrainer = BertPretrainer(net.backbone)
        settings["pretraining"] = _pretrain(
            pretrainer,
            preprocessor.tokenizer,
            texts,
            epochs=pretrain_epochs,
            steps=pretrain_steps,
            batch_size=batch_size,
            learning_rate=learning_rate,
            seed=seed,
            static=run.static,
            compile_kwargs=run.compile_kwargs,
            strategy=strategy,
            verbose=verbose,
        )
    staged = wide_layer(net) is not None and wide_training != "joint"
    settings.update(_wide_stage(run, net, train, validation, staged))
    timer = training.EpochTimer()
    fitted, history, fine_tuning = _deep_stage(
        run,
        kind,
        net,
        train,
        validation,
        ensemble=staged and wide_training == "ensemble",
        epochs=epochs,
        patience=patience,
        backup_dir=backup_dir,
        checkpoint_dir=checkpoint_dir,
        timer=timer,
        callbacks=user_callbacks,
    )
    settings.update(fine_tuning)
    mix_accuracy = None
    if staged and wide_training == "ensemble":
        mix = _mix_stage(
            run, net, fitted, train, validation, refit=validation_indices is not None
        )
        mix_accuracy = mix.pop("mix_val_accuracy", None)
        settings.update(mix)
    result = TextClassifier(
        net,
        preprocessor.tokenizer,
        class_names,
        preprocessor=preprocessor,
        history=training.readable_as_logs(history, "TextClassifier.history"),
        seconds_per_epoch=float(np.mean(timer.times)) if timer.times else None,
        validation_indices=validation_indices,
        settings={
            "max_sentences": run.sizes["max_sentences"],
            "max_words": run.sizes["max_words"],
            "sequence_length": run.sizes["sequence_length"],
            "vocabulary_size": preprocessor.vocabulary_size,
            "max_tokens": run.sizes["max_tokens"],
            "min_count": run.sizes["min_count"],
            "wide": _wide_settings(wide_layer(net)),
            "wide_training": wide_training if wide_layer(net) is not None else None,
            "epochs_run": len(timer.times),
            **settings,
        },
    )
    if "wide_refit_documents" in settings:
        # The refitted wide part has seen the validation part: its score there
        # would be a training score.
        result.val_accuracy = mix_accuracy
    elif validation is not None:
        result.val_accuracy = _accuracy(net, *validation)
    return result


def _model_inputs(net, tokenizer, texts) -> dict:
    """`{"token_ids"}` (and `"ngram_ids"` with a wide part, `"segment_ids"` for a
    BertClassifier) of `texts`, as NumPy: the preprocessor's
    (`text_preprocessor(net, tokenizer).inputs(texts)`)."""
    return text_preprocessor(net, tokenizer).inputs(texts)


def _accuracy(model, inputs, y) -> float:
    if isinstance(inputs, dict):
        inputs = model_structure(inputs)
    return float(np.mean(_predict(model, inputs).argmax(-1) == y))


def _tokenize_all(tokenizer, texts, batch_size=256):
    """Token ids of all `texts` as one NumPy array (tokenized in batches)."""
    parts = [
        tokenizer.tokenize(tf.constant(texts[i : i + batch_size])).numpy()
        for i in range(0, len(texts), batch_size)
    ]
    return np.concatenate(parts) if parts else np.zeros((0,), "int64")
