"""The BERT / ALBERT encoder (`BertBackbone`), its classifier, and Google's checkpoint
layout."""

from __future__ import annotations

import numpy as np

from keras_attn._validation import (
    check_finite,
    check_int,
    check_positive_int,
    check_rate,
)
from keras_attn.backend import keras, register, tf
from keras_attn.layers.embedding import FactorizedEmbedding
from keras_attn.layers.pooling import SequencePooling
from keras_attn.layers.position import PositionEmbedding
from keras_attn.layers.token_ids import TokenMask
from keras_attn.models.base import FunctionalModel, Parts, arguments_of
from keras_attn.models.classifier_head import (
    CLASSIFIER_SETTINGS,
    head_layers,
    head_outputs,
)
from keras_attn.models.encoder_parts import encoder_blocks, token_embedding

__all__ = [
    "BertBackbone",
    "BertClassifier",
    "bert_checkpoint_map",
    "build_bert",
    "build_bert_classifier",
    "load_bert_checkpoint",
]


@register
class BertBackbone(FunctionalModel):
    """BERT / ALBERT encoder: token + segment + position embeddings, then blocks.

    `LN(E_tok[ids] + E_seg[segments] + E_pos)` -> dropout -> `num_layers` post-LN
    `TransformerEncoderBlock`s (GELU, by default in the tanh form of Google's
    release, so its checkpoints give their numbers) -> `sequence_output`; the
    `[CLS]` vector through a tanh dense layer is `pooled_output`. `embedding_dim`
    factorizes the token embedding and `share_layers` applies one block at every
    depth (ALBERT). Layer names follow the roles of Google's checkpoint
    (`load_bert_checkpoint`).

    The parts are attributes: `token_embedding`, `segment_embedding`,
    `position_embedding`, `embeddings_norm`, `transformer_layers` (the distinct
    blocks: one with `share_layers`) and `pooler`; the settings too
    (`vocabulary_size`, `sequence_length`, `hidden_dim`, ...).

    Paper: "BERT", Devlin et al., NAACL 2019; "ALBERT", Lan et al., ICLR 2020.

    Args:
        vocabulary_size: int. WordPiece vocabulary size (id 0 is padding).
        sequence_length: int. Maximum positions. Defaults to 128.
        hidden_dim: int. Width. Defaults to 256.
        num_layers: int. Depth. Defaults to 4.
        num_heads: int. Attention heads. Defaults to 4.
        intermediate_dim: int. Feed-forward width. Defaults to 4·hidden_dim.
        type_vocabulary_size: int. Number of segment ids. Defaults to 2.
        embedding_dim: int. Factorized token-embedding width, or None.
        share_layers: bool. ALBERT cross-layer sharing. Defaults to False.
        dropout: float. Dropout everywhere. Defaults to 0.1.
        layer_norm_epsilon: float. Defaults to 1e-12 (BERT's).
        activation: str. Feed-forward activation: "gelu_approximate" (Google's
            tanh form), "gelu" (exact) or "relu". Defaults to "gelu_approximate".
        name: str. Model name. Defaults to "bert".

    Call arguments:
        inputs: `{"token_ids", "segment_ids"}`, int32 `(batch, sequence_length)`.

    Returns:
        `{"sequence_output": (batch, sequence_length, hidden_dim),
        "pooled_output": (batch, hidden_dim)}`.

    Example:

    >>> import numpy as np
    >>> bert = BertBackbone(100, sequence_length=8, hidden_dim=8, num_layers=2,
    ...                     num_heads=2)
    >>> ids = np.ones((2, 8), "int32")
    >>> out = bert({"token_ids": ids, "segment_ids": np.zeros_like(ids)})
    >>> out["sequence_output"].shape, out["pooled_output"].shape
    (TensorShape([2, 8, 8]), TensorShape([2, 8]))
    >>> bert.token_embedding.input_dim, len(bert.transformer_layers)
    (100, 2)
    """

    def __init__(
        self,
        vocabulary_size: int,
        sequence_length: int = 128,
        hidden_dim: int = 256,
        num_layers: int = 4,
        num_heads: int = 4,
        intermediate_dim: int | None = None,
        type_vocabulary_size: int = 2,
        embedding_dim: int | None = None,
        share_layers: bool = False,
        dropout: float = 0.1,
        layer_norm_epsilon: float = 1e-12,
        activation: str = "gelu_approximate",
        name: str = "bert",
        **kwargs,
    ):
        arguments = arguments_of(locals())
        # The encoder's settings are checked where its parts are made.
        check_positive_int("sequence_length", sequence_length)
        check_positive_int("type_vocabulary_size", type_vocabulary_size)
        check_finite(
            "layer_norm_epsilon", layer_norm_epsilon, minimum=0, exclusive_minimum=True
        )

        # Layers
        blocks = encoder_blocks(arguments)
        parts = Parts(
            token_mask=TokenMask(name="token_mask"),
            token_embedding=token_embedding(vocabulary_size, hidden_dim, embedding_dim),
            segment_embedding=keras.layers.Embedding(
                type_vocabulary_size, hidden_dim, name="segment_embedding"
            ),
            position_embedding=PositionEmbedding(
                sequence_length, name="position_embedding"
            ),
            embeddings_add=keras.layers.Add(name="embeddings"),
            embeddings_norm=keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, name="embeddings_norm"
            ),
            embeddings_dropout=keras.layers.Dropout(dropout, name="embeddings_dropout"),
            transformer_layers=blocks,
            cls_token=SequencePooling("cls", name="cls_token"),
            pooler=keras.layers.Dense(hidden_dim, activation="tanh", name="pooler"),
        )

        # Graph
        ids = keras.Input(shape=(sequence_length,), dtype="int32", name="token_ids")
        segments = keras.Input(
            shape=(sequence_length,), dtype="int32", name="segment_ids"
        )
        mask = parts.token_mask(ids)
        tokens = parts.token_embedding(ids)
        x = parts.embeddings_add(
            [
                tokens,
                parts.segment_embedding(segments),
                parts.position_embedding(tokens),
            ]
        )
        x = parts.embeddings_dropout(parts.embeddings_norm(x))
        for index in range(num_layers):
            x = blocks[0 if share_layers else index](x, padding_mask=mask)
        pooled = parts.pooler(parts.cls_token(x))
        self._init_functional(
            {"token_ids": ids, "segment_ids": segments},
            {"sequence_output": x, "pooled_output": pooled},
            parts,
            arguments,
            name,
            tuple(arguments),
            **kwargs,
        )


