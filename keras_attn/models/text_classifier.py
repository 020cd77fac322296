"""One call from raw documents to a trained text classifier (used by the CLI, the
quickstart, the benchmark and the notebooks): `fit_text_classifier` returns a
`TextClassifier`, the model with its preprocessor and class names
(`keras_attn.serving.export` writes one for TF Serving). The model kinds it trains
are the rows of `TEXT_MODELS` and `PRETRAINED_MODELS` (`TextModelKind`), walked by
one recipe of stages."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from keras_attn import distribute, training
from keras_attn._validation import check_choice, check_folder, check_int
from keras_attn.backend import keras, tf
from keras_attn.layers.labels import PredictedLabel
from keras_attn.models.bert import BertBackbone, BertClassifier
from keras_attn.models.bert_preprocessor import BertPreprocessor
from keras_attn.models.bert_pretraining import (
    BertPretrainer,
    compile_bert_pretrainer,
    fit_bert_pretrainer,
)
from keras_attn.models.classifier_head import deep_part_model, wide_part_model
from keras_attn.models.han import build_han_classifier
from keras_attn.models.hf_checkpoint import HFCheckpoint
from keras_attn.models.text import (
    build_text_serving_model,
    compile_text_classifier,
    wide_layer,
)
from keras_attn.models.text_preprocessor import (
    BertTextPreprocessor,
    HANTextPreprocessor,
    TextPreprocessor,
    TransformerTextPreprocessor,
    model_structure,
    text_preprocessor,
)
from keras_attn.models.transformer_classifier import build_transformer_classifier
from keras_attn.optimizers import FusedAdamW, LinearWarmUpDecay
from keras_attn.precision import (
    check_mixed_precision,
    policy_scope,
    resolve_jit_compile,
)
from keras_attn.text.labels import early_stopping_split, text_labels
from keras_attn.text.ngrams import HashedNgrams
from keras_attn.text.pretraining import pretraining_dataset
from keras_attn.text.tokenizers import (
    SentenceTokenizer,
    Tokenizer,
    build_vocabulary,
    split_sentences,
    split_words,
)

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

#: Upper bounds of the limits `corpus_limits` reads off a corpus (memory and time
#: on a CPU): HAN reads at most `han_tokens` = sentences x words per document.
LIMIT_CAPS = {
    "max_sentences": 48,
    "max_words": 40,
    "han_tokens": 1024,
    "sequence_length": 512,
    "max_ngrams": 4096,
    # "bert" (WordPiece, [CLS] and [SEP] included): a training step of MODEL_DEFAULTS
    # ["bert"] at 512 tokens took 5-7x one at 256 on 2 CPU cores (3.8 s vs 0.55-0.76
    # s, batches of 32).
    "bert_tokens": 256,
}


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
    history: dict = field(default_factory=dict)
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


#: Model widths `fit_text_classifier` uses unless given (`**model_kwargs`). HAN's are
#: the paper's (embedding 100, GRU 50, attention 100): on an inner split of
#: review_polarity's fitting part HAN alone reached 0.785 with them against 0.746
#: with 64/25/50, in about 4 minutes on 2 CPU cores (benchmarks/RESULTS.md,
#: bench_text_select_wide_training). The Transformer is one CPU-sized layer.
MODEL_DEFAULTS = {
    "han": {"embedding_dim": 100, "units": 50, "attention_units": 100},
    "transformer": {
        "hidden_dim": 64,
        "num_layers": 1,
        "num_heads": 2,
        "dropout": 0.3,
        "pooling": "attention",
    },
    # A `BertBackbone` (and the `BertClassifier` head's dropout): at 256 tokens a
    # fine-tuning epoch of review_polarity's 1,152 fitting reviews took ~30 s (the
    # first 49 s), a masked-LM pass over their text ~6 min (138 batches, 2.5-3 s
    # each, measured on 20), on 2 CPU cores shared with another job.
    "bert": {"hidden_dim": 128, "num_layers": 2, "num_heads": 2, "dropout": 0.1},
}

#: Fine-tuning a pretrained checkpoint (`fit_text_classifier(checkpoint=...)`):
#: AdamW (`FusedAdamW`, weight decay on every weight but biases and layer-norm
#: scales and offsets) at `learning_rate`, warmed up linearly over the first
#: `warmup_fraction` of the steps and decayed linearly to 0 at the last epoch
#: (`LinearWarmUpDecay`), at most `epochs` epochs (early stopping keeps the best).
#: The settings of BERT's own fine-tuning recipe; on all-MiniLM-L6-v2, PyTorch +
#: transformers runs with AdamW and 2-6 epochs reached 0.907-0.921 on AG News and
#: 0.850-0.870 on review_polarity (issue 27). Not yet chosen by measurement on
#: inner splits here.
FINE_TUNING = {
    "epochs": 4,
    "learning_rate": 5e-5,
    "weight_decay": 0.01,
    "warmup_fraction": 0.1,
}
#: Weights AdamW does not decay (regular expressions on the variable names).
_NO_DECAY = ("bias", "gamma", "beta")


#: The wide part's features in `fit_text_classifier` (over `NgramLinear`'s): those
#: of scikit-learn's `TfidfVectorizer(sublinear_tf=True)` over the hashed word uni-
#: and bigrams (1 + log count, smoothed IDF from the training documents, L2 norm),
#: the table scaled by naive-Bayes log-count ratios (NBSVM), and a bias: the wide
#: part is a logistic regression on (NB-scaled) TF-IDF features. Chosen on inner
#: 80/20 splits of the three bench_text corpora's fitting parts
#: (`bench_text --select-wide`, benchmarks/RESULTS.md): mean accuracy 0.870 with
#: the ratios and C = 30, 0.868 plain TF-IDF (C = 30), 0.863 (C = 10).
WIDE_DEFAULTS = {
    "term_weighting": "sublinear",
    "idf": True,
    "combiner": "l2",
    "use_bias": True,
    "nb_ratio": True,
}

#: How the wide part is fitted alone (`wide_training` "ensemble" and "residual"):
#: Adam at `learning_rate`, `epochs` passes in batches of `batch_size`, an L2
#: penalty `|W|² / (2·C·N)` on the table (N training documents: scikit-learn's
#: `LogisticRegression(C=C)` objective divided by N). Plain TF-IDF fitted so
#: matched scikit-learn's TF-IDF + LR on the same inner splits.
WIDE_FIT = {"epochs": 20, "learning_rate": 0.01, "batch_size": 64, "C": 30.0}

#: Added to `WIDE_DEFAULTS` with `wide_training="joint"` (the wide part trained
#: with the deep one from the start): a 10x step and n-gram dropout 0.5, chosen for
#: joint training on an inner split of review_polarity (benchmarks/RESULTS.md).
WIDE_JOINT = {"scale": 10.0, "dropout": 0.5}

#: `fit_text_classifier`'s ways of training a wide-and-deep classifier.
WIDE_TRAININGS = ("ensemble", "residual", "joint")

#: The mixing grid of `wide_training="ensemble"`: the weight α of the wide logits
#: and the temperature t of `t·(α·wide + (1 - α)·deep)`.
_MIX_WEIGHTS = np.linspace(0.0, 1.0, 21)
_MIX_TEMPERATURES = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


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


@dataclass
class TextFit:
    """What `fit_text_classifier`'s stages share: the training part, the resolved
    limits and options, the training settings.

    `sizes` holds `max_sentences`, `max_words`, `sequence_length` (as read off the
    corpus or given), `max_tokens` and `min_count` (None unless given or a
    vocabulary is built); a preprocessor stage writes back what it resolved.
    """

    texts: list
    class_names: list
    sizes: dict
    length_given: bool = False
    vocabulary: object = None
    percentile: float = 95.0
    #: The `HFCheckpoint` of a pretrained kind, else None.
    checkpoint: object = None
    #: The wide part: False, or `NgramLinear` arguments (`_resolve_wide`).
    wide: object = False
    model_kwargs: dict = field(default_factory=dict)
    strategy: object = None
    #: Every batch full (a TPU compiles one program per shape).
    static: bool = False
    compile_kwargs: dict = field(default_factory=dict)
    batch_size: int = 32
    learning_rate: float = 1e-3
    seed: int = 0
    verbose: int = 0

    def __post_init__(self):
        if self.strategy is None:
            self.strategy = tf.distribute.get_strategy()


@dataclass(frozen=True)
class TextModelKind:
    """A model kind of `fit_text_classifier` (a row of `TEXT_MODELS` or
    `PRETRAINED_MODELS`): its two stages and what its training differs in.

    Attributes:
        preprocessor: `(fit: TextFit) -> TextPreprocessor`: the kind's tokenizer
            made for the training documents, without the wide part's hasher (the
            model's, added by `TextPreprocessor.for_classifier`).
        model: `(fit, preprocessor) -> classifier`, called under the strategy's
            scope and the dtype policy.
        model_defaults: the widths used unless given (`MODEL_DEFAULTS`).
        wide: whether the kind takes a wide part (on with `wide=None`).
        pretrain: whether its encoder can first be pretrained with masked LM
            (`pretrain_epochs`).
        warm_up: whether the learning rate warms up linearly over the first epoch.
        fine_tune: a pretrained checkpoint: `FINE_TUNING`'s defaults and schedule
            (AdamW, warm-up and decay; no halving on a plateau).
        settings: entries the result's `settings` always has.
    """

    preprocessor: Callable
    model: Callable
    model_defaults: dict = field(default_factory=dict)
    wide: bool = True
    pretrain: bool = False
    warm_up: bool = True
    fine_tune: bool = False
    settings: dict = field(default_factory=dict)


def _vocabulary(fit: TextFit, default=None):
    """`(vocabulary, method)`: the given vocabulary (`default` when None), "wordpiece"
    for a shipped BERT one; else a word vocabulary built from `fit.texts` (its
    `max_tokens` and `min_count` into `fit.sizes`)."""
    vocabulary = fit.vocabulary
    if default is not None:
        vocabulary = vocabulary or default
    if vocabulary is None:
        default_tokens, default_count = _vocabulary_limits(fit.texts)
        fit.sizes["max_tokens"] = fit.sizes["max_tokens"] or default_tokens
        fit.sizes["min_count"] = fit.sizes["min_count"] or default_count
        vocabulary = build_vocabulary(
            fit.texts,
            max_tokens=fit.sizes["max_tokens"],
            min_count=fit.sizes["min_count"],
        )
        return vocabulary, "word"
    if isinstance(vocabulary, str) and vocabulary.startswith("bert"):
        return vocabulary, "wordpiece"
    return vocabulary, "word"


def _sequence_tokenizer(fit: TextFit, default=None, cap=None) -> Tokenizer:
    """A `Tokenizer` of `fit.sizes["sequence_length"]` (+ `[CLS]` and `[SEP]` for
    WordPiece, then at most `cap` unless the length was given)."""
    vocabulary, method = _vocabulary(fit, default)
    length = fit.sizes["sequence_length"]
    if method == "wordpiece":
        length = min(length + 2, LIMIT_CAPS["sequence_length"])
        if cap is not None and not fit.length_given:
            length = min(length, cap)
    fit.sizes["sequence_length"] = length
    return Tokenizer(vocabulary, sequence_length=length, method=method)


def _han_preprocessor(fit: TextFit) -> TextPreprocessor:
    vocabulary, method = _vocabulary(fit)
    tokenizer = SentenceTokenizer(
        vocabulary,
        max_sentences=fit.sizes["max_sentences"],
        max_words=fit.sizes["max_words"],
        method=method,
    )
    return HANTextPreprocessor(tokenizer)


def _transformer_preprocessor(fit: TextFit) -> TextPreprocessor:
    return TransformerTextPreprocessor(_sequence_tokenizer(fit))


def _bert_preprocessor(fit: TextFit) -> TextPreprocessor:
    # WordPiece of the shipped vocabulary by default, at most `bert_tokens`.
    tokenizer = _sequence_tokenizer(
        fit, default="bert-base-uncased", cap=LIMIT_CAPS["bert_tokens"]
    )
    return BertTextPreprocessor(tokenizer)


def _pretrained_bert_preprocessor(fit: TextFit) -> TextPreprocessor:
    tokenizer = _checkpoint_preprocessor(
        fit.checkpoint,
        fit.texts,
        fit.sizes["sequence_length"] if fit.length_given else None,
        fit.percentile,
    )
    fit.sizes["sequence_length"] = tokenizer.sequence_length
    return BertTextPreprocessor(tokenizer)


def _han_model(fit: TextFit, preprocessor):
    return build_han_classifier(
        preprocessor.vocabulary_size,
        len(fit.class_names),
        fit.sizes["max_sentences"],
        fit.sizes["max_words"],
        wide=fit.wide,
        **fit.model_kwargs,
    )


def _transformer_model(fit: TextFit, preprocessor):
    return build_transformer_classifier(
        preprocessor.vocabulary_size,
        len(fit.class_names),
        fit.sizes["sequence_length"],
        wide=fit.wide,
        **fit.model_kwargs,
    )


def _bert_model(fit: TextFit, preprocessor):
    backbone = BertBackbone(
        preprocessor.vocabulary_size,
        sequence_length=fit.sizes["sequence_length"],
        **fit.model_kwargs,
    )
    return BertClassifier(backbone, len(fit.class_names), dropout=backbone.dropout)


def _pretrained_bert_model(fit: TextFit, preprocessor):
    return _pretrained_classifier(
        fit.checkpoint,
        fit.class_names,
        fit.sizes["sequence_length"],
        fit.wide,
        fit.model_kwargs,
    )


#: `fit_text_classifier`'s model kinds trained from scratch, by `model`.
TEXT_MODELS = {
    "han": TextModelKind(
        _han_preprocessor,
        _han_model,
        model_defaults=MODEL_DEFAULTS["han"],
        warm_up=False,
    ),
    "transformer": TextModelKind(
        _transformer_preprocessor,
        _transformer_model,
        model_defaults=MODEL_DEFAULTS["transformer"],
    ),
    "bert": TextModelKind(
        _bert_preprocessor,
        _bert_model,
        model_defaults=MODEL_DEFAULTS["bert"],
        wide=False,
        pretrain=True,
        settings={"pretraining": None},
    ),
}

#: The kinds that fine-tune a pretrained checkpoint (`checkpoint=...`), by `model`.
PRETRAINED_MODELS = {
    "bert": TextModelKind(
        _pretrained_bert_preprocessor,
        _pretrained_bert_model,
        warm_up=False,
        fine_tune=True,
        settings={"pretraining": None},
    ),
}

MODELS = tuple(TEXT_MODELS)


def _names(names) -> str:
    return " or ".join(f"model={n!r}" for n in names)


def text_model_kind(model: str, checkpoint=None, pretrain_epochs: int = 0):
    """The `TextModelKind` `fit_text_classifier` trains for `model` (with
    `checkpoint`, from `PRETRAINED_MODELS`), or a clear error naming the argument.

    Example:

    >>> text_model_kind("han").wide
    True
    >>> text_model_kind("bert", checkpoint="folder").fine_tune
    True
    """
    check_choice("model", model, TEXT_MODELS)
    if pretrain_epochs and not TEXT_MODELS[model].pretrain:
        able = [n for n, k in TEXT_MODELS.items() if k.pretrain]
        raise ValueError(
            f"`pretrain_epochs` needs {_names(able)} (it pretrains the BERT "
            f"encoder). Received: pretrain_epochs={pretrain_epochs}, model={model!r}"
        )
    if checkpoint is None:
        return TEXT_MODELS[model]
    if model not in PRETRAINED_MODELS:
        raise ValueError(
            f"`checkpoint` needs {_names(PRETRAINED_MODELS)} (it fine-tunes a "
            f"pretrained BERT-family encoder). Received: "
            f"checkpoint={str(checkpoint)!r}, model={model!r}"
        )
    if pretrain_epochs:
        raise ValueError(
            "`pretrain_epochs` cannot be used with `checkpoint` (the folder's "
            "encoder is fine-tuned as it is). Received: "
            f"pretrain_epochs={pretrain_epochs}"
        )
    return PRETRAINED_MODELS[model]


def _resolve_wide(kind, wide, wide_training, limits, documents):
    """The wide part's `NgramLinear` arguments (or False): `kind.wide` for None,
    over `WIDE_DEFAULTS` (and `WIDE_JOINT`), `max_ngrams` the corpus's, an L2
    penalty of scikit-learn's C for `documents` unless trained jointly."""
    if wide is None:
        wide = kind.wide
    if wide is True:
        wide = {}
    if isinstance(wide, dict):
        joint = WIDE_JOINT if wide_training == "joint" else {}
        wide = {"max_ngrams": limits["max_ngrams"], **WIDE_DEFAULTS, **joint, **wide}
        if wide_training != "joint":
            # scikit-learn's C, per document (the loss is a mean over the batch).
            penalty = 1.0 / (2.0 * WIDE_FIT["C"] * documents)
            # As a config (not an object): the classifier's config stays JSON.
            l2 = {"class_name": "L2", "config": {"l2": penalty}}
            wide.setdefault("kernel_regularizer", l2)
    return wide


