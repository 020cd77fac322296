"""Hugging Face model folders: `config.json` + `model.safetensors` (or a sharded
`model.safetensors.index.json`), read and written with `safetensors`' NumPy API (no
PyTorch), for the `bert`, `distilbert` and `albert` model types.

`HFCheckpoint(path)` reads the config and opens the weights; `backbone_settings()`
translates the config into `BertBackbone` arguments; `load_backbone`/`load_head`
assign the weights through `bert_weights`' layouts; `save_folder` writes a model
back. Every error names the file and, where there is one, the weight.
"""

from __future__ import annotations

import json
from pathlib import Path

from keras_attn.models.bert_weights import (
    HEAD_PREFIXES,
    assign_weights,
    hf_backbone_layout,
    hf_head_layout,
    read_weights,
)
from keras_attn.text.bert_tokenizer import VOCAB_FILE, write_file

__all__ = ["MODEL_TYPES", "HFCheckpoint", "hf_model_type", "save_folder"]

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
MODEL_TYPES = ("bert", "distilbert", "albert")

# Hugging Face's `hidden_act` -> the backbone's activation. "gelu" is the exact
# (erf) GELU; the tanh form goes by three names.
_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_approximate",
    "gelu_pytorch_tanh": "gelu_approximate",
    "gelu_fast": "gelu_approximate",
    "relu": "relu",
}
_HF_ACTIVATION = {"gelu": "gelu", "gelu_approximate": "gelu_new", "relu": "relu"}
# The config's name of each setting, per model type.
_CONFIG_KEYS = {
    "bert": {
        "vocabulary_size": "vocab_size",
        "hidden_dim": "hidden_size",
        "num_layers": "num_hidden_layers",
        "num_heads": "num_attention_heads",
        "intermediate_dim": "intermediate_size",
        "activation": "hidden_act",
        "dropout": "hidden_dropout_prob",
        "max_sequence_length": "max_position_embeddings",
        "type_vocabulary_size": "type_vocab_size",
        "layer_norm_epsilon": "layer_norm_eps",
    },
    "distilbert": {
        "vocabulary_size": "vocab_size",
        "hidden_dim": "dim",
        "num_layers": "n_layers",
        "num_heads": "n_heads",
        "intermediate_dim": "hidden_dim",
        "activation": "activation",
        "dropout": "dropout",
        "max_sequence_length": "max_position_embeddings",
    },
}
_CONFIG_KEYS["albert"] = {
    **_CONFIG_KEYS["bert"],
    "embedding_dim": "embedding_size",
}
# The classifier head's dropout, per model type (BERT's falls back on the hidden).
_HEAD_DROPOUT = {
    "bert": ("classifier_dropout", "hidden_dropout_prob"),
    "distilbert": ("seq_classif_dropout",),
    "albert": ("classifier_dropout_prob",),
}


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} could not be read as JSON: {error}") from None


def hf_model_type(backbone) -> str:
    """The Hugging Face `model_type` a `BertBackbone`'s architecture is."""
    if backbone.embedding_dim is not None:
        if backbone.factorize == "all" and backbone.share_layers:
            return "albert"
        raise ValueError(
            "`backbone` must be a Hugging Face architecture to be saved: a factorized "
            "embedding exists there only as ALBERT's (factorize='all', "
            f"share_layers=True). Received: factorize={backbone.factorize!r}, "
            f"share_layers={backbone.share_layers}"
        )
    if backbone.share_layers:
        raise ValueError(
            "`backbone` must be a Hugging Face architecture to be saved: shared "
            "layers exist there only in ALBERT (with embedding_dim). Received: "
            "share_layers=True, embedding_dim=None"
        )
    if backbone.type_vocabulary_size == 0:
        if backbone.pooler_activation != "relu":
            raise ValueError(
                "`backbone` without segment embeddings is DistilBERT, whose pooler "
                "(its classifier's `pre_classifier`) is ReLU. Received: "
                f"pooler_activation={backbone.pooler_activation!r}"
            )
        return "distilbert"
    if backbone.pooler_activation != "tanh":
        raise ValueError(
            "`backbone` with segment embeddings is BERT, whose pooler is tanh. "
            f"Received: pooler_activation={backbone.pooler_activation!r}"
        )
    return "bert"