def build_bert(*args, **kwargs) -> BertBackbone:
    """`build_bert(...)` is `BertBackbone(...)`: the same arguments.

    Example:

    >>> bert = build_bert(100, sequence_length=8, hidden_dim=8, num_heads=2)
    >>> type(bert).__name__, bert.num_layers, bert.activation
    ('BertBackbone', 4, 'gelu_approximate')
    """
    return BertBackbone(*args, **kwargs)


def check_backbone(backbone, name: str = "backbone") -> BertBackbone:
    """`backbone` must be a `BertBackbone` (from `build_bert`)."""
    if not isinstance(backbone, BertBackbone):
        raise ValueError(
            f"`{name}` must be a BertBackbone (from `build_bert`). Received: "
            f"{name}={type(backbone).__name__}"
        )
    return backbone


@register
class BertClassifier(FunctionalModel):
    """A classifier on a (pretrained) `BertBackbone`, for fine-tuning.

    `pooled_output` -> dropout -> `Dense(num_classes, softmax)`. The backbone object
    is used as is (not copied), so its pretrained weights are the starting point;
    it is the attribute `backbone` and travels in the config, so a `.keras` file
    reloads both. Compile with `keras_attn.models.compile_text_classifier`.

    Args:
        backbone: a `BertBackbone`.
        num_classes: int >= 2.
        dropout: float in [0, 1). Defaults to 0.1.
        class_names: optional list of str: `label` gives names. Defaults to None.
        name: str. Defaults to "bert_classifier".

    Call arguments:
        inputs: `{"token_ids", "segment_ids"}`, int32 `(batch, sequence_length)`.

    Returns:
        `{"probabilities": (batch, num_classes), "label": (batch,)}`.

    Example:

    >>> import numpy as np
    >>> bert = BertBackbone(50, sequence_length=6, hidden_dim=8, num_layers=1,
    ...                     num_heads=2)
    >>> model = BertClassifier(bert, 3)
    >>> ids = np.ones((2, 6), "int32")
    >>> model({"token_ids": ids, "segment_ids": 0 * ids})["probabilities"].shape
    TensorShape([2, 3])
    >>> model.backbone is bert
    True
    """

    def __init__(
        self,
        backbone,
        num_classes: int,
        dropout: float = 0.1,
        class_names: list[str] | None = None,
        name: str = "bert_classifier",
        **kwargs,
    ):
        if isinstance(backbone, dict):  # from a config
            backbone = keras.saving.deserialize_keras_object(backbone)
        check_backbone(backbone)
        check_int("num_classes", num_classes, minimum=2)
        check_rate("dropout", dropout)
        arguments = {
            "num_classes": num_classes,
            "dropout": dropout,
            "class_names": class_names,
        }
        parts = Parts(
            backbone=backbone,
            classifier_dropout=keras.layers.Dropout(dropout, name="classifier_dropout"),
            **head_layers(num_classes, class_names),
        )

        length = backbone.sequence_length
        ids = keras.Input(shape=(length,), dtype="int32", name="token_ids")
        segments = keras.Input(shape=(length,), dtype="int32", name="segment_ids")
        pooled = backbone({"token_ids": ids, "segment_ids": segments})["pooled_output"]
        self._init_functional(
            {"token_ids": ids, "segment_ids": segments},
            head_outputs(parts, parts.classifier_dropout(pooled)),
            parts,
            arguments,
            name,
            CLASSIFIER_SETTINGS,
            **kwargs,
        )

    def get_config(self):
        return {
            **super().get_config(),
            "backbone": keras.saving.serialize_keras_object(self.backbone),
        }


