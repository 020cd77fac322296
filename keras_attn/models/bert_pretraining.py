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
- `fit_bert_pretrainer`: trains one under a `tf.distribute` strategy, with
  `BackupAndRestore` and per-epoch checkpoints.
- Fine-tuning: `keras_attn.models.BertClassifier` (`build_bert_classifier`) on the
  same encoder object (its weights are shared).

The pretrainer is a subclassed model rather than a functional one: weight tying
needs the embedding variable inside the head, and a functional graph can pass only
tensors between layers. It serializes its encoder in its config, so a `.keras` file
reloads with the tie intact.

Inputs and targets are those of `keras_attn.text.pretraining_dataset`.
"""

from __future__ import annotations

from keras_attn import training
from keras_attn._validation import check_finite
from keras_attn.backend import ReplicaBuild, keras, register, tf
from keras_attn.layers.embedding import FactorizedEmbedding
from keras_attn.models.bert import check_backbone

__all__ = [
    "BertPretrainer",
    "MaskedLMAccuracy",
    "MaskedLMLoss",
    "build_bert_pretrainer",
    "compile_bert_pretrainer",
    "fit_bert_pretrainer",
]


@register
class MaskedLMLoss(keras.losses.Loss):
    """Sparse cross-entropy from logits over the masked slots, mean over them.

    `loss = Σ_{b,p} w_bp · CE(y_bp, logits_bp) / Σ_{b,p} w_bp` with `w = (y != 0)`:
    slots without a prediction (label 0, `[PAD]`) count neither in the sum nor in
    the divisor. The division happens here, and the reduction is a plain sum, so
    the value is the mean over the batch's masked tokens in both Keras generations.
    Under a `tf.distribute` strategy with several replicas the divisor counts the
    masked slots of every replica, so the replicas' summed gradients are those of
    the global batch's mean.

    Call arguments:
        y_true: int `(batch, max_predictions)` original ids, 0 where unused.
        y_pred: float `(batch, max_predictions, vocabulary_size)` logits.

    Example:

    >>> import numpy as np
    >>> logits = np.zeros((1, 2, 4), "float32")  # uniform over 4 ids
    >>> loss = MaskedLMLoss()(np.array([[3, 0]]), logits)  # one masked slot
    >>> round(float(loss), 4) == round(float(np.log(4)), 4)
    True
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
        count = tf.reduce_sum(weights)
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            # Each replica sees part of the global batch and Keras sums the
            # replicas' gradients (a "sum" loss is not scaled by 1 / replicas):
            # dividing by the masked slots of all replicas makes that sum the
            # gradient of the global batch's mean.
            count = context.all_reduce(tf.distribute.ReduceOp.SUM, count)
        return loss * weights / tf.maximum(count, 1.0)

    def get_config(self):
        return {"name": self.name}


@register
class MaskedLMAccuracy(keras.metrics.Metric):
    """Share of masked slots (label != 0) whose arg-max logit is the label.

    Example:

    >>> import numpy as np
    >>> metric = MaskedLMAccuracy()
    >>> logits = np.eye(4, dtype="float32")[[[1, 2, 3]]]  # predicts 1, 2, 3
    >>> metric.update_state(np.array([[1, 3, 0]]), logits)
    >>> float(metric.result())  # 1 of the 2 masked slots
    0.5
    """

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
class BertPretrainer(ReplicaBuild, keras.Model):
    """A `BertBackbone` with BERT's masked-LM and next-sentence heads.

    MLM: `h = LN(gelu(W·x_p + c))` at each masked position `p`, then
    `logits = h · Eᵀ + b` with `E` the encoder's token-embedding table (tied, no
    separate vocabulary-size kernel). NSP: `Dense(2)` on `pooled_output`.

    Paper: "BERT", Devlin et al., NAACL 2019; "ALBERT", Lan et al., ICLR 2020.

    Args:
        encoder: a `BertBackbone` (from `keras_attn.models.build_bert`), the
            attribute `encoder`.
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
        check_backbone(encoder, "encoder")
        check_finite(
            "layer_norm_epsilon", layer_norm_epsilon, minimum=0, exclusive_minimum=True
        )
        self.encoder = encoder
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        embedding = encoder.token_embedding
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
        hidden = self.encoder.hidden_dim
        self.mlm_dense.build((None, None, hidden))
        self.mlm_norm.build((None, None, self.embedding_width))
        self.nsp_dense.build((None, hidden))
        self.mlm_bias = self.add_weight(
            name="mlm_bias", shape=(self.vocabulary_size,), initializer="zeros"
        )

    def build(self, inputs_shape=None):
        self.built = True

    def serving_input_signature(self) -> dict:
        """The inputs by name as `tf.TensorSpec`s, for a SavedModel export
        (`keras_attn.backend.export_saved_model`): int32 `token_ids` and
        `segment_ids` `(batch, sequence_length)`, `masked_positions` `(batch,
        max_predictions)`. A subclassed model has no `keras.Input`s, and Keras 3
        would otherwise sign it from its build shapes, float32 and named `args_0`.
        """
        length = self.encoder.sequence_length
        shapes = {
            "token_ids": (None, length),
            "segment_ids": (None, length),
            "masked_positions": (None, None),
        }
        return {
            name: tf.TensorSpec(shape, tf.int32, name=name)
            for name, shape in shapes.items()
        }

    def token_embeddings(self):
        """The tied `(vocabulary_size, width)` embedding variable of the encoder."""
        return self.encoder.token_embedding.embeddings

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
    """The MLM + NSP pretraining model over a `BertBackbone`.

    See `BertPretrainer`; the encoder object is shared, so after pretraining
    `bert` holds the trained weights (pass it to `build_bert_classifier`).

    Args:
        bert: a `BertBackbone` (from `keras_attn.models.build_bert`).
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


