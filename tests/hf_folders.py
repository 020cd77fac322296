"""Tiny Hugging Face model folders (config.json + model.safetensors + vocab.txt) for
`bert`, `distilbert` and `albert`, written with `safetensors.numpy`, and the forward
pass of those architectures written out in NumPy from Hugging Face's modeling code
(BertModel, DistilBertModel, AlbertModel and their `ForSequenceClassification`
heads), to compare keras_attn's outputs against."""

from __future__ import annotations

import json
import math

import numpy as np
from safetensors.numpy import save_file

V, H, HEADS, INTER, LAYERS, POSITIONS, TYPES, EMBED = 40, 8, 2, 16, 2, 12, 2, 4
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(30)]

_CONFIGS = {
    "bert": {
        "model_type": "bert",
        "vocab_size": V,
        "hidden_size": H,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "intermediate_size": INTER,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": POSITIONS,
        "type_vocab_size": TYPES,
        "layer_norm_eps": 1e-12,
    },
    "distilbert": {
        "model_type": "distilbert",
        "vocab_size": V,
        "dim": H,
        "n_layers": LAYERS,
        "n_heads": HEADS,
        "hidden_dim": INTER,
        "activation": "gelu",
        "dropout": 0.1,
        "attention_dropout": 0.1,
        "max_position_embeddings": POSITIONS,
        "seq_classif_dropout": 0.2,
    },
    "albert": {
        "model_type": "albert",
        "vocab_size": V,
        "embedding_size": EMBED,
        "hidden_size": H,
        "num_hidden_layers": 3,
        "num_attention_heads": HEADS,
        "intermediate_size": INTER,
        "hidden_act": "gelu_new",
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "max_position_embeddings": POSITIONS,
        "type_vocab_size": TYPES,
        "layer_norm_eps": 1e-12,
        "num_hidden_groups": 1,
        "inner_group_num": 1,
    },
}
_BLOCK = {
    "bert": (
        "encoder.layer.{i}.",
        {
            "q": "attention.self.query",
            "k": "attention.self.key",
            "v": "attention.self.value",
            "o": "attention.output.dense",
            "ln1": "attention.output.LayerNorm",
            "ff1": "intermediate.dense",
            "ff2": "output.dense",
            "ln2": "output.LayerNorm",
        },
    ),
    "distilbert": (
        "transformer.layer.{i}.",
        {
            "q": "attention.q_lin",
            "k": "attention.k_lin",
            "v": "attention.v_lin",
            "o": "attention.out_lin",
            "ln1": "sa_layer_norm",
            "ff1": "ffn.lin1",
            "ff2": "ffn.lin2",
            "ln2": "output_layer_norm",
        },
    ),
    "albert": (
        "encoder.albert_layer_groups.0.albert_layers.0.",
        {
            "q": "attention.query",
            "k": "attention.key",
            "v": "attention.value",
            "o": "attention.dense",
            "ln1": "attention.LayerNorm",
            "ff1": "ffn",
            "ff2": "ffn_output",
            "ln2": "full_layer_layer_norm",
        },
    ),
}


def config(model_type: str) -> dict:
    return dict(_CONFIGS[model_type])


def weights(model_type: str, num_labels: int | None = None, seed: int = 0) -> dict:
    """Random weights under Hugging Face's names (no task prefix)."""
    rng = np.random.default_rng(seed)
    cfg = _CONFIGS[model_type]
    width = EMBED if model_type == "albert" else H

    def normal(*shape):
        return rng.normal(0, 0.5, size=shape).astype("float32")

    w = {
        "embeddings.word_embeddings.weight": normal(V, width),
        "embeddings.position_embeddings.weight": normal(POSITIONS, width),
        "embeddings.LayerNorm.weight": 1 + normal(width),
        "embeddings.LayerNorm.bias": normal(width),
    }
    if model_type != "distilbert":
        w["embeddings.token_type_embeddings.weight"] = normal(TYPES, width)
    if model_type == "albert":
        w["encoder.embedding_hidden_mapping_in.weight"] = normal(H, EMBED)
        w["encoder.embedding_hidden_mapping_in.bias"] = normal(H)
    prefix, names = _BLOCK[model_type]
    layers = 1 if model_type == "albert" else cfg.get("num_hidden_layers", LAYERS)
    for i in range(layers):
        p = prefix.format(i=i)
        for role in ("q", "k", "v", "o"):
            w[f"{p}{names[role]}.weight"] = normal(H, H)
            w[f"{p}{names[role]}.bias"] = normal(H)
        w[f"{p}{names['ff1']}.weight"] = normal(INTER, H)
        w[f"{p}{names['ff1']}.bias"] = normal(INTER)
        w[f"{p}{names['ff2']}.weight"] = normal(H, INTER)
        w[f"{p}{names['ff2']}.bias"] = normal(H)
        for role in ("ln1", "ln2"):
            w[f"{p}{names[role]}.weight"] = 1 + normal(H)
            w[f"{p}{names[role]}.bias"] = normal(H)
    pooler = {"bert": "pooler.dense", "albert": "pooler", "distilbert": None}
    if pooler[model_type]:
        w[f"{pooler[model_type]}.weight"] = normal(H, H)
        w[f"{pooler[model_type]}.bias"] = normal(H)
    if num_labels:
        if model_type == "distilbert":
            w["pre_classifier.weight"] = normal(H, H)
            w["pre_classifier.bias"] = normal(H)
        w["classifier.weight"] = normal(num_labels, H)
        w["classifier.bias"] = normal(num_labels)
    return w


