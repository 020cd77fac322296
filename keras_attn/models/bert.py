"""The BERT / ALBERT encoder (`BertBackbone`), its classifier, and Google's checkpoint
layout."""

from __future__ import annotations

from keras_attn._validation import (
    check_choice,
    check_finite,
    check_int,
    check_positive_int,
    check_rate,
)
from keras_attn.backend import keras, register, tf
from keras_attn.layers.pooling import SequencePooling
from keras_attn.layers.position import PositionEmbedding
from keras_attn.layers.token_ids import TokenMask
from keras_attn.models.base import FunctionalModel, Parts, arguments_of
from keras_attn.models.bert_weights import assign_weights, google_bert_layout
from keras_attn.models.classifier_head import (
    CLASSIFIER_SETTINGS,
    apply_head,
    head_layers,
    head_outputs,
)
from keras_attn.models.encoder_parts import (
    cls_explain_model,
    encoder_blocks,
    token_embedding,
)
from keras_attn.models.hf_checkpoint import HFCheckpoint, save_folder

FACTORIZE = ("token", "all")
POOLER_ACTIVATIONS = ("tanh", "relu")

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

    The parts are attributes: `token_embedding`, `segment_embedding` (None
    without segments), `position_embedding`, `embeddings_norm`,
    `embeddings_projection` (None unless `factorize="all"`), `transformer_layers`
    (the distinct blocks: one with `share_layers`) and `pooler`; the settings too
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
        dropout: float. Dropout of the embeddings, the attention weights and each
            sublayer's output (none after the feed-forward activation: BERT has
            none there). Defaults to 0.1.
        layer_norm_epsilon: float. Defaults to 1e-12 (BERT's).
        activation: str. Feed-forward activation: "gelu_approximate" (Google's
            tanh form), "gelu" (exact) or "relu". Defaults to "gelu_approximate".
        max_sequence_length: int. Rows of the position table, at least
            `sequence_length` (a checkpoint's position count). Defaults to
            `sequence_length`.
        factorize: str. With `embedding_dim`, what is `embedding_dim` wide:
            "token" (the token table alone, projected to `hidden_dim` before the
            sum) or "all" (token, segment and position embeddings and their layer
            norm, then `embeddings_projection` to `hidden_dim`: ALBERT's release and
            Hugging Face's `albert`). Defaults to "token".
        pooler_activation: str. "tanh" (BERT, ALBERT) or "relu" (DistilBERT, whose
            pooler is its classifier's `pre_classifier`). Defaults to "tanh".
        name: str. Model name. Defaults to "bert".

    `type_vocabulary_size=0` makes no segment embedding (DistilBERT): the
    `segment_ids` input is then taken and ignored, so every backbone has the same
    inputs. `BertBackbone.from_pretrained(path)` builds and fills one from a Hugging
    Face folder, `save_pretrained(path)` writes one back.

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
        max_sequence_length: int | None = None,
        factorize: str = "token",
        pooler_activation: str = "tanh",
        name: str = "bert",
        **kwargs,
    ):
        arguments = arguments_of(locals())
        # The encoder's settings are checked where its parts are made.
        check_positive_int("sequence_length", sequence_length)
        check_int("type_vocabulary_size", type_vocabulary_size, minimum=0)
        check_finite(
            "layer_norm_epsilon", layer_norm_epsilon, minimum=0, exclusive_minimum=True
        )
        check_int(
            "max_sequence_length",
            max_sequence_length,
            minimum=sequence_length,
            allow_none=True,
        )
        check_choice("factorize", factorize, FACTORIZE)
        check_choice("pooler_activation", pooler_activation, POOLER_ACTIVATIONS)
        project_all = factorize == "all"
        if project_all and embedding_dim is None:
            raise ValueError(
                "`factorize='all'` needs `embedding_dim` (the width before the "
                "projection). Received: embedding_dim=None"
            )
        # The width of the summed embeddings: embedding_dim with ALBERT's layout.
        width = embedding_dim if project_all else hidden_dim

        # Layers
        # BERT (Google's and Hugging Face's) has no dropout after the feed-forward
        # activation: the checkpoints were trained, and are fine-tuned, without it.
        blocks = encoder_blocks(arguments, intermediate_dropout=0.0)
        parts = Parts(
            token_mask=TokenMask(name="token_mask"),
            token_embedding=token_embedding(
                vocabulary_size, width, None if project_all else embedding_dim
            ),
            segment_embedding=keras.layers.Embedding(
                type_vocabulary_size, width, name="segment_embedding"
            )
            if type_vocabulary_size
            else None,
            position_embedding=PositionEmbedding(
                max_sequence_length or sequence_length, name="position_embedding"
            ),
            embeddings_add=keras.layers.Add(name="embeddings"),
            embeddings_norm=keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, name="embeddings_norm"
            ),
            embeddings_dropout=keras.layers.Dropout(dropout, name="embeddings_dropout"),
            embeddings_projection=keras.layers.Dense(
                hidden_dim, name="embeddings_projection"
            )
            if project_all
            else None,
            transformer_layers=blocks,
            cls_token=SequencePooling("cls", name="cls_token"),
            pooler=keras.layers.Dense(
                hidden_dim, activation=pooler_activation, name="pooler"
            ),
        )

        # Graph
        ids = keras.Input(shape=(sequence_length,), dtype="int32", name="token_ids")
        segments = keras.Input(
            shape=(sequence_length,), dtype="int32", name="segment_ids"
        )
        mask = parts.token_mask(ids)
        tokens = parts.token_embedding(ids)
        summed = [tokens, parts.position_embedding(tokens)]
        if parts.segment_embedding is not None:
            summed.insert(1, parts.segment_embedding(segments))
        x = parts.embeddings_norm(parts.embeddings_add(summed))
        x = parts.embeddings_dropout(x)
        if parts.embeddings_projection is not None:
            x = parts.embeddings_projection(x)
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

    @classmethod
    def from_pretrained(cls, path, sequence_length: int | None = None, **kwargs):
        """A backbone built and filled from a Hugging Face model folder.

        Reads `config.json` (`model_type` "bert", "distilbert" or "albert"; its
        sizes, `hidden_act`, epsilon and position count) and `model.safetensors`
        (or a sharded `model.safetensors.index.json`) with `safetensors`' NumPy
        API, and assigns every encoder weight. A DistilBERT folder has no pooler
        (the pooler is its classifier's `pre_classifier`, which
        `BertClassifier.from_pretrained` loads): it stays freshly initialized.

        Args:
            path: the folder.
            sequence_length: int. The inputs' length. Defaults to the checkpoint's
                position count (`max_position_embeddings`).
            **kwargs: other `BertBackbone` arguments (e.g. `dropout`), over the
                config's.

        Returns:
            A `BertBackbone`. An unsupported `model_type`, a missing or extra
            weight, a shape that cannot match or a `vocab.txt` larger than the
            embedding table raise ValueError naming the file and the weight.
        """
        checkpoint = path if isinstance(path, HFCheckpoint) else HFCheckpoint(path)
        settings = {**checkpoint.backbone_settings(), **kwargs}
        if sequence_length is None:
            sequence_length = settings["max_sequence_length"]
        if sequence_length > settings["max_sequence_length"]:
            raise ValueError(
                f"`sequence_length` must be at most the checkpoint's "
                f"{settings['max_sequence_length']} positions "
                f"({checkpoint.config_file}). Received: "
                f"sequence_length={sequence_length}"
            )
        backbone = cls(sequence_length=sequence_length, **settings)
        checkpoint.load_backbone(backbone)
        return backbone

    def save_pretrained(self, path, preprocessor=None) -> None:
        """Writes the backbone as a Hugging Face folder (`config.json`,
        `model.safetensors`; with `preprocessor`, a `BertPreprocessor`, its
        vocab.txt and tokenizer config) that `from_pretrained` and
        `transformers`' `AutoModel` read."""
        save_folder(path, self, preprocessor=preprocessor)


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

    With `wide`, the head is wide and deep as HAN's and the Transformer's: the
    `Dense` gives logits, an `NgramLinear` over hashed word n-grams (a third input
    `ngram_ids`) adds its own, then the softmax; `deep_part_model` and
    `wide_part_model` give each part alone.

    Args:
        backbone: a `BertBackbone`.
        num_classes: int >= 2.
        dropout: float in [0, 1). Defaults to 0.1.
        class_names: optional list of str: `label` gives names. Defaults to None.
        wide: bool or dict. The wide part (`NgramLinear` arguments, see
            `head_layers`). Defaults to False (none).
        name: str. Defaults to "bert_classifier".

    Call arguments:
        inputs: `{"token_ids", "segment_ids"}`, int32 `(batch, sequence_length)`,
            and `"ngram_ids"` `(batch, max_ngrams)` with a wide part.

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
        wide: bool | dict = False,
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
        if wide not in (None, False):
            # Only a wide classifier records it: other configs stay as they were.
            arguments["wide"] = wide
        parts = Parts(
            backbone=backbone,
            classifier_dropout=keras.layers.Dropout(dropout, name="classifier_dropout"),
            **head_layers(num_classes, class_names, wide),
        )

        inputs, ngram_ids = self._classifier_inputs(backbone, parts.wide)
        pooled = backbone(
            {"token_ids": inputs["token_ids"], "segment_ids": inputs["segment_ids"]}
        )["pooled_output"]
        self._init_functional(
            inputs,
            head_outputs(parts, parts.classifier_dropout(pooled), ngram_ids),
            parts,
            arguments,
            name,
            CLASSIFIER_SETTINGS,
            **kwargs,
        )

    def explain_model(self):
        """A model (sharing the weights) from the same inputs to
        `{"probabilities", "cls_attention": (batch, num_heads, sequence_length)}`:
        how `[CLS]` attends over the tokens in the backbone's last layer (needs a
        block per layer). What the export's `explain` signature returns, and what to
        plot. Inference only: the head's dropout is left out."""
        backbone = self.backbone
        # The backbone's pooled output and the last block's [CLS] attention, from
        # tensors of the backbone's own graph (a nested model's insides are not
        # tensors of this one's).
        encoder = cls_explain_model(
            backbone,
            backbone.transformer_layers,
            backbone.share_layers,
            backbone.inputs,
            backbone.token_mask.output,
            {"pooled_output": backbone.pooler.output},
        )
        inputs, ngram_ids = self._classifier_inputs(backbone, self.wide)
        out = encoder(
            {"token_ids": inputs["token_ids"], "segment_ids": inputs["segment_ids"]}
        )
        outputs = {
            "probabilities": apply_head(self, out["pooled_output"], ngram_ids),
            "cls_attention": out["cls_attention"],
        }
        return keras.Model(inputs, outputs, name=f"{self.name}_explain")

    @classmethod
    def _classifier_inputs(cls, backbone, wide) -> tuple[dict, object]:
        """New `keras.Input`s of the classifier, and its `ngram_ids` input (None
        without a wide part)."""
        inputs = cls._deep_inputs(backbone)
        if wide is None:
            return inputs, None
        inputs["ngram_ids"] = keras.Input(
            shape=(wide.max_ngrams,), dtype="int32", name="ngram_ids"
        )
        return inputs, inputs["ngram_ids"]

    @staticmethod
    def _deep_inputs(backbone) -> dict:
        length = backbone.sequence_length
        return {
            "token_ids": keras.Input(shape=(length,), dtype="int32", name="token_ids"),
            "segment_ids": keras.Input(
                shape=(length,), dtype="int32", name="segment_ids"
            ),
        }

    def deep_inputs(self) -> dict:
        """New `keras.Input`s of the deep part: `{"token_ids", "segment_ids"}`."""
        return self._deep_inputs(self.backbone)

    def pooled_features(self, inputs):
        """The pooled vector (after the head's dropout) that the head takes, from
        `{"token_ids", "segment_ids"}`; on symbolic or eager tensors."""
        pooled = self.backbone(
            {"token_ids": inputs["token_ids"], "segment_ids": inputs["segment_ids"]}
        )["pooled_output"]
        return self.classifier_dropout(pooled)

    def get_config(self):
        return {
            **super().get_config(),
            "backbone": keras.saving.serialize_keras_object(self.backbone),
        }

    @classmethod
    def from_pretrained(
        cls,
        path,
        num_classes: int | None = None,
        sequence_length: int | None = None,
        **kwargs,
    ):
        """A classifier from a Hugging Face folder: the backbone
        (`BertBackbone.from_pretrained`), and the folder's
        `*ForSequenceClassification` head when it has one (`classifier.*`,
        DistilBERT's `pre_classifier.*`; its `id2label` as `class_names`), else a
        new head of `num_classes`.

        Args:
            path: the folder.
            num_classes: int. Needed without a head in the folder; with one, it must
                be the head's number of labels (or None).
            sequence_length: int. As in `BertBackbone.from_pretrained`.
            **kwargs: `dropout`, `class_names`, `name` (over the folder's).

        Returns:
            A `BertClassifier`.
        """
        checkpoint = HFCheckpoint(path)
        backbone = BertBackbone.from_pretrained(checkpoint, sequence_length)
        has_head = checkpoint.has_classifier_head()
        if has_head:
            head = checkpoint.head_settings()
            if num_classes not in (None, head["num_classes"]):
                raise ValueError(
                    f"`num_classes` must be the {head['num_classes']} labels of the "
                    f"head in {checkpoint.path} (or None); for a new head build "
                    "`BertClassifier(BertBackbone.from_pretrained(path), "
                    f"num_classes)`. Received: num_classes={num_classes}"
                )
            settings = {**head, **kwargs}
        else:
            if num_classes is None:
                raise ValueError(
                    f"`num_classes` must be given: {checkpoint.path} has no "
                    "classifier head. Received: num_classes=None"
                )
            settings = {"num_classes": num_classes, **kwargs}
        classifier = cls(backbone, **settings)
        if has_head:
            checkpoint.load_head(classifier)
        return classifier

    def save_pretrained(self, path, preprocessor=None) -> None:
        """Writes a Hugging Face `*ForSequenceClassification` folder: the backbone
        under its model type's prefix, the head (`classifier.*`), `id2label` from
        `class_names`, and `preprocessor`'s tokenizer files when given. A wide
        part has no place in that layout: a wide classifier raises ValueError."""
        if self.wide is not None:
            raise ValueError(
                f"{self.name!r} has a wide part (an n-gram logistic regression), "
                "which a Hugging Face folder cannot hold: save its backbone "
                "(`classifier.backbone.save_pretrained(path)`) or export it "
                "(`keras_attn.serving.export`)."
            )
        save_folder(path, self.backbone, classifier=self, preprocessor=preprocessor)


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


def _google_layout(model, prefix: str) -> dict:
    check_backbone(model, "model")
    if model.embedding_dim is not None:
        raise ValueError(
            "`model` must have a plain token embedding for the BERT layout. "
            "Received: a FactorizedEmbedding (ALBERT, embedding_dim)"
        )
    if model.share_layers:
        raise ValueError(
            "`model` must have a block per layer for the BERT layout. "
            "Received: share_layers=True (ALBERT)"
        )
    if model.segment_embedding is None:
        raise ValueError(
            "`model` must have segment embeddings for the BERT layout. "
            "Received: type_vocabulary_size=0 (DistilBERT)"
        )
    return google_bert_layout(model, prefix)


def bert_checkpoint_map(model, prefix: str = "bert") -> dict:
    """`{checkpoint name: variable}` for Google's BERT variable layout.

    The model is a `BertBackbone` without factorized embeddings or sharing (the
    layout of the original BERT release).
    """
    return {name: slot.variable for name, slot in _google_layout(model, prefix).items()}


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

    def read(name):
        return reader.get_tensor(name) if name in shapes else None

    return assign_weights(
        _google_layout(model, prefix), read, f"Checkpoint {checkpoint_path!r}"
    )
