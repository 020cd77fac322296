"""The Transformer encoder document classifier (plain, ALBERT-style factorized and
shared, or BERT-style with `[CLS]` pooling)."""

from __future__ import annotations

from keras_attn._validation import check_choice, check_int, check_positive_int
from keras_attn.backend import keras, register, tf
from keras_attn.layers.attention import ContextAttentionPooling
from keras_attn.layers.pooling import SequencePooling
from keras_attn.layers.position import PositionEmbedding, SinusoidalPositionEncoding
from keras_attn.layers.token_ids import TokenMask
from keras_attn.models.base import (
    FunctionalModel,
    Parts,
    arguments_of,
    output_tensors,
)
from keras_attn.models.classifier_head import (
    CLASSIFIER_SETTINGS,
    apply_head,
    classifier_inputs,
    head_layers,
    head_outputs,
)
from keras_attn.models.encoder_parts import (
    cls_explain_model,
    encoder_blocks,
    token_embedding,
)

__all__ = [
    "POSITIONS",
    "TRANSFORMER_POOLINGS",
    "TransformerClassifier",
    "build_transformer_classifier",
]

TRANSFORMER_POOLINGS = ("cls", "mean", "attention", "layer_mean")
POSITIONS = ("sinusoidal", "learned")


@register
class TransformerClassifier(FunctionalModel):
    """Transformer encoder classifier over token ids.

    ids `(batch, sequence_length)` -> token embeddings (factorized `V×E -> E×H` when
    `embedding_dim` is given, as ALBERT) + sinusoidal or learned positions ->
    `num_layers` `TransformerEncoderBlock`s (one block applied `num_layers` times with
    `share_layers`, ALBERT's cross-layer sharing) -> pooling -> softmax. Poolings:
    `"cls"` (the first token, e.g. `[CLS]`), `"mean"` (over real tokens),
    `"attention"` (a learned context vector), `"layer_mean"` (the mean over all
    layers' outputs, padded positions zeroed, flattened).

    The parts are attributes: `token_embedding`, `position_embedding`,
    `transformer_layers` (the distinct blocks: one with `share_layers`),
    `sequence_pooling`, and the head's `output_dense`, `wide`, `predicted_label`.

    Args:
        vocabulary_size: int. Number of token ids (id 0 is padding).
        num_classes: int. Number of classes.
        sequence_length: int. Length of the id sequences.
        hidden_dim: int. Model width. Defaults to 128.
        num_layers: int. Encoder depth. Defaults to 2.
        num_heads: int. Attention heads; must divide `hidden_dim`. Defaults to 4.
        intermediate_dim: int. Feed-forward width. Defaults to 4·hidden_dim.
        embedding_dim: int. Factorized embedding width, or None for a plain
            `hidden_dim` embedding. Defaults to None.
        positions: str. "sinusoidal" or "learned". Defaults to "sinusoidal".
        share_layers: bool. One block for all layers. Defaults to False.
        pooling: str. "cls", "mean", "attention" or "layer_mean". Defaults to "mean".
        dropout: float. Dropout everywhere. Defaults to 0.1.
        activation: str. "relu", "gelu" or "gelu_approximate". Defaults to "gelu".
        class_names: optional list of str for the `label` output.
        wide: bool or dict. A wide part as in `HANClassifier`. Defaults to False.
        name: str. Model name. Defaults to "transformer_classifier".

    Call arguments:
        inputs: int ids `(batch, sequence_length)`; with `wide`,
            `{"token_ids", "ngram_ids"}`.

    Returns:
        `{"probabilities": (batch, num_classes), "label": (batch,)}`.

    Example:

    >>> import numpy as np
    >>> model = TransformerClassifier(50, 3, sequence_length=8, hidden_dim=8,
    ...                               num_heads=2, pooling="layer_mean")
    >>> model(np.ones((2, 8), "int32"))["probabilities"].shape
    TensorShape([2, 3])
    >>> len(model.transformer_layers)
    2
    """

    def __init__(
        self,
        vocabulary_size: int,
        num_classes: int,
        sequence_length: int,
        hidden_dim: int = 128,
        num_layers: int = 2,
        num_heads: int = 4,
        intermediate_dim: int | None = None,
        embedding_dim: int | None = None,
        positions: str = "sinusoidal",
        share_layers: bool = False,
        pooling: str = "mean",
        dropout: float = 0.1,
        activation: str = "gelu",
        class_names: list[str] | None = None,
        wide: bool | dict = False,
        name: str = "transformer_classifier",
        **kwargs,
    ):
        arguments = arguments_of(locals())
        # The encoder's settings are checked where its parts are made.
        check_positive_int("sequence_length", sequence_length)
        check_int("num_classes", num_classes, minimum=2)
        check_choice("positions", positions, POSITIONS)
        check_choice("pooling", pooling, TRANSFORMER_POOLINGS)

        # Layers
        if positions == "sinusoidal":
            position_layer = SinusoidalPositionEncoding(name="position_encoding")
        else:
            position_layer = PositionEmbedding(
                sequence_length, name="position_embedding"
            )
        blocks = encoder_blocks(arguments)
        if pooling == "attention":
            pooler = ContextAttentionPooling(hidden_dim, name="pooling")
        else:
            mode = {"cls": "cls", "mean": "mean", "layer_mean": "flatten"}[pooling]
            pooler = SequencePooling(mode, name="pooling")
        parts = Parts(
            token_mask=TokenMask(name="token_mask"),
            token_embedding=token_embedding(vocabulary_size, hidden_dim, embedding_dim),
            position_embedding=position_layer,
            embeddings_add=keras.layers.Add(name="embeddings"),
            embeddings_norm=keras.layers.LayerNormalization(
                epsilon=1e-5, name="embeddings_norm"
            ),
            embeddings_dropout=keras.layers.Dropout(dropout, name="embeddings_dropout"),
            transformer_layers=blocks,
            layer_mean=(
                keras.layers.Average(name="layer_mean")
                if pooling == "layer_mean" and num_layers > 1
                else None
            ),
            sequence_pooling=pooler,
            pooled_dropout=keras.layers.Dropout(dropout, name="pooled_dropout"),
            **head_layers(num_classes, class_names, wide),
        )

        # Graph: masks are passed explicitly, the same graph in both generations.
        inputs, ids, ngram_ids = classifier_inputs((sequence_length,), parts.wide)
        pooled, _ = _encode(parts, arguments, ids, return_attention=False)
        outputs = head_outputs(parts, pooled, ngram_ids)
        self._init_functional(
            inputs, outputs, parts, arguments, name, CLASSIFIER_SETTINGS, **kwargs
        )

    @property
    def token_shape(self) -> tuple:
        """The shape of one document's token ids: `(sequence_length,)`."""
        return (self._arguments["sequence_length"],)

    def pooled_features(self, ids):
        """The pooled vectors (after dropout) that the head takes, from token ids;
        on symbolic or eager tensors."""
        return _encode(self, self._arguments, ids, return_attention=False)[0]

    def explain_model(self):
        """A model (sharing the weights) from the same inputs to
        `{"probabilities", "cls_attention": (batch, num_heads, sequence_length)}`:
        how the `[CLS]` token attends over the tokens in the last layer (needs
        `pooling="cls"` and a block per layer). What the export's `explain`
        signature returns, and what to plot; `attention_weights` gives every
        layer's full weights."""
        if self._arguments["pooling"] != "cls":
            raise ValueError(
                f"Model {self.name!r} pools with {self._arguments['pooling']!r}: "
                "its explain model needs `pooling='cls'` (the [CLS] token's "
                "attention is what it pools)"
            )
        return cls_explain_model(
            self,
            self.transformer_layers,
            self._arguments["share_layers"],
            self.inputs,
            self.token_mask.output,
            {"probabilities": output_tensors(self)["probabilities"]},
        )

    def attention_weights(self, inputs):
        """Each layer's and head's self-attention weights of `inputs`, for plotting
        (e.g. a head view, Vig 2019). Runs the model's layers eagerly, in inference
        mode (no dropout).

        Args:
            inputs: what the model takes: token ids `(batch, sequence_length)`, or
                `{"token_ids", "ngram_ids"}` with a wide part.

        Returns:
            `{"probabilities": (batch, num_classes), "attention": (batch,
            num_layers, num_heads, sequence_length, sequence_length)}`: row i of a
            head is how token i attends over the tokens (zero on padded keys).

        Example:

        >>> import numpy as np
        >>> model = TransformerClassifier(50, 2, sequence_length=6, hidden_dim=8,
        ...                               num_heads=2)
        >>> out = model.attention_weights(np.array([[5, 6, 7, 0, 0, 0]]))
        >>> out["attention"].shape
        TensorShape([1, 2, 2, 6, 6])
        """
        ngram_ids = None
        if isinstance(inputs, dict):
            inputs, ngram_ids = inputs["token_ids"], inputs.get("ngram_ids")
        ids = tf.convert_to_tensor(inputs, tf.int32)
        if ids.shape.rank != 2 or ids.shape[1] != self._arguments["sequence_length"]:
            raise ValueError(
                "`inputs` must be token ids of shape (batch, "
                f"{self._arguments['sequence_length']}). Received: "
                f"shape={tuple(ids.shape)}"
            )
        pooled, weights = _encode(self, self._arguments, ids, return_attention=True)
        return {
            "probabilities": apply_head(self, pooled, ngram_ids),
            "attention": tf.stack(weights, axis=1),
        }


