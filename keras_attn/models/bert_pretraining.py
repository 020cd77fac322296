"""BERT/ALBERT pretraining (masked LM + next-sentence prediction) and fine-tuning.

- `BertPretrainer` / `build_bert_pretrainer`: a `build_bert` encoder with the two
  pretraining heads. The MLM head gathers the hidden states at `masked_positions`,
  applies dense + GELU + LayerNorm, and scores the vocabulary with the token
  embedding matrix itself (weight tying) plus an output bias; with a
  `FactorizedEmbedding` (ALBERT) the dense layer maps to the embedding width `E`
  and the scores use the `V × E` table, as ALBERT's `cls/predictions` does. The
  NSP head is a 2-class dense layer on `pooled_output`.
- `MaskedLMLoss`, `MaskedLMAccuracy`: loss and accuracy over the masked slots only
  (label id != 0), averaged over the masked tokens of the batch.
- `compile_bert_pretrainer`: Adam, both losses, both accuracies.
- `build_bert_classifier`: `pooled_output` -> dropout -> softmax, for fine-tuning a
  pretrained encoder (the same encoder object: its weights are shared).

The pretrainer is a subclassed model rather than a functional one: weight tying
needs the embedding variable inside the head, and a functional graph can pass only
tensors between layers. It serializes its encoder in its config, so a `.keras` file
reloads with the tie intact.

Inputs and targets are those of `keras_attn.text.pretraining_dataset`.
"""

from __future__ import annotations

from keras_attn._validation import check_finite, check_int, check_rate
from keras_attn.backend import keras, register, tf
from keras_attn.layers.embedding import FactorizedEmbedding
from keras_attn.models.text import _heads

__all__ = [
    "BertPretrainer",
    "MaskedLMAccuracy",
    "MaskedLMLoss",
    "build_bert_classifier",
    "build_bert_pretrainer",
    "compile_bert_pretrainer",
]


def _check_encoder(encoder):
    names = {layer.name for layer in getattr(encoder, "layers", [])}
    if not {"token_embedding", "segment_embedding", "pooler"} <= names:
        raise ValueError(
            "`bert` must be a model from `build_bert` (layers `token_embedding`, "
            f"`segment_embedding`, `pooler`). Received: {encoder!r}"
        )


def _sequence_length(encoder) -> int:
    return int(encoder.get_layer("segment_embedding").input.shape[1])


def _hidden_dim(encoder) -> int:
    return int(encoder.get_layer("pooler").units)


@register
class MaskedLMLoss(keras.losses.Loss):
    """Sparse cross-entropy from logits over the masked slots, mean over them.

    `loss = Σ_{b,p} w_bp · CE(y_bp, logits_bp) / Σ_{b,p} w_bp` with `w = (y != 0)`:
    slots without a prediction (label 0, `[PAD]`) count neither in the sum nor in
    the divisor. The division happens here, and the reduction is a plain sum, so
    the value is the mean over the batch's masked tokens in both Keras generations.

    Call arguments:
        y_true: int `(batch, max_predictions)` original ids, 0 where unused.
        y_pred: float `(batch, max_predictions, vocabulary_size)` logits.
    """

    def __init__(self, name: str = "masked_lm_loss", **kwargs):
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="sum", **kwargs)

    def call(self, y_true, y_pred):
        labels = tf.cast(y_true, tf.int32)
        logits = tf.cast(y_pred, tf.float32)
        weights = tf.cast(tf.not_equal(labels, 0), tf.float32)
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits
        )  # (batch, max_predictions)
        return loss * weights / tf.maximum(tf.reduce_sum(weights), 1.0)

    def get_config(self):
        return {"name": self.name}


