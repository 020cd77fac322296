"""Where each weight of a `BertBackbone` lives in the checkpoint layouts it reads and
writes, and the one routine that moves values between a layout and the model.

Layouts: Google's original BERT release (TF checkpoint names such as
`bert/encoder/layer_0/attention/self/query/kernel`) and Hugging Face's `bert`,
`distilbert` and `albert` (`encoder.layer.0.attention.self.query.weight`, ...).
A layout is a dict `{checkpoint name: Slot}`; a `Slot` holds the model's variable,
the value's shape in the checkpoint and whether the checkpoint stores it as a
PyTorch `Linear` weight (`(out, in)`, the transpose of a Keras kernel). The model's
per-head attention kernels `(hidden, heads, head_dim)` and `(heads, head_dim,
hidden)` are the checkpoint's `(hidden, hidden)` matrices reshaped.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "HEAD_PREFIXES",
    "Slot",
    "assign_weights",
    "google_bert_layout",
    "hf_backbone_layout",
    "hf_head_layout",
    "read_weights",
]


class Slot(NamedTuple):
    """One weight: the model's `variable`, its `shape` in the checkpoint, and
    `linear` (stored transposed, as PyTorch's `Linear.weight`)."""

    variable: object
    shape: tuple
    linear: bool = False


def _slot(variable, linear=False, shape=None):
    """A `Slot` whose checkpoint shape is the variable's, flattened to 2-D for
    kernels (`(in, out)`, transposed when `linear`) unless `shape` is given."""
    model_shape = tuple(int(d) for d in variable.shape)
    if shape is None:
        shape = model_shape
    if linear:
        shape = tuple(reversed(shape))
    return Slot(variable, tuple(shape), linear)


def _per_head(variable, linear, into_heads: bool):
    """A query/key/value kernel `(hidden, heads, head_dim)` (`into_heads`) or an
    output kernel `(heads, head_dim, hidden)`, stored as a 2-D matrix; or a
    per-head bias `(heads, head_dim)`, stored flat."""
    shape = tuple(int(d) for d in variable.shape)
    if len(shape) == 2:  # a bias
        return Slot(variable, (shape[0] * shape[1],), False)
    matrix = (
        (shape[0], shape[1] * shape[2])
        if into_heads
        else (shape[0] * shape[1], shape[2])
    )
    return _slot(variable, linear, matrix)


def assign_weights(layout: dict, read, source: str) -> list:
    """Assigns every slot of `layout` from `read(name)` (a NumPy array, or None
    when the checkpoint lacks the name). Raises ValueError naming `source` and the
    weight for a missing weight or a shape that cannot match. Returns the names."""
    for name, slot in layout.items():
        value = read(name)
        if value is None:
            raise ValueError(
                f"{source} lacks the weight {name!r} (expected shape {slot.shape}): "
                "the model needs every weight of its layout."
            )
        if tuple(value.shape) != slot.shape:
            raise ValueError(
                f"{source}: the weight {name!r} has shape {tuple(value.shape)}, the "
                f"model expects {slot.shape}."
            )
    # Checked whole before any assignment: a failed load leaves the model as it was.
    for name, slot in layout.items():
        value = np.asarray(read(name))
        if slot.linear:
            value = value.T
        target = tuple(int(d) for d in slot.variable.shape)
        # A Keras 3 variable's dtype is a string, a tf_keras one's a tf.DType.
        dtype = getattr(slot.variable.dtype, "name", slot.variable.dtype)
        slot.variable.assign(value.reshape(target).astype(dtype))
    return list(layout)


def read_weights(layout: dict) -> dict:
    """`{name: NumPy array}` of the model's values in the checkpoint's shapes:
    the inverse of `assign_weights`."""
    values = {}
    for name, slot in layout.items():
        value = np.asarray(slot.variable.numpy())
        stored = tuple(reversed(slot.shape)) if slot.linear else slot.shape
        value = value.reshape(stored)
        values[name] = np.ascontiguousarray(value.T if slot.linear else value)
    return values


def _attention_slots(block, names: dict, linear: bool) -> dict:
    """The attention projections of `block` under `names` = `{"query": name
    prefix, "key": ..., "value": ..., "output": ...}`; `.weight`/`.bias` (HF) or
    `/kernel`/`/bias` (Google) are appended by the caller's naming."""
    attention = block.attention
    slots = {}
    for part, (kernel_name, bias_name) in names.items():
        dense = getattr(attention, f"{part}_dense")
        into_heads = part != "output"
        slots[kernel_name] = _per_head(dense.kernel, linear, into_heads)
        if part == "output":
            slots[bias_name] = _slot(dense.bias)
        else:
            slots[bias_name] = _per_head(dense.bias, linear, into_heads)
    return slots


def _block_slots(block, names: dict, linear: bool) -> dict:
    """Every weight of one `TransformerEncoderBlock`; `names` maps the roles
    ("query", "key", "value", "output", "attention_norm", "intermediate",
    "feedforward_output", "feedforward_norm") to `(weight name, bias name)`."""
    slots = _attention_slots(
        block, {p: names[p] for p in ("query", "key", "value", "output")}, linear
    )
    ff = block.feedforward
    for role, layer in (
        ("intermediate", ff.intermediate_dense),
        ("feedforward_output", ff.output_dense),
    ):
        kernel, bias = names[role]
        slots[kernel] = _slot(layer.kernel, linear)
        slots[bias] = _slot(layer.bias)
    for role, norm in (
        ("attention_norm", block.attention_norm),
        ("feedforward_norm", block.feedforward_norm),
    ):
        gamma, beta = names[role]
        slots[gamma] = _slot(norm.gamma)
        slots[beta] = _slot(norm.beta)
    return slots


def google_bert_layout(model, prefix: str = "bert") -> dict:
    """Google's BERT release: TF names, kernels stored `(in, out)`."""
    e = f"{prefix}/embeddings"
    norm = model.embeddings_norm
    slots = {
        f"{e}/word_embeddings": _slot(model.token_embedding.embeddings),
        f"{e}/token_type_embeddings": _slot(model.segment_embedding.embeddings),
        f"{e}/position_embeddings": _slot(model.position_embedding.position_embeddings),
        f"{e}/LayerNorm/gamma": _slot(norm.gamma),
        f"{e}/LayerNorm/beta": _slot(norm.beta),
        f"{prefix}/pooler/dense/kernel": _slot(model.pooler.kernel),
        f"{prefix}/pooler/dense/bias": _slot(model.pooler.bias),
    }
    for i, block in enumerate(model.transformer_layers):
        layer = f"{prefix}/encoder/layer_{i}"

        def pair(path, first="kernel", second="bias", layer=layer):
            return (f"{layer}/{path}/{first}", f"{layer}/{path}/{second}")

        names = {
            "query": pair("attention/self/query"),
            "key": pair("attention/self/key"),
            "value": pair("attention/self/value"),
            "output": pair("attention/output/dense"),
            "attention_norm": pair("attention/output/LayerNorm", "gamma", "beta"),
            "intermediate": pair("intermediate/dense"),
            "feedforward_output": pair("output/dense"),
            "feedforward_norm": pair("output/LayerNorm", "gamma", "beta"),
        }
        slots.update(_block_slots(block, names, linear=False))
    return slots


def _hf_pair(path):
    return (f"{path}.weight", f"{path}.bias")


# Per model_type: the name of each block role under `layer` (the block's prefix).
_HF_BLOCK_NAMES = {
    "bert": {
        "query": "attention.self.query",
        "key": "attention.self.key",
        "value": "attention.self.value",
        "output": "attention.output.dense",
        "attention_norm": "attention.output.LayerNorm",
        "intermediate": "intermediate.dense",
        "feedforward_output": "output.dense",
        "feedforward_norm": "output.LayerNorm",
    },
    "distilbert": {
        "query": "attention.q_lin",
        "key": "attention.k_lin",
        "value": "attention.v_lin",
        "output": "attention.out_lin",
        "attention_norm": "sa_layer_norm",
        "intermediate": "ffn.lin1",
        "feedforward_output": "ffn.lin2",
        "feedforward_norm": "output_layer_norm",
    },
    "albert": {
        "query": "attention.query",
        "key": "attention.key",
        "value": "attention.value",
        "output": "attention.dense",
        "attention_norm": "attention.LayerNorm",
        "intermediate": "ffn",
        "feedforward_output": "ffn_output",
        "feedforward_norm": "full_layer_layer_norm",
    },
}
_HF_LAYER_PREFIX = {
    "bert": "encoder.layer.{i}.",
    "distilbert": "transformer.layer.{i}.",
    "albert": "encoder.albert_layer_groups.0.albert_layers.{i}.",
}
_HF_POOLER = {"bert": "pooler.dense", "albert": "pooler", "distilbert": None}
#: Names outside the encoder that a Hugging Face file may hold and a backbone
#: does not read: pretraining heads, task heads, and the `position_ids` buffer.
HEAD_PREFIXES = {
    "bert": ("cls.", "classifier.", "qa_outputs."),
    "distilbert": (
        "vocab_transform.",
        "vocab_layer_norm.",
        "vocab_projector.",
        "pre_classifier.",
        "classifier.",
        "qa_outputs.",
    ),
    "albert": ("predictions.", "sop_classifier.", "classifier.", "qa_outputs."),
}


def hf_backbone_layout(model, model_type: str, prefix: str = "") -> dict:
    """The encoder's weights under Hugging Face's names for `model_type`
    (`prefix` is "" for a bare `BertModel` file, "bert." inside a task model)."""
    p = prefix
    slots = {
        f"{p}embeddings.word_embeddings.weight": _slot(
            model.token_embedding.embeddings
        ),
        f"{p}embeddings.position_embeddings.weight": _slot(
            model.position_embedding.position_embeddings
        ),
        f"{p}embeddings.LayerNorm.weight": _slot(model.embeddings_norm.gamma),
        f"{p}embeddings.LayerNorm.bias": _slot(model.embeddings_norm.beta),
    }
    if model.segment_embedding is not None:
        slots[f"{p}embeddings.token_type_embeddings.weight"] = _slot(
            model.segment_embedding.embeddings
        )
    if model.embeddings_projection is not None:
        projection = model.embeddings_projection
        weight, bias = _hf_pair(f"{p}encoder.embedding_hidden_mapping_in")
        slots[weight] = _slot(projection.kernel, linear=True)
        slots[bias] = _slot(projection.bias)
    roles = _HF_BLOCK_NAMES[model_type]
    for i, block in enumerate(model.transformer_layers):
        layer = p + _HF_LAYER_PREFIX[model_type].format(i=i)
        names = {role: _hf_pair(layer + path) for role, path in roles.items()}
        slots.update(_block_slots(block, names, linear=True))
    if _HF_POOLER[model_type] is not None:
        weight, bias = _hf_pair(p + _HF_POOLER[model_type])
        slots[weight] = _slot(model.pooler.kernel, linear=True)
        slots[bias] = _slot(model.pooler.bias)
    return slots


def hf_head_layout(classifier, model_type: str) -> dict:
    """A `*ForSequenceClassification` head: `classifier.*`, and for DistilBERT
    `pre_classifier.*` (the backbone's pooler)."""
    slots = {}
    if model_type == "distilbert":
        pooler = classifier.backbone.pooler
        slots["pre_classifier.weight"] = _slot(pooler.kernel, linear=True)
        slots["pre_classifier.bias"] = _slot(pooler.bias)
    slots["classifier.weight"] = _slot(classifier.output_dense.kernel, linear=True)
    slots["classifier.bias"] = _slot(classifier.output_dense.bias)
    return slots