def fit_bert_pretrainer(
    model,
    data,
    epochs: int = 1,
    steps_per_epoch: int | None = None,
    batch_size: int | None = None,
    validation_data=None,
    learning_rate: float = 1e-3,
    nsp_weight: float = 1.0,
    jit_compile: bool | str | None = False,
    steps_per_execution: int = 1,
    strategy=None,
    tpu: str | None = None,
    backup_dir=None,
    checkpoint_dir=None,
    callbacks=None,
    verbose=0,
    mixed_precision: str | None = None,
    seed: int | None = None,
):
    """Trains a `BertPretrainer` (compiled here unless it already is).

    The data are `keras_attn.text.pretraining_dataset` batches: the tokenization
    and masking run on the host in `tf.data`, and only int32 ids reach the
    replicas. Build the model inside `strategy.scope()` (the variables are
    replicated when they are made); without `strategy=`, it trains under the
    strategy it was built under.

    Args:
        model: a `BertPretrainer`.
        data: a `tf.data.Dataset` of `(features, labels)` global batches, or a
            function `(batch_size, input_context) -> dataset` called once per input
            pipeline with the per-replica batch size (then `batch_size` is needed);
            see `keras_attn.training.distribute_dataset`.
        epochs: int. Defaults to 1.
        steps_per_epoch: int. Batches per epoch (needed for an endless dataset).
        batch_size: int. The global batch, with a function `data`.
        validation_data: optional dataset of the same kind.
        learning_rate: float. Adam's, when the model is compiled here.
            Defaults to 1e-3.
        nsp_weight: float. Weight of the NSP loss, when compiled here.
        jit_compile: bool, or "auto" / None: XLA, when compiled here; "auto"
            compiles with XLA except for a bfloat16 model on a machine without
            GPU or TPU (see `keras_attn.precision`). Defaults to False.
        steps_per_execution: int. When compiled here. Defaults to 1.
        strategy: a `tf.distribute.Strategy` or a `get_strategy` kind; must be the
            model's (see `keras_attn.distribute.model_strategy`).
        tpu: str. TPU name for `strategy="tpu"`.
        backup_dir: str. `BackupAndRestore` directory: a killed run started again
            resumes from its last finished epoch (the data are read again from
            their start).
        checkpoint_dir: str. Weights after each epoch go to
            `checkpoint_dir/epoch_NNN.weights.h5`.
        callbacks: list of Keras callbacks.
        verbose: Keras' `fit` verbosity. Defaults to 0.
        mixed_precision: str or None. The policy the model was built under (build
            the `BertBackbone` and the pretrainer inside
            `keras_attn.precision.policy_scope("mixed_bfloat16")`); a built model
            cannot change it, so a different value raises. None reads it from
            the model. It picks the "auto" `jit_compile`. Defaults to None.
        seed: int or None. Seeds the run's dropout (`keras_attn.training.seed_run`):
            two fits with one seed from the same weights and data end with the
            same weights (the data's order is the pipeline's own). None leaves
            the random state as it is. Defaults to None.

    Returns:
        The `History` of `fit` (`history.model` is `model`).
    """
    if not isinstance(model, BertPretrainer):
        raise ValueError(
            f"`model` must be a BertPretrainer. Received: model={type(model).__name__}"
        )
    options = training.fit_options(
        model,
        "fit_bert_pretrainer",
        strategy=strategy,
        tpu=tpu,
        backup_dir=backup_dir,
        checkpoint_dir=checkpoint_dir,
        mixed_precision=mixed_precision,
        jit_compile=jit_compile,
        jit_default=True,
        callbacks=callbacks,
        seed=seed,
    )
    strategy = options.strategy
    if callable(data) and not isinstance(data, tf.data.Dataset):
        if batch_size is None:
            raise ValueError(
                "`batch_size` (the global batch) is needed when `data` is a "
                "function. Received: batch_size=None"
            )
        data = training.distribute_dataset(
            strategy, data, batch_size, per_pipeline=True
        )
    # Keras 3 says `compiled`, tf_keras `_is_compiled`.
    if not getattr(model, "compiled", getattr(model, "_is_compiled", False)):
        with strategy.scope():
            compile_bert_pretrainer(
                model,
                learning_rate=learning_rate,
                nsp_weight=nsp_weight,
                jit_compile=options.jit_compile,
                steps_per_execution=training.steps_per_execution(
                    strategy, steps_per_execution, steps_per_epoch
                ),
            )
    return model.fit(
        data,
        epochs=epochs,
        steps_per_epoch=steps_per_epoch,
        validation_data=validation_data,
        callbacks=options.callbacks,
        shuffle=False,  # the pipeline shuffles (Keras 3 warns otherwise)
        verbose=verbose,
    )
