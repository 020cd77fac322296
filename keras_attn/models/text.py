"""The text models and what they share: HAN, the Transformer and BERT classifiers,
the BERT encoder and the cloze readers (each in its own module, gathered here), the
compile helper, and the raw-string serving model.

Every classifier takes token ids (what `keras_attn.text` tokenizers produce in
`tf.data`; with `wide=...` also the hashed n-gram ids of `HashedNgrams`, as the
inputs `{"token_ids", "ngram_ids"}`) and returns
`{"probabilities": (batch, num_classes), "label": (batch,)}`.
`build_text_serving_model` puts the tokenizer in front, so the exported model takes
a batch of raw strings; `keras_attn.serving.export_text_classifier` writes it for TF
Serving.
"""

from __future__ import annotations

from keras_attn._validation import check_finite
from keras_attn.backend import keras
from keras_attn.layers.labels import PredictedLabel
from keras_attn.layers.token_ids import SegmentIds
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
from keras_attn.models.transformer_classifier import (
    TRANSFORMER_POOLINGS,
    TransformerClassifier,
    build_transformer_classifier,
)
from keras_attn.text.ngrams import HashedNgrams

__all__ = [
    "READER_HEADS",
    "TRANSFORMER_POOLINGS",
    "WORD_ENCODERS",
    "AoAReader",
    "BertBackbone",
    "BertClassifier",
    "BertClozeReader",
    "HANClassifier",
    "TransformerClassifier",
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
    """Raw strings in: the tokenizer layer in front of a trained classifier.

    With a wide part (`wide=...`), the `HashedNgrams` layer its `NgramLinear`
    records (`HashedNgrams.matching(wide)`) computes the `ngram_ids` from the same
    strings inside the graph: the hashing of training (in `tf.data`) and of serving
    is one layer. A `BertClassifier` gets each document as one segment: `segment_ids` of
    zeros (`SegmentIds`) beside the token ids, or both from a `BertPreprocessor`
    (see `text_inputs`).

    Args:
        classifier: a model from `build_han_classifier` or
            `build_transformer_classifier` (input `token_ids`, and `ngram_ids` with
            a wide part), or a `BertClassifier` (`token_ids`, `segment_ids`, and
            `ngram_ids` with a wide part).
        tokenizer: the `keras_attn.text` tokenizer layer used for training
            (`SentenceTokenizer` for HAN, `Tokenizer` for the Transformer and
            BERT), or the `BertPreprocessor` of a pretrained checkpoint.
        class_names: optional list of str: `label` gives names instead of indices.
        name: str. Model name. Defaults to the classifier's name + "_serving".

    Returns:
        A functional `keras.Model`, input `{"text": (batch,) string}`, outputs
        `{"probabilities": (batch, num_classes), "label": (batch,)}`.
    """
    text = keras.Input(shape=(), dtype="string", name="text")
    probabilities = classifier(text_inputs(classifier, tokenizer, text))[
        "probabilities"
    ]
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
    """A classifier's inputs from a `(batch,)` string tensor (symbolic or eager).

    The tokenizer's token ids; a `BertPreprocessor` gives token and segment ids,
    any other tokenizer before a `BertClassifier` one segment a document
    (`SegmentIds`: zeros); a wide part adds the n-gram ids of the `HashedNgrams`
    its `NgramLinear` records. Training, serving and the explain signature all
    build the inputs here.

    Returns:
        The token ids alone, or a dict of `token_ids` and `segment_ids` and/or
        `ngram_ids`.
    """
    encoded = tokenizer(text)
    if isinstance(encoded, dict):
        inputs = dict(encoded)
    elif isinstance(classifier, BertClassifier):
        inputs = {
            "token_ids": encoded,
            "segment_ids": SegmentIds(name="segments")(encoded),
        }
    else:
        inputs = encoded
    wide = wide_layer(classifier)
    if wide is None:
        return inputs
    if not isinstance(inputs, dict):
        inputs = {"token_ids": inputs}
    inputs["ngram_ids"] = HashedNgrams.matching(wide)(text)
    return inputs