class HFCheckpoint:
    """A Hugging Face model folder, opened: its config and its weights.

    Args:
        path: the folder (`config.json` and `model.safetensors`, or
            `model.safetensors.index.json` and its shards).
    """

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise ValueError(
                "`path` must be a Hugging Face model folder (config.json, "
                f"model.safetensors). Received: path={str(path)!r}"
            )
        self.config_file = self.path / CONFIG_FILE
        if not self.config_file.is_file():
            raise ValueError(f"{self.config_file} is missing: the folder has no config")
        self.config = _read_json(self.config_file)
        self.model_type = self.config.get("model_type")
        if self.model_type not in MODEL_TYPES:
            raise ValueError(
                f"{self.config_file}: `model_type` must be one of {list(MODEL_TYPES)}. "
                f"Received: model_type={self.model_type!r}"
            )
        self._files = self._weight_files()  # {name: file}
        self._open = {}
        # The backbone's names carry the task model's prefix ("bert.") when the
        # file is a task model's.
        prefix = f"{self.model_type}."
        self.prefix = prefix if any(n.startswith(prefix) for n in self._files) else ""

    def _weight_files(self) -> dict:
        single, index = self.path / WEIGHTS_FILE, self.path / INDEX_FILE
        if single.is_file():
            return dict.fromkeys(self._names_in(single), single)
        if index.is_file():
            weight_map = _read_json(index).get("weight_map")
            if not isinstance(weight_map, dict) or not weight_map:
                raise ValueError(
                    f"{index}: `weight_map` must map weight names to files"
                )
            files = {n: self.path / f for n, f in weight_map.items()}
            for file in set(files.values()):
                if not file.is_file():
                    raise ValueError(f"{file} is missing: {index} names it")
            return files
        raise ValueError(
            f"{self.path} holds neither {WEIGHTS_FILE} nor {INDEX_FILE} (PyTorch "
            "`.bin` files are not read: they need PyTorch)"
        )

    @staticmethod
    def _names_in(file) -> list:
        from safetensors import safe_open

        with safe_open(str(file), framework="numpy") as handle:
            return list(handle.keys())

    def names(self) -> set:
        return set(self._files)

    def read(self, name: str):
        """The NumPy value of weight `name`, or None when no file holds it.
        `LayerNorm.weight`/`.bias` are also found under the older
        `LayerNorm.gamma`/`.beta`."""
        if name not in self._files:
            for new, old in ((".weight", ".gamma"), (".bias", ".beta")):
                if "LayerNorm" in name and name.endswith(new):
                    alias = name[: -len(new)] + old
                    if alias in self._files:
                        return self.read(alias)
            return None
        file = self._files[name]
        if file not in self._open:
            from safetensors import safe_open

            self._open[file] = safe_open(str(file), framework="numpy")
        try:
            return self._open[file].get_tensor(name)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"{file}: the weight {name!r} cannot be read as a NumPy array "
                f"({error}); bfloat16 files need converting to float32 first"
            ) from None

    def _setting(self, key, default=None, required=True):
        if key not in self.config:
            if required:
                raise ValueError(f"{self.config_file} lacks `{key}`")
            return default
        return self.config[key]

    def backbone_settings(self) -> dict:
        """`BertBackbone` arguments from the config (`sequence_length` aside)."""
        keys = _CONFIG_KEYS[self.model_type]
        settings = {name: self._setting(key) for name, key in keys.items()}
        key, activation = keys["activation"], settings["activation"]
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"{self.config_file}: `{key}` must be one of "
                f"{sorted(_ACTIVATIONS)}. Received: {key}={activation!r}"
            )
        settings["activation"] = _ACTIVATIONS[activation]
        position_type = self.config.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise ValueError(
                f"{self.config_file}: `position_embedding_type` must be 'absolute'. "
                f"Received: position_embedding_type={position_type!r}"
            )
        if self.model_type == "distilbert":
            # DistilBERT: no segments, LayerNorm epsilon fixed at 1e-12, and a
            # ReLU `pre_classifier` where BERT has its tanh pooler.
            settings.update(
                type_vocabulary_size=0,
                layer_norm_epsilon=1e-12,
                pooler_activation="relu",
            )
        if self.model_type == "albert":
            for key in ("num_hidden_groups", "inner_group_num"):
                if self.config.get(key, 1) != 1:
                    raise ValueError(
                        f"{self.config_file}: `{key}` must be 1 (one block shared by "
                        f"every layer). Received: {key}={self.config[key]!r}"
                    )
            settings.update(share_layers=True, factorize="all")
        self._check_vocabulary(settings["vocabulary_size"])
        return settings

    def _check_vocabulary(self, table_rows: int) -> None:
        vocab_file = self.path / VOCAB_FILE
        if not vocab_file.is_file():
            return
        tokens = sum(1 for line in vocab_file.read_text("utf-8").split("\n") if line)
        # A table padded past the vocabulary (e.g. to a multiple of 8) is fine; a
        # vocabulary past the table gives ids without a row.
        if tokens > table_rows:
            raise ValueError(
                f"{vocab_file} has {tokens} tokens, more than the {table_rows} rows of "
                f"the embedding table ({self.config_file} `vocab_size`)"
            )

    def has_classifier_head(self) -> bool:
        return "classifier.weight" in self._files

    def head_settings(self) -> dict:
        """`num_classes`, `class_names` and `dropout` of the folder's
        `*ForSequenceClassification` head (its config's `id2label`)."""
        problem = self.config.get("problem_type")
        if problem not in (None, "single_label_classification"):
            raise ValueError(
                f"{self.config_file}: `problem_type` must be "
                "'single_label_classification' (a softmax head). Received: "
                f"problem_type={problem!r}"
            )
        id2label = self.config.get("id2label") or {}
        rows = self.read("classifier.weight").shape[0]
        names = [id2label.get(str(i), id2label.get(i)) for i in range(rows)]
        if len(id2label) != rows or None in names:
            raise ValueError(
                f"{self.config_file}: `id2label` must name the {rows} classes of "
                f"classifier.weight. Received: id2label={id2label!r}"
            )
        dropout = next(
            (
                self.config[k]
                for k in _HEAD_DROPOUT[self.model_type]
                if self.config.get(k) is not None
            ),
            0.1,
        )
        return {
            "num_classes": rows,
            "class_names": [str(n) for n in names],
            "dropout": dropout,
        }

    def _source(self, names) -> str:
        files = sorted({str(self._files[n]) for n in names if n in self._files})
        return ", ".join(files) or str(self.path)

    def load_backbone(self, backbone) -> list:
        """Assigns every encoder weight; a weight the file holds that is neither
        the encoder's nor a known head's raises ValueError."""
        layout = hf_backbone_layout(backbone, self.model_type, self.prefix)
        aliases = {
            n[: -len(old)] + new
            for n in self._files
            for old, new in ((".gamma", ".weight"), (".beta", ".bias"))
            if "LayerNorm" in n and n.endswith(old)
        }
        known = set(layout) | aliases
        for name in sorted(self._files):
            tail = name[len(self.prefix) :] if name.startswith(self.prefix) else name
            alias = name.replace(".gamma", ".weight").replace(".beta", ".bias")
            if name in known or alias in known or tail.endswith("position_ids"):
                continue
            if tail.startswith(HEAD_PREFIXES[self.model_type]):
                continue
            raise ValueError(
                f"{self._files[name]} holds the weight {name!r}, which the "
                f"{self.model_type} backbone does not have (its config is "
                f"{self.config_file})"
            )
        return assign_weights(layout, self.read, self._source(layout))

    def load_head(self, classifier) -> list:
        layout = hf_head_layout(classifier, self.model_type)
        return assign_weights(layout, self.read, self._source(layout))

    def close(self) -> None:
        self._open.clear()


