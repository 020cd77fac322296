"""What the `explain` signature of an export returns: the model's own weights.

A CTR model's explain outputs are its task outputs plus each task's gate weights over
the experts (`{task}_gate_weights`, `(batch, num_experts)`, rows summing to 1) and,
when it has AutoInt interacting layers, each layer's attention across fields
(`field_attention_{i}`, `(batch, num_heads, fields, fields)`). A text classifier's are
`probabilities` and `label` plus HAN's `word_attention` `(batch, sentences, words)`
and `sentence_attention` `(batch, sentences)`, or, for a `pooling="cls"` Transformer
and a `BertClassifier`, the attention of the `[CLS]` token in the last layer,
`cls_attention` `(batch, num_heads, sequence_length)`.
"""

from __future__ import annotations

from keras_attn.backend import KERAS_3, keras
from keras_attn.layers import InteractingLayer
from keras_attn.layers.labels import PredictedLabel
from keras_attn.models.bert import BertClassifier
from keras_attn.models.classifier_head import apply_head
from keras_attn.models.ctr import CTRModel
from keras_attn.models.han import HANClassifier
from keras_attn.models.text import text_inputs
from keras_attn.models.transformer_classifier import TransformerClassifier

__all__ = ["ctr_explain_fn", "text_explain_fn"]


def _output_dict(model) -> dict:
    if KERAS_3:
        return dict(model.output)
    return dict(zip(model.output_names, model.outputs))


def ctr_explain_fn(model):
    """The explain function of a `CTRModel`: raw inputs -> outputs.

    The gates come out of the same forward pass as the predictions (one model with
    both as outputs); each interacting layer is run once more on its own input to
    return its weights (the layer is small next to the whole graph).

    Args:
        model: a `CTRModel` with an MMoE or PLE block, or with interacting layers.

    Returns:
        A function `inputs dict -> outputs dict` sharing the model's weights.
    """
    if not isinstance(model, CTRModel):
        raise ValueError(
            "`model` must be a CTRModel (from `build_ctr_model`) for an explain "
            f"signature. Received: model={type(model).__name__}"
        )
    graph = model._graph
    outputs = _output_dict(model)
    gates = graph["gates"] or {}
    interacting = [
        (layer, fields)
        for layer, fields in zip(model.interaction, graph["interaction_inputs"])
        if isinstance(layer, InteractingLayer)
    ]
    if not gates and not interacting:
        raise ValueError(
            f"Model {model.name!r} has neither MMoE/PLE gates nor interacting layers: "
            "there is nothing for an explain signature to return"
        )
    combined = {**outputs, **{f"{t}_gate_weights": g for t, g in gates.items()}}
    for i, (_, fields) in enumerate(interacting):
        combined[f"_field_input_{i}"] = fields
    forward = keras.Model(graph["inputs"], combined, name=f"{model.name}_explain")

    def explain(inputs):
        values = dict(forward(inputs, training=False))
        for i, (layer, _) in enumerate(interacting):
            fields = values.pop(f"_field_input_{i}")  # (batch, fields, dim)
            _, weights = layer(fields, return_attention_scores=True)
            values[f"field_attention_{i}"] = weights  # (batch, heads, f, f)
        return values

    return explain


def text_explain_fn(classifier, tokenizer, class_names=None):
    """The explain function of a text classifier: `{"text"}` -> outputs.

    Args:
        classifier: a `HANClassifier`, a `TransformerClassifier` with
            `pooling="cls"`, or a `BertClassifier`; the last two with layers of
            their own (not `share_layers`).
        tokenizer: its tokenizer layer.
        class_names: optional list of str for `label`.

    Returns:
        A function `{"text": (batch,) string} -> {"probabilities", "label", ...}`
        sharing the classifier's weights.
    """
    label = PredictedLabel(class_names, name="label")

    def model_inputs(text):
        # The classifier's inputs from raw strings, as the serving model makes them.
        return text_inputs(classifier, tokenizer, text)

    if isinstance(classifier, BertClassifier):
        return _bert_explain_fn(classifier, tokenizer, label)

    if isinstance(classifier, HANClassifier):
        han = classifier.attention_model()

        def explain(inputs):
            out = dict(han(model_inputs(inputs["text"]), training=False))
            out["label"] = label(out["probabilities"])
            return out

        return explain

    settings = (
        classifier.get_config() if isinstance(classifier, TransformerClassifier) else {}
    )
    if settings.get("pooling") != "cls" or settings.get("share_layers"):
        raise ValueError(
            "`classifier` must be a HANClassifier, or a TransformerClassifier with "
            "`pooling='cls'` and a block per layer (not `share_layers=True`), to "
            f"have an explain signature. Received: {classifier.name!r}"
        )
    last = classifier.transformer_layers[-1]
    # The last block's input and the padding mask come out of the same pass as the
    # probabilities; the block's attention is then run once more for its weights.
    forward = keras.Model(
        classifier.inputs,
        {
            "probabilities": _output_dict(classifier)["probabilities"],
            "block_input": _block_input(last),
            "mask": classifier.token_mask.output,
        },
    )

    def explain(inputs):
        out = forward(model_inputs(inputs["text"]), training=False)
        return {
            "probabilities": out["probabilities"],
            "label": label(out["probabilities"]),
            "cls_attention": _cls_attention(last, out["block_input"], out["mask"]),
        }

    return explain


def _bert_explain_fn(classifier, tokenizer, label):
    """`text_explain_fn` of a `BertClassifier`: its backbone's pass gives the
    pooled output and the last block's input; the head and that block's attention
    follow."""
    backbone = classifier.backbone
    if backbone.share_layers:
        raise ValueError(
            "`classifier` must have a block per layer (not `share_layers=True`) to "
            f"have an explain signature. Received: {classifier.name!r}"
        )
    last = backbone.transformer_layers[-1]
    forward = keras.Model(
        backbone.inputs,
        {
            "pooled_output": backbone.pooler.output,
            "block_input": _block_input(last),
            "mask": backbone.token_mask.output,
        },
    )

    def explain(inputs):
        # The serving model's inputs (one segment a document, and the n-gram ids
        # of a wide part).
        ids = text_inputs(classifier, tokenizer, inputs["text"])
        out = forward(
            {"token_ids": ids["token_ids"], "segment_ids": ids["segment_ids"]},
            training=False,
        )
        # The head's dropout is the identity in inference.
        probabilities = apply_head(
            classifier, out["pooled_output"], ids.get("ngram_ids")
        )
        return {
            "probabilities": probabilities,
            "label": label(probabilities),
            "cls_attention": _cls_attention(last, out["block_input"], out["mask"]),
        }

    return explain


def _block_input(block):
    """The input tensor of an encoder block called once in its model's graph."""
    x = block.input
    return x[0] if isinstance(x, (list, tuple)) else x  # Keras 3 lists the mask too


def _cls_attention(block, x, mask):
    """The `[CLS]` row of `block`'s attention over its input `x`:
    `(batch, heads, seq_len)`."""
    if block.normalize_first:
        x = block.attention_norm(x)
    _, scores = block.attention(
        x, x, value_mask=mask, return_attention_scores=True
    )  # (batch, heads, seq_len, seq_len)
    return scores[:, :, 0, :]