def build_bert_classifier(
    bert,
    num_classes: int,
    dropout: float = 0.1,
    class_names: list[str] | None = None,
    name: str = "bert_classifier",
) -> BertClassifier:
    """A `BertClassifier` on `bert` (a `BertBackbone`, shared, not copied).

    Example:

    >>> import numpy as np
    >>> bert = build_bert(50, sequence_length=6, hidden_dim=8, num_layers=1,
    ...                   num_heads=2)
    >>> model = build_bert_classifier(bert, 2, class_names=["neg", "pos"])
    >>> ids = np.ones((1, 6), "int32")
    >>> model({"token_ids": ids, "segment_ids": 0 * ids})["label"].shape
    TensorShape([1])
    """
    return BertClassifier(
        bert, num_classes, dropout=dropout, class_names=class_names, name=name
    )


def bert_checkpoint_map(model, prefix: str = "bert") -> dict:
    """`{checkpoint name: variable}` for Google's BERT variable layout.

    The model is a `BertBackbone` without factorized embeddings or sharing (the
    layout of the original BERT release).
    """
    check_backbone(model, "model")
    if isinstance(model.token_embedding, FactorizedEmbedding):
        raise ValueError(
            "`model` must have a plain token embedding for the BERT layout. "
            "Received: a FactorizedEmbedding (ALBERT)"
        )
    if model.share_layers:
        raise ValueError(
            "`model` must have a block per layer for the BERT layout. "
            "Received: share_layers=True (ALBERT)"
        )
    e = f"{prefix}/embeddings"
    norm = model.embeddings_norm
    mapping = {
        f"{e}/word_embeddings": model.token_embedding.embeddings,
        f"{e}/token_type_embeddings": model.segment_embedding.embeddings,
        f"{e}/position_embeddings": model.position_embedding.position_embeddings,
        f"{e}/LayerNorm/gamma": norm.gamma,
        f"{e}/LayerNorm/beta": norm.beta,
        f"{prefix}/pooler/dense/kernel": model.pooler.kernel,
        f"{prefix}/pooler/dense/bias": model.pooler.bias,
    }
    for i, b in enumerate(model.transformer_layers):
        layer = f"{prefix}/encoder/layer_{i}"
        attention = b.attention
        for part in ("query", "key", "value"):
            dense = getattr(attention, f"{part}_dense")
            mapping[f"{layer}/attention/self/{part}/kernel"] = dense.kernel
            mapping[f"{layer}/attention/self/{part}/bias"] = dense.bias
        mapping[f"{layer}/attention/output/dense/kernel"] = (
            attention.output_dense.kernel
        )
        mapping[f"{layer}/attention/output/dense/bias"] = attention.output_dense.bias
        mapping[f"{layer}/attention/output/LayerNorm/gamma"] = b.attention_norm.gamma
        mapping[f"{layer}/attention/output/LayerNorm/beta"] = b.attention_norm.beta
        ff = b.feedforward
        mapping[f"{layer}/intermediate/dense/kernel"] = ff.intermediate_dense.kernel
        mapping[f"{layer}/intermediate/dense/bias"] = ff.intermediate_dense.bias
        mapping[f"{layer}/output/dense/kernel"] = ff.output_dense.kernel
        mapping[f"{layer}/output/dense/bias"] = ff.output_dense.bias
        mapping[f"{layer}/output/LayerNorm/gamma"] = b.feedforward_norm.gamma
        mapping[f"{layer}/output/LayerNorm/beta"] = b.feedforward_norm.beta
    return mapping


def load_bert_checkpoint(model, checkpoint_path: str, prefix: str = "bert") -> list:
    """Loads a checkpoint in Google's original BERT layout into a `BertBackbone`.

    Reads `bert/embeddings/word_embeddings`, `bert/encoder/layer_0/attention/self/
    query/kernel`, ... with `tf.train.load_checkpoint` and assigns each to its
    weight, reshaping the `(hidden, hidden)` attention kernels to the per-head
    layout. Checkpoint variables outside the encoder (e.g. `cls/predictions/...`)
    are ignored. A missing variable or a shape that cannot match raises ValueError.
    Google's numbers come out with the backbone's default
    `activation="gelu_approximate"` (the tanh GELU of its release).

    Returns:
        The checkpoint names that were loaded.
    """
    reader = tf.train.load_checkpoint(checkpoint_path)
    shapes = reader.get_variable_to_shape_map()
    loaded = []
    for ckpt_name, variable in bert_checkpoint_map(model, prefix).items():
        if ckpt_name not in shapes:
            raise ValueError(
                f"Checkpoint {checkpoint_path!r} lacks {ckpt_name!r}: the model "
                "needs every encoder variable of the BERT layout."
            )
        value = reader.get_tensor(ckpt_name)
        target = tuple(variable.shape)
        if value.size != int(np.prod(target)):
            raise ValueError(
                f"Checkpoint variable {ckpt_name!r} has shape {value.shape}, the "
                f"model's weight {target}."
            )
        variable.assign(value.reshape(target))
        loaded.append(ckpt_name)
    return loaded
