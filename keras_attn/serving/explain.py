"""What the `explain` signature of an export returns: the model's `explain_model()`.

Every model class that can explain its outputs has `explain_model()`: a
`keras.Model` on its inputs returning its outputs plus the weights that explain them.
A CTR model's are its task outputs plus each task's gate weights over the experts
(`{task}_gate_weights`, `(batch, num_experts)`, rows summing to 1) and, when it has
AutoInt interacting layers, each layer's attention across fields
(`field_attention_{i}`, `(batch, num_heads, fields, fields)`). A text classifier's
are `probabilities` plus HAN's `word_attention` `(batch, sentences, words)` and
`sentence_attention` `(batch, sentences)`, or, for a `pooling="cls"` Transformer and
a `BertClassifier`, the attention of the `[CLS]` token in the last layer,
`cls_attention` `(batch, num_heads, sequence_length)`; the text signature takes raw
strings and adds `label`.
"""

from __future__ import annotations

from keras_attn.layers.labels import PredictedLabel
from keras_attn.models.text_preprocessor import text_preprocessor

__all__ = ["ctr_explain_fn", "explain_model_of", "text_explain_fn"]


def explain_model_of(model):
    """`model.explain_model()`, or a clear error for a model without one."""
    if not callable(getattr(model, "explain_model", None)):
        raise ValueError(
            "`model` must be a keras_attn model class with `explain_model()` (a "
            "CTRModel, a text classifier, a cloze reader) for an explain signature. "
            f"Received: model={type(model).__name__}"
        )
    return model.explain_model()


def ctr_explain_fn(model):
    """The explain function of a `CTRModel`: raw inputs -> outputs.

    Args:
        model: a `CTRModel` with an MMoE or PLE block, or with interacting layers.

    Returns:
        A function `inputs dict -> outputs dict` sharing the model's weights.
    """
    explainer = explain_model_of(model)

    def explain(inputs):
        return dict(explainer(inputs, training=False))

    return explain


def text_explain_fn(classifier, tokenizer, class_names=None):
    """The explain function of a text classifier: `{"text"}` -> outputs.

    Args:
        classifier: a `HANClassifier`, a `TransformerClassifier` with
            `pooling="cls"`, or a `BertClassifier`; the last two with layers of
            their own (not `share_layers`).
        tokenizer: its tokenizer layer, or its `TextPreprocessor`.
        class_names: optional list of str for `label`.

    Returns:
        A function `{"text": (batch,) string} -> {"probabilities", "label", ...}`
        sharing the classifier's weights.
    """
    explainer = explain_model_of(classifier)
    # The classifier's inputs from raw strings, as the serving model makes them.
    preprocessor = text_preprocessor(classifier, tokenizer)
    label = PredictedLabel(class_names, name="label")

    def explain(inputs):
        ids = preprocessor(inputs["text"])
        out = dict(explainer(ids, training=False))
        out["label"] = label(out["probabilities"])
        return out

    return explain