def _config(backbone, model_type: str) -> dict:
    keys = _CONFIG_KEYS[model_type]
    values = {
        name: getattr(backbone, name)
        for name in keys
        if name not in ("max_sequence_length", "intermediate_dim")
    }
    values["max_sequence_length"] = backbone.position_embedding.sequence_length
    values["intermediate_dim"] = backbone.intermediate_dim or 4 * backbone.hidden_dim
    values["activation"] = _HF_ACTIVATION[backbone.activation]
    config = {"model_type": model_type}
    config.update({keys[name]: value for name, value in values.items()})
    if model_type == "distilbert":
        config.update(attention_dropout=backbone.dropout, sinusoidal_pos_embds=False)
    else:
        config["attention_probs_dropout_prob"] = backbone.dropout
        config["position_embedding_type"] = "absolute"
    if model_type == "albert":
        config.update(num_hidden_groups=1, inner_group_num=1)
    config["pad_token_id"] = 0
    return config


_ARCHITECTURE = {"bert": "Bert", "distilbert": "DistilBert", "albert": "Albert"}


def save_folder(path, backbone, classifier=None, preprocessor=None) -> None:
    """Writes a Hugging Face folder: `config.json`, `model.safetensors` (the
    backbone, and `classifier`'s head when given) and the preprocessor's
    tokenizer files. Each file is written beside its place and renamed into it."""
    from safetensors.numpy import save_file

    model_type = hf_model_type(backbone)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    config = _config(backbone, model_type)
    architecture = _ARCHITECTURE[model_type]
    if classifier is None:
        tensors = read_weights(hf_backbone_layout(backbone, model_type))
        config["architectures"] = [f"{architecture}Model"]
    else:
        tensors = read_weights(
            {
                **hf_backbone_layout(backbone, model_type, f"{model_type}."),
                **hf_head_layout(classifier, model_type),
            }
        )
        names = classifier.class_names or [
            f"LABEL_{i}" for i in range(classifier.num_classes)
        ]
        config.update(
            architectures=[f"{architecture}ForSequenceClassification"],
            id2label={str(i): str(n) for i, n in enumerate(names)},
            label2id={str(n): i for i, n in enumerate(names)},
            problem_type="single_label_classification",
        )
        config[_HEAD_DROPOUT[model_type][0]] = classifier.get_config()["dropout"]
    partial = path / f".{WEIGHTS_FILE}.partial"
    save_file(tensors, str(partial), metadata={"format": "pt"})
    partial.replace(path / WEIGHTS_FILE)
    write_file(path / CONFIG_FILE, json.dumps(config, indent=2, sort_keys=True))
    if preprocessor is not None:
        preprocessor.save_pretrained(path)