def _encode(parts, arguments, ids, return_attention):
    """The pooled features (after dropout) of `ids`, and each layer's self-attention
    weights `(batch, num_heads, sequence_length, sequence_length)` (an empty list
    without `return_attention`), from the layers of `parts` (a `Parts` or the
    model)."""
    mask = parts.token_mask(ids)  # (batch, sequence_length)
    x = parts.token_embedding(ids)
    x = parts.embeddings_add([x, parts.position_embedding(x)])
    x = parts.embeddings_dropout(parts.embeddings_norm(x))
    blocks = parts.transformer_layers
    layer_outputs, weights = [], []
    for index in range(arguments["num_layers"]):
        block = blocks[0 if arguments["share_layers"] else index]
        if return_attention:
            x, w = block(x, padding_mask=mask, return_attention_scores=True)
            weights.append(w)
        else:
            x = block(x, padding_mask=mask)
        layer_outputs.append(x)
    if parts.layer_mean is not None:
        x = parts.layer_mean(layer_outputs)
    if arguments["pooling"] == "cls":
        pooled = parts.sequence_pooling(x)
    else:
        pooled = parts.sequence_pooling(x, mask=mask)
    return parts.pooled_dropout(pooled), weights


def build_transformer_classifier(*args, **kwargs) -> TransformerClassifier:
    """`build_transformer_classifier(...)` is `TransformerClassifier(...)`.

    Example:

    >>> model = build_transformer_classifier(50, 3, 8, hidden_dim=8, num_heads=2)
    >>> type(model).__name__, model.get_config()["pooling"]
    ('TransformerClassifier', 'mean')
    """
    return TransformerClassifier(*args, **kwargs)
