"""What the `explain` signature of an export returns: the model's own weights.

A CTR model's explain outputs are its task outputs plus each task's gate weights over
the experts (`{task}_gate_weights`, `(batch, num_experts)`, rows summing to 1) and,
when it has AutoInt interacting layers, each layer's attention across fields
(`field_attention_{i}`, `(batch, num_heads, fields, fields)`). A text classifier's are
`probabilities` and `label` plus HAN's `word_attention` `(batch, sentences, words)`
and `sentence_attention` `(batch, sentences)`, or a `pooling="cls"` Transformer's
attention of the `[CLS]` token in its last layer, `cls_attention`
`(batch, num_heads, sequence_length)`.
"""

from __future__ import annotations

from keras_attn.backend import KERAS_3, keras

__all__ = ["ctr_explain_fn", "text_explain_fn"]


def _output_dict(model) -> dict:
    if KERAS_3:
        return dict(model.output)
    return dict(zip(model.output_names, model.outputs))


def ctr_explain_fn(model):
    """The explain function of a `build_ctr_model` model: raw inputs -> outputs.

    The gates come out of the same forward pass as the predictions (one model with
    both as outputs); each interacting layer is run once more on its own input to
    return its weights (the layer is small next to the whole graph).

    Args:
        model: a model from `build_ctr_model` with an MMoE or PLE layer, or with
            interacting layers.

    Returns:
        A function `inputs dict -> outputs dict` sharing the model's weights.
    """
    from keras_attn.layers import InteractingLayer
    from keras_attn.models.ctr import gate_weights_model

    outputs = _output_dict(model)
    try:
        gates = gate_weights_model(model).output
    except ValueError:
        gates = {}
    interacting = [
        layer for layer in model.layers if isinstance(layer, InteractingLayer)
    ]
    if not gates and not interacting:
        raise ValueError(
            f"Model {model.name!r} has neither MMoE/PLE gates nor interacting layers: "
            "there is nothing for an explain signature to return"
        )
    combined = {**outputs, **{f"{t}_gate_weights": g for t, g in gates.items()}}
    for i, layer in enumerate(interacting):
        fields = layer.input
        if isinstance(fields, (list, tuple)):
            fields = fields[0]
        combined[f"_field_input_{i}"] = fields
    forward = keras.Model(model.inputs, combined, name=f"{model.name}_explain")

    def explain(inputs):
        values = dict(forward(inputs, training=False))
        for i, layer in enumerate(interacting):
            fields = values.pop(f"_field_input_{i}")  # (batch, fields, dim)
            _, weights = layer(fields, return_attention_scores=True)
            values[f"field_attention_{i}"] = weights  # (batch, heads, f, f)
        return values

    return explain


def text_explain_fn(classifier, tokenizer, class_names=None):
    """The explain function of a text classifier: `{"text"}` -> outputs.

    Args:
        classifier: a model from `build_han_classifier`, or from
            `build_transformer_classifier` with `pooling="cls"` and layers of their
            own (not `share_layers`).
        tokenizer: its tokenizer layer.
        class_names: optional list of str for `label`.

    Returns:
        A function `{"text": (batch,) string} -> {"probabilities", "label", ...}`
        sharing the classifier's weights.
    """
    from keras_attn.layers.transformer import TransformerEncoderBlock
    from keras_attn.models.text import han_attention_model, wide_layer
    from keras_attn.text.layers import PredictedLabel, SequencePooling

    label = PredictedLabel(class_names, name="label")
    wide = wide_layer(classifier)
    hasher = wide.hasher() if wide is not None else None

    def model_inputs(text):
        # The classifier's inputs from raw strings, as the serving model makes them:
        # token ids, and the hashed n-gram ids of a wide part.
        ids = tokenizer(text)
        if hasher is None:
            return ids
        return {"token_ids": ids, "ngram_ids": hasher(text)}

    names = {layer.name for layer in classifier.layers}
    if "word_attention" in names and "sentence_attention" in names:
        han = han_attention_model(classifier)

        def explain(inputs):
            out = dict(han(model_inputs(inputs["text"]), training=False))
            out["label"] = label(out["probabilities"])
            return out

        return explain

    blocks = [la for la in classifier.layers if isinstance(la, TransformerEncoderBlock)]
    pooling = [la for la in classifier.layers if isinstance(la, SequencePooling)]
    if not blocks or not pooling or pooling[0].mode != "cls":
        raise ValueError(
            "`classifier` must be a HAN or a `pooling='cls'` Transformer classifier "
            f"to have an explain signature. Received: {classifier.name!r}"
        )
    last = blocks[-1]
    # The last block's input and the padding mask come out of the same pass as the
    # probabilities; the block's attention is then run once more for its weights.
    try:
        block_input = last.input
        if isinstance(block_input, (list, tuple)):
            block_input = block_input[0]  # Keras 3 lists the padding mask too
        mask = next(la for la in classifier.layers if la.name == "token_mask").output
    except (AttributeError, ValueError, RuntimeError, StopIteration):
        raise ValueError(
            "`classifier` must call its last Transformer block once (not "
            f"`share_layers=True`) to have an explain signature: {classifier.name!r}"
        ) from None
    forward = keras.Model(
        classifier.inputs,
        {
            "probabilities": _output_dict(classifier)["probabilities"],
            "block_input": block_input,
            "mask": mask,
        },
    )

    def explain(inputs):
        out = forward(model_inputs(inputs["text"]), training=False)
        x = out["block_input"]  # (batch, seq_len, hidden)
        if last.normalize_first:
            x = last.attention_norm(x)
        _, scores = last.attention(
            x, x, value_mask=out["mask"], return_attention_scores=True
        )  # (batch, heads, seq_len, seq_len)
        return {
            "probabilities": out["probabilities"],
            "label": label(out["probabilities"]),
            "cls_attention": scores[:, :, 0, :],
        }

    return explain
