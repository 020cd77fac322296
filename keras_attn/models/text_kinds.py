"""The model kinds `fit_text_classifier` trains, one table row each.

A `TextModelKind` holds a kind's two stages (its preprocessor made for the training
documents, its classifier) and what its training differs in; `TEXT_MODELS` are the
kinds trained from scratch, `PRETRAINED_MODELS` those that fine-tune a Hugging Face
checkpoint, and `text_model_kind` picks one. `TextFit` is what the stages share;
`MODEL_DEFAULTS` the widths used unless given; `FINE_TUNING` how a pretrained kind
is fine-tuned."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from keras_attn._validation import check_choice
from keras_attn.backend import tf
from keras_attn.models.bert import BertBackbone, BertClassifier
from keras_attn.models.bert_preprocessor import BertPreprocessor
from keras_attn.models.han import build_han_classifier
from keras_attn.models.text_limits import LIMIT_CAPS, _vocabulary_limits
from keras_attn.models.text_preprocessor import (
    BertTextPreprocessor,
    HANTextPreprocessor,
    TextPreprocessor,
    TransformerTextPreprocessor,
)
from keras_attn.models.transformer_classifier import build_transformer_classifier
from keras_attn.text.tokenizers import SentenceTokenizer, Tokenizer, build_vocabulary

__all__ = [
    "FINE_TUNING",
    "MODELS",
    "MODEL_DEFAULTS",
    "PRETRAINED_MODELS",
    "TEXT_MODELS",
    "TextFit",
    "TextModelKind",
    "text_model_kind",
]

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
#: (`LinearWarmUpDecay`), at most `epochs` epochs (early stopping keeps the best);
#: a document longer than the sequence loses its middle (`BertPreprocessor`'s
#: `truncate="middle"`: its first quarter and last three quarters kept).
#: The settings of BERT's own fine-tuning recipe; on all-MiniLM-L6-v2, PyTorch +
#: transformers runs with AdamW and 2-6 epochs reached 0.907-0.921 on AG News and
#: 0.850-0.870 on review_polarity (issue 27). Measured on inner splits of
#: bench_text's fitting parts (the test parts unread; benchmarks/RESULTS.md,
#: bench_text_select_truncate_review_polarity and
#: bench_text_select_learning_rate_ag_news): on review_polarity, whose reviews
#: run to ~900 pieces for 256 read, "middle" scored 0.867 against 0.844 for "end"
#: (the encoder alone 0.789; with "end" it reached 0.725 on the carved part, and
#: the mix kept the wide part alone); on ag_news the peak rates 2e-5, 5e-5 and
#: 1e-4 scored 0.898, 0.898 and 0.899 (one document of 960 apart), so the rate
#: stays BERT's 5e-5, and 6 epochs 0.899, so 4 stay
#: (bench_text_select_epochs_ag_news).
FINE_TUNING = {
    "epochs": 4,
    "learning_rate": 5e-5,
    "weight_decay": 0.01,
    "warmup_fraction": 0.1,
    "truncate": "middle",
}


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
    #: What a document longer than a pretrained kind's sequence loses
    #: (`BertPreprocessor`'s `truncate`); `fit_text_classifier`'s default.
    truncate: str = FINE_TUNING["truncate"]
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
        fit.truncate,
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


def _checkpoint_preprocessor(
    checkpoint, texts, sequence_length, percentile, truncate="end"
):
    """The checkpoint's `BertPreprocessor` (cutting long texts as `truncate` says);
    `sequence_length` (None) read off `texts`: the `percentile` of their WordPiece
    pieces plus `[CLS]` and `[SEP]`, at most `LIMIT_CAPS["bert_tokens"]` and the
    checkpoint's position count."""
    positions = checkpoint.backbone_settings()["max_sequence_length"]
    if sequence_length is not None:
        if sequence_length > positions:
            raise ValueError(
                f"`sequence_length` must be at most the checkpoint's {positions} "
                f"positions ({checkpoint.config_file}). Received: "
                f"sequence_length={sequence_length}"
            )
        return BertPreprocessor.from_pretrained(
            checkpoint.path, sequence_length, truncate=truncate
        )
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
    return BertPreprocessor(preprocessor.tokenizer, length, truncate=truncate)


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
