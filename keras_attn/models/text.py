"""The text models and what they share: HAN, the Transformer and BERT classifiers,
the BERT encoder and the cloze readers (each in its own module, gathered here), the
compile helper, and the raw-string serving model.

Every classifier takes token ids (what `keras_attn.text` tokenizers produce in
`tf.data`; with `wide=...` also the n-gram ids of `HashedNgrams` or an
`NgramVocabulary`, as the
inputs `{"token_ids", "ngram_ids"}`) and returns
`{"probabilities": (batch, num_classes), "label": (batch,)}`.
`build_text_serving_model` puts the classifier's preprocessor (`TextPreprocessor`,
one class per model kind) in front, so the exported model takes
a batch of raw strings; `keras_attn.serving.export_text_classifier` writes it for TF
Serving.
"""

from __future__ import annotations

from keras_attn._validation import check_finite
from keras_attn.backend import keras
from keras_attn.layers.labels import PredictedLabel
from keras_attn.models.aoa import (
    READER_HEADS,
    AoAReader,
    BertClozeReader,
    build_aoa_reader,
)
from keras_attn.models.bert import (
    BertBackbone,
    BertClassifier,
    bert_checkpoint_map,
    build_bert,
    build_bert_classifier,
    load_bert_checkpoint,
)
from keras_attn.models.classifier_head import wide_layer
from keras_attn.models.han import (
    WORD_ENCODERS,
    HANClassifier,
    build_han_classifier,
    han_attention_model,
)
from keras_attn.models.text_preprocessor import (
    BertTextPreprocessor,
    HANTextPreprocessor,
    TextPreprocessor,
    TransformerTextPreprocessor,
    text_preprocessor,
)
from keras_attn.models.transformer_classifier import (
    TRANSFORMER_POOLINGS,
    TransformerClassifier,
    build_transformer_classifier,
)

__all__ = [
    "READER_HEADS",
    "TRANSFORMER_POOLINGS",
    "WORD_ENCODERS",
    "AoAReader",
    "BertBackbone",
    "BertClassifier",
    "BertClozeReader",
    "BertTextPreprocessor",
    "HANClassifier",
    "HANTextPreprocessor",
    "TextPreprocessor",
    "TransformerClassifier",
    "TransformerTextPreprocessor",
    "bert_checkpoint_map",
    "build_aoa_reader",
    "build_bert",
    "build_bert_classifier",
    "build_han_classifier",
    "build_text_serving_model",
    "build_transformer_classifier",
    "compile_text_classifier",
    "han_attention_model",
    "load_bert_checkpoint",
    "text_inputs",
    "text_preprocessor",
    "wide_layer",
]


def compile_text_classifier(
    model, learning_rate: float = 1e-3, optimizer=None, **kwargs
):
    """Compiles a classifier: sparse cross-entropy and accuracy on `probabilities`.

    Targets are class indices, given as `{"probabilities": y}` (the `label` output
    has no loss). The optimizer is Adam at `learning_rate` unless `optimizer` is
    given. Extra keyword arguments go to `model.compile`.
    """
    if optimizer is None:
        if not isinstance(
            learning_rate, keras.optimizers.schedules.LearningRateSchedule
        ):
            check_finite(
                "learning_rate", learning_rate, minimum=0, exclusive_minimum=True
            )
        optimizer = keras.optimizers.Adam(learning_rate)
    model.compile(
        optimizer=optimizer,
        loss={"probabilities": "sparse_categorical_crossentropy"},
        metrics={"probabilities": ["accuracy"]},
        **kwargs,
    )
    return model


def build_text_serving_model(classifier, tokenizer, class_names=None, name=None):
    """Raw strings in: the classifier's preprocessor in front of it.

    The preprocessor (`keras_attn.models.text_preprocessor`, one class per model
    kind) makes the classifier's inputs from the strings inside the graph: the
    tokenizer's token ids; with a wide part (`wide=...`), the `ngram_ids` of the
    `HashedNgrams` its `NgramLinear` records (`HashedNgrams.matching(wide)`), so the
    hashing of training and of serving is one layer; for a `BertClassifier`,
    `segment_ids` (zeros: each document one segment, or a `BertPreprocessor`'s).

    Args:
        classifier: a model from `build_han_classifier` or
            `build_transformer_classifier` (input `token_ids`, and `ngram_ids` with
            a wide part), or a `BertClassifier` (`token_ids`, `segment_ids`, and
            `ngram_ids` with a wide part).
        tokenizer: the `keras_attn.text` tokenizer layer used for training
            (`SentenceTokenizer` for HAN, `Tokenizer` for the Transformer and
            BERT), the `BertPreprocessor` of a pretrained checkpoint, or the
            classifier's `TextPreprocessor`.
        class_names: optional list of str: `label` gives names instead of indices.
        name: str. Model name. Defaults to the classifier's name + "_serving".

    Returns:
        A functional `keras.Model`, input `{"text": (batch,) string}`, outputs
        `{"probabilities": (batch, num_classes), "label": (batch,)}`.
    """
    text = keras.Input(shape=(), dtype="string", name="text")
    preprocessor = text_preprocessor(classifier, tokenizer)
    probabilities = classifier(preprocessor(text))["probabilities"]
    probabilities = keras.layers.Activation("linear", name="probabilities")(
        probabilities
    )
    label = PredictedLabel(class_names, name="label")(probabilities)
    return keras.Model(
        {"text": text},
        {"probabilities": probabilities, "label": label},
        name=name or f"{classifier.name}_serving",
    )


def text_inputs(classifier, tokenizer, text):
    """A classifier's inputs from a `(batch,)` string tensor (symbolic or eager):
    its preprocessor's (`text_preprocessor(classifier, tokenizer)`).

    Returns:
        The token ids alone, or a dict of `token_ids` and `segment_ids` and/or
        `ngram_ids`.
    """
    return text_preprocessor(classifier, tokenizer)(text)