def write_folder(
    path, model_type: str, num_labels=None, tensors=None, config_changes=None
) -> dict:
    """Writes a folder; returns the weights (HF names, without task prefix)."""
    path.mkdir(parents=True, exist_ok=True)
    w = weights(model_type, num_labels) if tensors is None else tensors
    cfg = config(model_type)
    stored = dict(w)
    if num_labels:
        cfg["architectures"] = ["ForSequenceClassification"]
        cfg["id2label"] = {str(i): f"class_{i}" for i in range(num_labels)}
        # A task model's file prefixes the encoder's names with the model type.
        stored = {
            (
                n
                if n.startswith(("classifier.", "pre_classifier."))
                else f"{model_type}.{n}"
            ): v
            for n, v in w.items()
        }
    cfg.update(config_changes or {})
    (path / "config.json").write_text(json.dumps(cfg))
    (path / "vocab.txt").write_text("".join(f"{t}\n" for t in VOCAB))
    (path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    save_file(stored, str(path / "model.safetensors"), metadata={"format": "pt"})
    return w


def _layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


_erf = np.vectorize(math.erf)


def _gelu(x, approximate):
    if approximate:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def forward(w: dict, model_type: str, ids, segments) -> dict:
    """Hugging Face's forward pass in NumPy (float64): `sequence_output`,
    `pooled_output` (DistilBERT: ReLU(pre_classifier) when the weights hold one)
    and `probabilities` when the weights hold a classifier."""
    w = {k: v.astype("float64") for k, v in w.items()}
    cfg = _CONFIGS[model_type]

    def linear(x, name):
        return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]

    def norm(x, name):
        return _layer_norm(x, w[f"{name}.weight"], w[f"{name}.bias"])

    length = ids.shape[1]
    x = w["embeddings.word_embeddings.weight"][ids]
    x = x + w["embeddings.position_embeddings.weight"][:length]
    if model_type != "distilbert":
        x = x + w["embeddings.token_type_embeddings.weight"][segments]
    x = norm(x, "embeddings.LayerNorm")
    if model_type == "albert":
        x = linear(x, "encoder.embedding_hidden_mapping_in")
    # Hugging Face's additive mask: padded keys get the dtype's lowest value.
    bias = np.where(ids != 0, 0.0, np.finfo("float64").min)[:, None, None, :]
    prefix, names = _BLOCK[model_type]
    layers = cfg.get("num_hidden_layers", cfg.get("n_layers"))
    approximate = cfg.get("hidden_act", cfg.get("activation")) != "gelu"
    head_dim = H // HEADS
    for i in range(layers):
        p = prefix.format(i=0 if model_type == "albert" else i)

        def heads(t):  # (b, l, h) -> (b, heads, l, d)
            return t.reshape(t.shape[0], length, HEADS, head_dim).transpose(0, 2, 1, 3)

        q, k, v = (heads(linear(x, p + names[r])) for r in ("q", "k", "v"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head_dim) + bias
        scores = scores - scores.max(-1, keepdims=True)
        probs = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        x = norm(x + linear(context, p + names["o"]), p + names["ln1"])
        hidden = _gelu(linear(x, p + names["ff1"]), approximate)
        x = norm(x + linear(hidden, p + names["ff2"]), p + names["ln2"])
    out = {"sequence_output": x}
    cls = x[:, 0]
    if model_type == "distilbert":
        if "pre_classifier.weight" in w:
            out["pooled_output"] = np.maximum(linear(cls, "pre_classifier"), 0)
    else:
        pooler = "pooler.dense" if model_type == "bert" else "pooler"
        out["pooled_output"] = np.tanh(linear(cls, pooler))
    if "classifier.weight" in w:
        logits = linear(out["pooled_output"], "classifier")
        e = np.exp(logits - logits.max(-1, keepdims=True))
        out["probabilities"] = e / e.sum(-1, keepdims=True)
    return out