def _wide_stage(fit: TextFit, net, train, validation, staged: bool) -> dict:
    """[wide]: the wide part's IDF and naive-Bayes ratios from the training
    documents; with `staged` ("ensemble", "residual") it is fitted alone
    (`WIDE_FIT`) and frozen. Returns its settings (`wide_val_accuracy`)."""
    wide_part = wide_layer(net)
    if wide_part is None:
        return {}
    if wide_part.use_idf or wide_part.nb_ratio:
        wide_part.adapt(train[0]["ngram_ids"], labels=train[1])
    if not staged:
        return {}
    settings = _fit_wide_part(
        net,
        train[0],
        train[1],
        *(validation or (None, None)),
        fit.strategy,
        fit.compile_kwargs,
        fit.seed,
        fit.static,
    )
    wide_part.trainable = False
    return settings


def _deep_optimizer(fit: TextFit, kind, epochs, steps_per_epoch):
    """`(optimizer, settings)`: None (Adam at the learning rate) from scratch; for a
    fine-tuned kind AdamW with `FINE_TUNING`'s schedule, and `fine_tuning`."""
    if not kind.fine_tune:
        return None, {}
    total = max(epochs * steps_per_epoch, 1)
    warmup = int(FINE_TUNING["warmup_fraction"] * total)
    optimizer = FusedAdamW(
        LinearWarmUpDecay(fit.learning_rate, warmup, max(total, warmup + 1)),
        weight_decay=FINE_TUNING["weight_decay"],
    )
    optimizer.exclude_from_weight_decay(var_names=list(_NO_DECAY))
    settings = {
        "learning_rate": fit.learning_rate,
        "weight_decay": FINE_TUNING["weight_decay"],
        "warmup_steps": warmup,
        "total_steps": total,
    }
    return optimizer, {"fine_tuning": settings}


