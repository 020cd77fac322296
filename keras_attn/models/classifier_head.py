"""The head every document classifier ends in, and the inputs of a wide part.

Plain: pooled features -> `Dense(num_classes, softmax)` -> `probabilities`, and
`PredictedLabel` -> `label`. Wide-and-deep (`wide=...`): the deep part's logits plus
an `NgramLinear` over hashed word n-grams (a second input `ngram_ids`), then the
softmax. The classifier classes (`HANClassifier`, `TransformerClassifier`,
`BertClassifier`) keep these layers as attributes: `output_dense`, `wide`,
`logits_add`, `softmax`, `predicted_label` (the wide ones None without a wide part).
`deep_part_model` and `wide_part_model` give each part of a wide-and-deep classifier
alone, sharing its weights, so the two can be trained one after the other.
"""

from __future__ import annotations

from keras_attn._validation import check_class_names
from keras_attn.backend import keras
from keras_attn.layers.labels import PredictedLabel
from keras_attn.layers.wide import NgramLinear

__all__ = [
    "CLASSIFIER_SETTINGS",
    "apply_head",
    "classifier_inputs",
    "deep_part_model",
    "head_layers",
    "head_outputs",
    "wide_layer",
    "wide_part_model",
]


def head_layers(num_classes: int, class_names=None, wide=False) -> dict:
    """The head's layers by attribute name.

    `wide` is False/None (no wide part), True (`NgramLinear`'s defaults) or a dict
    of `NgramLinear` keyword arguments (`num_buckets`, `combiner`, `dropout`,
    `ngram_widths`, `max_ngrams`, `lowercase`, `scale`).
    """
    check_class_names(class_names, num_classes)
    label = PredictedLabel(class_names, name="label")
    if wide is None or wide is False:
        probabilities = keras.layers.Dense(
            num_classes, activation="softmax", dtype="float32", name="probabilities"
        )
        return {
            "output_dense": probabilities,
            "wide": None,
            "logits_add": None,
            "softmax": None,
            "predicted_label": label,
        }
    if wide is True:
        wide = {}
    if not isinstance(wide, dict):
        raise ValueError(
            "`wide` must be a bool or a dict of NgramLinear arguments. "
            f"Received: wide={wide!r}"
        )
    return {
        # float32 logits, as the plain head's softmax is float32.
        "output_dense": keras.layers.Dense(
            num_classes, dtype="float32", name="deep_logits"
        ),
        "wide": NgramLinear(num_classes, dtype="float32", name="wide", **wide),
        "logits_add": keras.layers.Add(dtype="float32", name="logits"),
        "softmax": keras.layers.Activation(
            "softmax", dtype="float32", name="probabilities"
        ),
        "predicted_label": label,
    }


def apply_head(head, features, ngram_ids=None):
    """Probabilities from the pooled features (and the n-gram ids when wide).

    `head` is an object with the attributes of `head_layers` (a classifier).
    """
    if head.wide is None:
        return head.output_dense(features)
    logits = head.logits_add([head.output_dense(features), head.wide(ngram_ids)])
    return head.softmax(logits)


def head_outputs(head, features, ngram_ids=None) -> dict:
    """A classifier's outputs: `{"probabilities", "label"}` (see `apply_head`)."""
    probabilities = apply_head(head, features, ngram_ids)
    return {
        "probabilities": probabilities,
        "label": head.predicted_label(probabilities),
    }


#: The settings a classifier keeps as attributes.
CLASSIFIER_SETTINGS = ("num_classes", "class_names")


def classifier_inputs(token_shape, wide):
    """`(inputs, token_ids, ngram_ids)`: `token_ids` alone, or
    `{"token_ids", "ngram_ids"}` when `wide` (an `NgramLinear`) is given."""
    ids = keras.Input(shape=token_shape, dtype="int32", name="token_ids")
    if wide is None:
        return ids, ids, None
    ngram_ids = keras.Input(shape=(wide.max_ngrams,), dtype="int32", name="ngram_ids")
    return {"token_ids": ids, "ngram_ids": ngram_ids}, ids, ngram_ids


def wide_layer(model):
    """The `NgramLinear` wide part of a classifier, or None without one."""
    return getattr(model, "wide", None)


def _outputs(head, logits) -> dict:
    probabilities = keras.layers.Activation(
        "softmax", dtype="float32", name="probabilities"
    )(logits)
    return {
        "probabilities": probabilities,
        "label": head.predicted_label(probabilities),
    }


def deep_part_model(classifier):
    """The deep part of a wide-and-deep classifier alone, sharing its weights.

    Token ids `(batch, *classifier.token_shape)` (a `BertClassifier`: its
    `deep_inputs()`, token and segment ids) -> the classifier's encoder and
    `output_dense` -> softmax: `{"probabilities", "label"}`, as the classifier
    without its wide logits. Training it trains the classifier's deep layers.

    Args:
        classifier: a `HANClassifier`, `TransformerClassifier` or
            `BertClassifier` with a wide part.

    Returns:
        A functional `keras.Model` with the input `token_ids` (a
        `BertClassifier`'s: `{"token_ids", "segment_ids"}`).
    """
    _check_wide(classifier)
    if hasattr(classifier, "deep_inputs"):
        ids = classifier.deep_inputs()
    else:
        ids = keras.Input(shape=classifier.token_shape, dtype="int32", name="token_ids")
    logits = classifier.output_dense(classifier.pooled_features(ids))
    return keras.Model(ids, _outputs(classifier, logits), name="deep_part")


def wide_part_model(classifier):
    """The wide part alone: n-gram ids -> `NgramLinear` -> softmax, sharing its
    weights (`{"probabilities", "label"}`, input `ngram_ids`).

    Args:
        classifier: a classifier with a wide part.

    Returns:
        A functional `keras.Model`: a (multinomial) logistic regression on the
        wide part's features.
    """
    wide = _check_wide(classifier)
    ngram_ids = keras.Input(shape=(wide.max_ngrams,), dtype="int32", name="ngram_ids")
    return keras.Model(
        ngram_ids, _outputs(classifier, wide(ngram_ids)), name="wide_part"
    )


def _check_wide(classifier):
    wide = wide_layer(classifier)
    if wide is None or not hasattr(classifier, "pooled_features"):
        raise ValueError(
            "`classifier` must be a HANClassifier, TransformerClassifier or "
            "BertClassifier with a wide part (`wide=...`). Received: "
            f"{type(classifier).__name__} with wide={wide!r}"
        )
    return wide