@register
class MaskedLMAccuracy(keras.metrics.Metric):
    """Share of masked slots (label != 0) whose arg-max logit is the label."""

    def __init__(self, name: str = "accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.correct = self.add_weight(name="correct", shape=(), initializer="zeros")
        self.total = self.add_weight(name="total", shape=(), initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = tf.cast(y_true, tf.int32)
        used = tf.not_equal(labels, 0)
        hit = used & tf.equal(tf.argmax(y_pred, axis=-1, output_type=tf.int32), labels)
        self.correct.assign_add(tf.reduce_sum(tf.cast(hit, self.correct.dtype)))
        self.total.assign_add(tf.reduce_sum(tf.cast(used, self.total.dtype)))

    def result(self):
        return tf.math.divide_no_nan(self.correct, self.total)


@register
class BertPretrainer(keras.Model):
    """A `build_bert` encoder with BERT's masked-LM and next-sentence heads.

    MLM: `h = LN(gelu(W·x_p + c))` at each masked position `p`, then
    `logits = h · Eᵀ + b` with `E` the encoder's token-embedding table (tied, no
    separate vocabulary-size kernel). NSP: `Dense(2)` on `pooled_output`.

    Paper: "BERT", Devlin et al., NAACL 2019; "ALBERT", Lan et al., ICLR 2020.

    Args:
        encoder: a model from `keras_attn.models.build_bert`.
        activation: activation of the MLM transform. Defaults to "gelu".
        layer_norm_epsilon: float. Defaults to 1e-12 (BERT's).

    Call arguments:
        inputs: dict of int32 `token_ids`, `segment_ids` `(batch, sequence_length)`
            and `masked_positions` `(batch, max_predictions)`.

    Returns:
        `{"mlm": (batch, max_predictions, vocabulary_size), "nsp": (batch, 2)}`,
        float32 logits.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import build_bert
    >>> bert = build_bert(50, sequence_length=8, hidden_dim=8, num_layers=1,
    ...                   num_heads=2)
    >>> model = BertPretrainer(bert)
    >>> ids = np.ones((2, 8), "int32")
    >>> out = model({"token_ids": ids, "segment_ids": 0 * ids,
    ...              "masked_positions": np.array([[1, 2], [3, 0]], "int32")})
    >>> tuple(out["mlm"].shape), tuple(out["nsp"].shape)
    ((2, 2, 50), (2, 2))
    """

    def __init__(
        self,
        encoder,
        activation="gelu",
        layer_norm_epsilon: float = 1e-12,
        **kwargs,
    ):
        kwargs.setdefault("name", "bert_pretrainer")
        super().__init__(**kwargs)
        _check_encoder(encoder)
        check_finite(
            "layer_norm_epsilon", layer_norm_epsilon, minimum=0, exclusive_minimum=True
        )
        self.encoder = encoder
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        embedding = encoder.get_layer("token_embedding")
        if isinstance(embedding, FactorizedEmbedding):
            self.vocabulary_size = embedding.vocabulary_size
            self.embedding_width = embedding.embedding_dim
        else:
            self.vocabulary_size = embedding.input_dim
            self.embedding_width = embedding.output_dim
        self.mlm_dense = keras.layers.Dense(
            self.embedding_width, activation=activation, name="mlm_dense"
        )
        self.mlm_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, name="mlm_norm"
        )
        self.nsp_dense = keras.layers.Dense(2, name="nsp_dense")
        self._build_heads()

    def _build_heads(self):
        hidden = _hidden_dim(self.encoder)
        self.mlm_dense.build((None, None, hidden))
        self.mlm_norm.build((None, None, self.embedding_width))
        self.nsp_dense.build((None, hidden))
        self.mlm_bias = self.add_weight(
            name="mlm_bias", shape=(self.vocabulary_size,), initializer="zeros"
        )

    def build(self, inputs_shape=None):
        self.built = True

    def token_embeddings(self):
        """The tied `(vocabulary_size, width)` embedding variable of the encoder."""
        return self.encoder.get_layer("token_embedding").embeddings

    def call(self, inputs, training=None):
        outputs = self.encoder(
            {"token_ids": inputs["token_ids"], "segment_ids": inputs["segment_ids"]},
            training=training,
        )
        sequence = outputs["sequence_output"]  # (batch, length, hidden)
        positions = tf.cast(inputs["masked_positions"], tf.int32)
        gathered = tf.gather(sequence, positions, batch_dims=1)  # (batch, P, hidden)
        hidden = self.mlm_norm(self.mlm_dense(gathered))  # (batch, P, width)
        table = tf.cast(tf.convert_to_tensor(self.token_embeddings()), hidden.dtype)
        logits = tf.einsum("bpe,ve->bpv", hidden, table)
        logits = tf.cast(logits, tf.float32) + tf.cast(self.mlm_bias, tf.float32)
        nsp = tf.cast(self.nsp_dense(outputs["pooled_output"]), tf.float32)
        return {"mlm": logits, "nsp": nsp}

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "activation": keras.activations.serialize(
                keras.activations.get(self.activation)
            ),
            "layer_norm_epsilon": self.layer_norm_epsilon,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        config["activation"] = keras.activations.deserialize(config["activation"])
        return cls(**config)


def build_bert_pretrainer(
    bert, activation="gelu", layer_norm_epsilon: float = 1e-12, name=None
) -> BertPretrainer:
    """The MLM + NSP pretraining model over a `build_bert` encoder.

    See `BertPretrainer`; the encoder object is shared, so after pretraining
    `bert` holds the trained weights (pass it to `build_bert_classifier`).

    Args:
        bert: a model from `keras_attn.models.build_bert`.
        activation: activation of the MLM transform. Defaults to "gelu".
        layer_norm_epsilon: float. Defaults to 1e-12.
        name: str. Defaults to "bert_pretrainer".

    Returns:
        A `BertPretrainer` (a `keras.Model`).
    """
    return BertPretrainer(
        bert,
        activation=activation,
        layer_norm_epsilon=layer_norm_epsilon,
        name=name or "bert_pretrainer",
    )


def compile_bert_pretrainer(
    model,
    learning_rate: float = 1e-3,
    nsp_weight: float = 1.0,
    optimizer=None,
    **kwargs,
):
    """Compiles a pretrainer: `MaskedLMLoss` + NSP cross-entropy, both accuracies.

    Targets are `{"mlm": (batch, max_predictions) ids (0 = none), "nsp": (batch,)}`.
    The total loss is `mlm + nsp_weight · nsp`; metrics are reported as
    `mlm_accuracy` and `nsp_accuracy`. Extra keyword arguments go to
    `model.compile`.

    Args:
        model: a `BertPretrainer`.
        learning_rate: float. Adam's learning rate (ignored with `optimizer`).
            Defaults to 1e-3.
        nsp_weight: float. Weight of the NSP loss. Defaults to 1.0.
        optimizer: optional optimizer instance. Defaults to Adam.

    Returns:
        The model.
    """
    check_finite("nsp_weight", nsp_weight, minimum=0)
    if not isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        check_finite("learning_rate", learning_rate, minimum=0, exclusive_minimum=True)
    model.compile(
        optimizer=optimizer or keras.optimizers.Adam(learning_rate),
        loss={
            "mlm": MaskedLMLoss(),
            "nsp": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        },
        loss_weights={"mlm": 1.0, "nsp": float(nsp_weight)},
        metrics={
            "mlm": [MaskedLMAccuracy(name="accuracy")],
            "nsp": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        },
        **kwargs,
    )
    return model


def build_bert_classifier(
    bert,
    num_classes: int,
    dropout: float = 0.1,
    class_names: list[str] | None = None,
    name: str = "bert_classifier",
):
    """A classifier on a (pretrained) `build_bert` encoder, for fine-tuning.

    `pooled_output` -> dropout -> `Dense(num_classes, softmax)`. The encoder object
    is used as is (not copied), so its pretrained weights are the starting point.
    Compile with `keras_attn.models.compile_text_classifier`.

    Args:
        bert: a model from `keras_attn.models.build_bert`.
        num_classes: int >= 2.
        dropout: float in [0, 1). Defaults to 0.1.
        class_names: optional list of str: `label` gives names. Defaults to None.
        name: str. Defaults to "bert_classifier".

    Returns:
        A functional `keras.Model`, inputs `{"token_ids", "segment_ids"}` (int32
        `(batch, sequence_length)`), outputs `{"probabilities": (batch,
        num_classes), "label": (batch,)}`.
    """
    _check_encoder(bert)
    check_int("num_classes", num_classes, minimum=2)
    check_rate("dropout", dropout)
    if class_names is not None and len(class_names) != num_classes:
        raise ValueError(
            f"`class_names` must have `num_classes`={num_classes} names. "
            f"Received: class_names={class_names!r}"
        )

    # Inputs
    length = _sequence_length(bert)
    ids = keras.Input(shape=(length,), dtype="int32", name="token_ids")
    segments = keras.Input(shape=(length,), dtype="int32", name="segment_ids")

    # Encoder
    pooled = bert({"token_ids": ids, "segment_ids": segments})["pooled_output"]

    # Heads
    x = keras.layers.Dropout(dropout, name="classifier_dropout")(pooled)
    dense, predicted = _heads(num_classes, class_names)
    probabilities = dense(x)
    label = predicted(probabilities)
    return keras.Model(
        {"token_ids": ids, "segment_ids": segments},
        {"probabilities": probabilities, "label": label},
        name=name,
    )