def _deep_stage(
    fit: TextFit,
    kind: TextModelKind,
    net,
    train,
    validation,
    *,
    ensemble: bool,
    epochs: int,
    patience,
    backup_dir=None,
    checkpoint_dir=None,
    timer=None,
    callbacks=(),
):
    """deep: the epoch loop of the deep part alone (`ensemble`) or of the whole
    classifier (its wide part frozen for "residual"), with keras_attn's callbacks
    (`timer`, backup, checkpoints, the kind's warm-up, halving on a plateau, early
    stopping) before `callbacks`.

    Returns:
        `(fitted, history, settings)`: the model trained, its `History`, and
        `fine_tuning` for a fine-tuned kind.
    """
    n = len(train[1])
    batch_size, strategy = fit.batch_size, fit.strategy
    steps_per_epoch = n // batch_size if fit.static else -(-n // batch_size)
    with strategy.scope():  # a model records the strategy it is made under
        fitted = deep_part_model(net) if ensemble else net
        optimizer, settings = _deep_optimizer(fit, kind, epochs, steps_per_epoch)
        compile_text_classifier(
            fitted,
            learning_rate=fit.learning_rate,
            optimizer=optimizer,
            **fit.compile_kwargs,
        )

    def dataset(inputs, y, shuffle):
        # The structure the model takes (the token ids alone when that is all).
        inputs = _deep_inputs(inputs) if fitted is not net else model_structure(inputs)
        if shuffle and backup_dir is not None:
            ds = training.epoch_batches(
                (inputs, y),
                len(y),
                batch_size,
                seed=fit.seed,
                start_epoch=training.completed_epochs(backup_dir),
                drop_remainder=fit.static,
            )
        else:
            ds = tf.data.Dataset.from_tensor_slices((inputs, y))
            if shuffle:
                ds = ds.shuffle(len(y), seed=fit.seed, reshuffle_each_iteration=True)
            ds = ds.batch(batch_size, drop_remainder=fit.static)
        ds = ds.map(
            lambda t, y: (t, {"probabilities": y, "label": y}),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        return ds.prefetch(tf.data.AUTOTUNE)

    train_ds = dataset(*train, shuffle=True)
    # With a backup, an endless stream: `fit` counts the epochs.
    steps = steps_per_epoch if backup_dir is not None else None
    val_ds = None
    deep_callbacks = training.fit_callbacks(
        [timer] if timer is not None else [], backup_dir, None
    )
    if checkpoint_dir is not None:
        deep_callbacks.append(training.weights_checkpoint(net, checkpoint_dir))
    if kind.warm_up:
        deep_callbacks.append(training.WarmUp(fit.learning_rate, -(-n // batch_size)))
    if validation is not None:
        val_ds = dataset(*validation, shuffle=False).cache()
        if not kind.fine_tune:  # a checkpoint's schedule decays on its own
            deep_callbacks.append(
                keras.callbacks.ReduceLROnPlateau(
                    monitor="val_loss",
                    factor=0.5,
                    patience=2,
                    min_lr=fit.learning_rate / 32,
                )
            )
        if patience:
            deep_callbacks.append(
                keras.callbacks.EarlyStopping(
                    monitor="val_probabilities_accuracy"
                    if _metric_prefixed(fitted)
                    else "val_accuracy",
                    mode="max",
                    patience=patience,
                    restore_best_weights=True,
                )
            )
    history = fitted.fit(
        train_ds,
        validation_data=val_ds,
        epochs=epochs,
        steps_per_epoch=steps,
        callbacks=deep_callbacks + list(callbacks),
        shuffle=False,  # the dataset is shuffled
        verbose=fit.verbose,
    )
    return fitted, history, settings


def _mix_stage(fit: TextFit, net, fitted, train, validation, refit: bool) -> dict:
    """[mix] ("ensemble"): the mix of the wide and deep logits of least validation
    log loss (`_choose_mix`), folded into the two parts' last weights; with
    `refit` (the validation part was carved from the training documents) the
    wide part is first fitted again on all of them.

    Returns:
        The mix's settings: `deep_val_accuracy`, `mix_val_accuracy`,
        `wide_weight`, `temperature` (and `wide_refit_documents`).
    """
    inputs, y = validation or (None, None)
    mix = _choose_mix(net, fitted, inputs, y, fit.strategy)
    if refit:
        # The wide part needs no early stopping: once the mix is chosen, it is
        # fitted again on every training document, the carved ones included.
        everything = {
            "ngram_ids": np.concatenate([train[0]["ngram_ids"], inputs["ngram_ids"]])
        }
        y_everything = np.concatenate([train[1], y])
        wide_part = wide_layer(net)
        wide_part.trainable = True
        for weight in (wide_part.kernel, wide_part.bias):
            if weight is not None:
                weight.assign(tf.zeros_like(weight))
        wide_part.adapt(everything["ngram_ids"], labels=y_everything)
        _fit_wide_part(
            net,
            everything,
            y_everything,
            None,
            None,
            fit.strategy,
            fit.compile_kwargs,
            fit.seed,
            fit.static,
        )
        wide_part.trainable = False
        mix["wide_refit_documents"] = len(y_everything)
    _fold_mix(net, mix["wide_weight"], mix["temperature"], fit.strategy)
    return mix


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
    `LIMIT_CAPS["bert_tokens"]` and the checkpoint's position count. Training
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
    regression on TF-IDF features of the hashed word uni- and bigrams
    (`NgramLinear` with `WIDE_DEFAULTS`, the IDF read off the training documents)
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
    settings = {"checkpoint": str(checkpoint.path)} if kind.fine_tune else {}
    settings.update(kind.settings)
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
        history=dict(history.history),
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


def _deep_inputs(inputs):
    """The deep part's inputs: all but the n-gram ids (the token ids alone when
    nothing else is left)."""
    return model_structure({k: v for k, v in inputs.items() if k != "ngram_ids"})


def _checkpoint_preprocessor(checkpoint, texts, sequence_length, percentile):
    """The checkpoint's `BertPreprocessor`; `sequence_length` (None) read off
    `texts`: the `percentile` of their WordPiece pieces plus `[CLS]` and `[SEP]`,
    at most `LIMIT_CAPS["bert_tokens"]` and the checkpoint's position count."""
    positions = checkpoint.backbone_settings()["max_sequence_length"]
    if sequence_length is not None:
        if sequence_length > positions:
            raise ValueError(
                f"`sequence_length` must be at most the checkpoint's {positions} "
                f"positions ({checkpoint.config_file}). Received: "
                f"sequence_length={sequence_length}"
            )
        return BertPreprocessor.from_pretrained(checkpoint.path, sequence_length)
    preprocessor = BertPreprocessor.from_pretrained(checkpoint.path, positions)
    counts = np.concatenate(
        [
            preprocessor.tokenizer.tokenize(tf.constant(texts[i : i + 256]))
            .row_lengths()
            .numpy()
            for i in range(0, len(texts), 256)
        ]
    )
    pieces = int(np.ceil(np.percentile(counts, percentile))) + 2
    length = max(3, min(pieces, LIMIT_CAPS["bert_tokens"], positions))
    return BertPreprocessor(preprocessor.tokenizer, length)


def _pretrained_classifier(checkpoint, class_names, sequence_length, wide, kwargs):
    """`BertClassifier` on the checkpoint's encoder: with the folder's head when
    its `id2label` is `class_names`, else a new one (the encoder's dropout)."""
    backbone = BertBackbone.from_pretrained(checkpoint, sequence_length, **kwargs)
    head = checkpoint.head_settings() if checkpoint.has_classifier_head() else None
    if head is not None and head["class_names"] == list(class_names):
        classifier = BertClassifier(backbone, wide=wide, **head)
        checkpoint.load_head(classifier)
    else:
        # The names travel with the model: `save_pretrained` writes them as the
        # folder's `id2label`.
        classifier = BertClassifier(
            backbone,
            len(class_names),
            dropout=backbone.dropout,
            class_names=list(class_names),
            wide=wide,
        )
    checkpoint.close()
    return classifier


def _predict(model, inputs, batch_size=256) -> np.ndarray:
    return model.predict(inputs, batch_size=batch_size, verbose=0)["probabilities"]


def _accuracy(model, inputs, y) -> float:
    if isinstance(inputs, dict):
        inputs = model_structure(inputs)
    return float(np.mean(_predict(model, inputs).argmax(-1) == y))


def _pretrain(
    pretrainer,
    tokenizer,
    texts,
    *,
    epochs,
    steps,
    batch_size,
    learning_rate,
    seed,
    static,
    compile_kwargs,
    strategy,
    verbose,
) -> dict:
    """Masked-LM pretraining of the encoder on `texts` (see `fit_text_classifier`).

    Returns the last epoch's MLM loss and accuracy, the steps and the seconds.
    """
    start = time.perf_counter()
    length = tokenizer.sequence_length

    def data(num_epochs):
        return pretraining_dataset(
            texts,
            tokenizer,
            sequence_length=length,
            batch_size=batch_size,
            # Enough slots for 15% of every window: no selected token is dropped.
            max_predictions=max(1, int(np.ceil(0.15 * (length - 2)))),
            num_epochs=num_epochs,
            drop_remainder=static,
            seed=seed,
            sentence_pairs=False,
        )

    # Batches of one pass over the windows; the stream repeats with fresh masks.
    passes = None
    if steps is None:
        passes = sum(1 for _ in data(1))
        steps = max(passes, 1)
    with strategy.scope():
        compile_bert_pretrainer(
            pretrainer, learning_rate=learning_rate, nsp_weight=0.0, **compile_kwargs
        )
    warm_up = training.WarmUp(learning_rate, -(-epochs * steps // 10))
    history = fit_bert_pretrainer(
        pretrainer,
        data(None),
        epochs=epochs,
        steps_per_epoch=steps,
        callbacks=[warm_up],
        verbose=verbose,
    )
    return {
        "epochs": epochs,
        "steps_per_epoch": steps,
        "batches_per_pass": passes,
        "documents": len(texts),
        "mlm_loss": float(history.history["mlm_loss"][-1]),
        "mlm_accuracy": float(history.history["mlm_accuracy"][-1]),
        "seconds": time.perf_counter() - start,
    }


def _fit_wide_part(
    net, train, y, validation, y_validation, strategy, compile_kwargs, seed, static
) -> dict:
    """Fits the wide part alone (`WIDE_FIT`): a logistic regression on its
    features. Returns its validation accuracy (None without validation data)."""
    with strategy.scope():
        wide_model = wide_part_model(net)
        wide_model.compile(
            optimizer=keras.optimizers.Adam(WIDE_FIT["learning_rate"]),
            loss={"probabilities": "sparse_categorical_crossentropy"},
            **compile_kwargs,
        )
    ds = tf.data.Dataset.from_tensor_slices((train["ngram_ids"], y))
    ds = ds.shuffle(len(y), seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(WIDE_FIT["batch_size"], drop_remainder=static)
    ds = ds.map(lambda x, t: (x, {"probabilities": t})).prefetch(tf.data.AUTOTUNE)
    wide_model.fit(ds, epochs=WIDE_FIT["epochs"], shuffle=False, verbose=0)
    accuracy = None
    if validation is not None:
        probabilities = _predict(wide_model, validation["ngram_ids"])
        accuracy = float(np.mean(probabilities.argmax(-1) == y_validation))
    return {"wide_val_accuracy": accuracy}


def _choose_mix(net, deep_model, validation, y, strategy) -> dict:
    """The mix `t·(α·wide + (1 - α)·deep)` of the two parts' logits of least
    validation log loss (α = 0.5, t = 1 without validation data), the deep
    part's validation accuracy and the mix's (`mix_val_accuracy`)."""
    if validation is None:
        return {"deep_val_accuracy": None, "wide_weight": 0.5, "temperature": 1.0}
    with strategy.scope():
        wide_model = wide_part_model(net)
    # Log-probabilities differ from the logits by one constant per document,
    # which the softmax of their weighted sum ignores.
    wide_log = np.log(np.maximum(_predict(wide_model, validation["ngram_ids"]), 1e-30))
    deep_probabilities = _predict(deep_model, _deep_inputs(validation))
    deep_log = np.log(np.maximum(deep_probabilities, 1e-30))
    best = None
    for a in _MIX_WEIGHTS:
        for t in _MIX_TEMPERATURES:
            z = t * (a * wide_log + (1.0 - a) * deep_log)
            z = z - z.max(axis=1, keepdims=True)
            log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
            loss = -float(np.mean(log_p[np.arange(len(y)), y]))
            if best is None or loss < best[0] - 1e-12:
                best = (loss, float(a), float(t), float(np.mean(z.argmax(1) == y)))
    return {
        "deep_val_accuracy": float(np.mean(deep_probabilities.argmax(-1) == y)),
        "mix_val_accuracy": best[3],
        "wide_weight": best[1],
        "temperature": best[2],
    }


def _fold_mix(net, alpha, temperature, strategy) -> None:
    """Scales the wide part's and the deep head's weights by `t·α` and
    `t·(1 - α)`: `net`'s logits become the mix."""
    wide, dense = wide_layer(net), net.output_dense
    with strategy.scope():
        for layer, factor in (
            (wide, temperature * alpha),
            (dense, temperature * (1.0 - alpha)),
        ):
            layer.kernel.assign(layer.kernel * factor)
            if layer.bias is not None:
                layer.bias.assign(layer.bias * factor)


def _wide_settings(layer):
    """The hashing and combining settings of a wide part, or False without one."""
    if layer is None:
        return False
    config = layer.get_config()
    keys = (
        "num_buckets",
        "combiner",
        "dropout",
        "scale",
        "ngram_widths",
        "max_ngrams",
        "term_weighting",
        "idf",
    )
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
