"""Multi-task CTR models: raw features -> embeddings -> [AutoInt] [DIN] -> MMoE/PLE
-> one tower per task.

`CTRModel` is a functional Keras model composed of its parts (the feature specs, an
interaction block, the sequence pooling, a multitask block, the towers); its inputs
are the raw feature columns (strings for categories, floats for numbers, joined id
strings for histories) and its outputs a dict keyed by task name.
`build_ctr_model` spells the common cases with flat arguments. The preprocessing
(lookup, hashing, standardization) is inside, so the exported model serves raw
rows. `compile_ctr_model` wires each task's loss, loss weight and metrics.

`fit_ctr_model` trains such a model fast: `split_ctr_model` cuts it into the
preprocessing (raw values -> ids and standardized numbers) and the core (-> task
outputs), sharing the layers and weights; the training data is encoded once and the
core trains on fixed-shape batches under XLA. The model itself, which still takes raw
values, is what gets exported.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Sequence

import pandas as pd

from keras_attn import distribute, training
from keras_attn._deprecation import deprecated_argument, warn_deprecated
from keras_attn._validation import (
    check_bool,
    check_choice,
    check_finite,
    check_folder,
    check_int,
    check_positive_int,
)
from keras_attn.backend import clone_initializer, keras, register, tf
from keras_attn.features.dataset import (
    count_batches,
    count_rows,
    frame_tensors,
    to_dataset,
)
from keras_attn.features.preprocessing import (
    StackColumns,
    build_preprocessing,
    raw_input_spec,
)
from keras_attn.features.reader import csv_files
from keras_attn.features.specs import (
    features_from_json,
    features_to_json,
    input_name,
)
from keras_attn.layers import (
    PLE,
    AttentionSequencePooling,
    FeatureCross,
    FieldEmbedding,
    FieldSum,
    InteractingLayer,
    MMoE,
)
from keras_attn.layers.din import INTERACTIONS
from keras_attn.models.base import FunctionalModel, Parts, output_tensors
from keras_attn.optimizers import FusedAdam
from keras_attn.precision import (
    check_mixed_precision,
    check_model_policy,
    has_accelerator,
    policy_scope,
    resolve_jit_compile,
)

__all__ = [
    "MULTITASK",
    "CTRModel",
    "Task",
    "as_tasks",
    "build_ctr_model",
    "compile_ctr_model",
    "ctr_features_and_tasks",
    "fit_ctr_model",
    "gate_weights_model",
    "split_ctr_model",
    "task_name",
]

#: How the tasks share the bottom of the model.
MULTITASK = ("mmoe", "ple", "shared_bottom")
_KINDS = {
    "binary": ("binary_crossentropy", "sigmoid"),
    "regression": ("mse", None),
}


def task_name(column: str, taken=()) -> str:
    """An output name for a label column: an ASCII Python identifier (what a
    `Task`'s name must be), unique among `taken`.

    Example:

    >>> [task_name(c) for c in ("click rate", "âge", "y.1")], task_name("y", ["y"])
    (['click_rate', 'age', 'y_1'], 'y_2')
    """
    return input_name(column.replace(".", "_").replace("-", "_"), taken)


@dataclasses.dataclass
class Task:
    """One prediction task of a CTR model: its label, loss, weight and metrics.

    Args:
        name: str. The output's name (an ASCII Python identifier; `task_name`
            makes one from a column's name).
        label: str. The label column. Defaults to `name`.
        positive: value or list of values of the label column that mean 1 (for text
            labels such as "50000+."). None reads the column as numbers.
        kind: str. "binary" (sigmoid, binary cross-entropy) or "regression"
            (linear, MSE). Defaults to "binary".
        loss: a Keras loss. Defaults to the kind's.
        loss_weight: float. Weight of this task's loss in the total. Defaults to 1.
        metrics: list of Keras metrics. Defaults to `[AUC(name="auc")]` for binary
            tasks and `[RootMeanSquaredError(name="rmse")]` otherwise.

    Example:

    >>> task = Task("income", label="income_50k", positive="50000+.")
    >>> task.loss
    'binary_crossentropy'
    """

    name: str
    label: str | None = None
    positive: object = None
    kind: str = "binary"
    loss: object = None
    loss_weight: float = 1.0
    metrics: list | None = None

    def __post_init__(self):
        if not (
            isinstance(self.name, str)
            and self.name.isidentifier()
            and self.name.isascii()
        ):
            # Non-ASCII letters make an identifier, not a TensorFlow scope name.
            hint = ""
            if isinstance(self.name, str) and self.name:
                hint = f"; e.g. Task({task_name(self.name)!r}, label={self.name!r})"
            raise ValueError(
                "`name` of a Task must be an ASCII Python identifier (it names the "
                f"output). Received: name={self.name!r}{hint}"
            )
        check_choice("kind", self.kind, sorted(_KINDS))
        check_finite("loss_weight", self.loss_weight, minimum=0, where="a Task")
        self.label = self.label or self.name
        if self.loss is None:
            self.loss = _KINDS[self.kind][0]

    def build_metrics(self):
        if self.metrics is not None:
            return list(self.metrics)
        if self.kind == "binary":
            return [keras.metrics.AUC(name="auc")]
        return [keras.metrics.RootMeanSquaredError(name="rmse")]

    def to_config(self) -> dict:
        """JSON-friendly description (loss and metrics as given, by name)."""
        return {
            "name": self.name,
            "label": self.label,
            "positive": self.positive,
            "kind": self.kind,
            "loss": self.loss if isinstance(self.loss, str) else None,
            "loss_weight": self.loss_weight,
        }


def as_tasks(tasks) -> list[Task]:
    """`Task`s from tasks or task names (one or a list); names must be unique."""
    if isinstance(tasks, (str, Task)):
        tasks = [tasks]
    out = [t if isinstance(t, Task) else Task(t) for t in tasks]
    if not out:
        raise ValueError("`tasks` must name at least one task. Received: tasks=[]")
    names = [t.name for t in out]
    if len(set(names)) != len(names):
        raise ValueError(f"Task names must be unique. Received: {names}")
    return out


def _as_specs(features) -> list:
    """Feature specs from spec objects or their config dicts (`features_to_json`)."""
    features = list(features)
    if features and all(isinstance(f, dict) for f in features):
        features = features_from_json(json.dumps({"features": features}))
    return features


def _as_layer(value):
    """A layer from a layer or its serialized config (None stays None)."""
    if isinstance(value, dict) and "class_name" in value:
        return keras.layers.deserialize(value)
    return value


def _serialize(layer):
    if layer is None:
        return None
    config = keras.layers.serialize(layer)
    # The model builds its parts by calling them; tf_keras would not record the
    # input shape of a part that a config already built.
    config.pop("build_config", None)
    return config


def _check_features(features, tasks) -> None:
    if not features:
        raise ValueError("`features` must hold at least one feature spec")
    names = [f.name for f in features]
    if len(set(names)) != len(names):
        raise ValueError(f"Feature names must be unique. Received: {names}")
    clash = set(names) & {t.name for t in tasks}
    if clash:
        raise ValueError(
            f"Task names {sorted(clash)} are also feature names; rename the tasks"
        )
    for f in features:
        if not f.fitted:
            raise ValueError(
                f"Feature {f.name!r} is not fitted: call `fit_features(features, "
                "data)` first (or build the specs with `infer_features`)"
            )


def _check_task_keys(name, parts, task_names) -> dict:
    """`parts` must be None or a dict keyed by task names (every task gets a key)."""
    if parts is None:
        return dict.fromkeys(task_names)
    if not isinstance(parts, dict) or not set(parts) <= set(task_names):
        raise ValueError(
            f"`{name}` must be a dict of layers keyed by task names {task_names}. "
            f"Received: {name}={parts!r}"
        )
    return {t: _as_layer(parts.get(t)) for t in task_names}


@register
class CTRModel(FunctionalModel):
    """A (multi-task) CTR model on raw feature columns, composed of its parts.

    raw inputs (one per feature) -> the specs' preprocessing (lookup or hashing of
    categories, standardization and missing-value handling of numbers, splitting of
    histories) -> `FieldEmbedding` (one vector per field; a categorical feature that
    a sequence shares gets its own table, used for its candidate and its history)
    -> the `interaction` blocks on the fields `(batch, fields, dim)` (e.g.
    `InteractingLayer`s, AutoInt; `FeatureCross`, DCN-v2) -> the flat fields, the
    standardized numbers and each history pooled against its candidate by its
    `sequence_pooling` layer (DIN) -> the `multitask` block -> one tower per task
    -> the task's output unit (sigmoid for binary tasks, linear for regression,
    float32).

    The parts are passed as objects and kept as attributes, the way a KerasHub task
    takes its backbone: `interaction` (a list), `sequence_pooling`,
    `multitask`, `towers` and `heads` (dicts by task), `field_embedding`,
    `sequence_tables`; `preprocessor` is the model from the raw inputs to the
    encoded values (what `split_ctr_model` cuts at). `get_config` holds the feature
    specs, the tasks and each part's config, so a `.keras` file rebuilds the model.
    `build_ctr_model` spells the common cases with flat arguments.

    Args:
        features: fitted feature specs (`keras_attn.features`).
        tasks: `Task`s or task names (binary tasks on numeric 0/1 label columns).
        embedding_dim: int. Size of each field's vector. Defaults to 8.
        shared_table: bool. One embedding table for all plain categorical fields.
            Defaults to False.
        interaction: a layer or list of layers mapping the fields `(batch, fields,
            embedding_dim)` to `(batch, fields, dim)`, applied in turn, e.g.
            `[InteractingLayer(num_heads=2, key_dim=8)]` (AutoInt) or
            `[FeatureCross(num_layers=2)]` (DCN-v2, crossing the flat fields).
            Defaults to none.
        sequence_pooling: dict `{sequence feature: layer}` of the layers pooling a
            history `(batch, max_len, dim)` against its candidate `(batch, dim)`
            (called `(candidate, history, mask=mask)`). Defaults to an
            `AttentionSequencePooling()` per sequence feature.
        multitask: the block shared by the tasks: an `MMoE` or `PLE` over the tasks
            (each task reads its own mixture), any other layer (a shared bottom,
            e.g. a `keras.Sequential` of `Dense` layers, whose output every task
            reads), or None (the towers read the dense input). Defaults to None.
        towers: dict `{task: layer}` applied to the task's input before its output
            unit; a task without one goes straight to it. Defaults to none.
        linear: bool. A linear part per task, added to the task's logit before its
            output unit: a weight per category of each plain categorical field and
            per standardized number (`FieldEmbedding` of width 1, attribute
            `linear`, by task), as DeepCTR's models and wide-and-deep have.
            Defaults to False.
        embeddings_initializer: initializer of the field embeddings (tables and
            numeric vectors). Defaults to "uniform".
        embeddings_regularizer: optional regularizer of the field embeddings.
        name: str. The model's name. Defaults to "ctr".

    Call arguments:
        inputs: `{feature name: (batch,)}` raw values (strings for categories,
            floats for numbers, joined id strings for histories).

    Returns:
        `{task name: (batch, 1)}`.

    Example:

    >>> import pandas as pd
    >>> from keras_attn.features import infer_features
    >>> from keras_attn.layers import MMoE
    >>> df = pd.DataFrame({"city": ["a", "b", "a"], "age": [30.0, None, 50.0],
    ...                    "click": [1, 0, 1], "buy": [0, 0, 1]})
    >>> specs = infer_features(df, labels=["click", "buy"])
    >>> model = CTRModel(specs, ["click", "buy"], embedding_dim=4,
    ...                  multitask=MMoE(["click", "buy"], num_experts=2,
    ...                                 expert_units=[8], gate="attention"),
    ...                  towers={"click": keras.layers.Dense(4, "relu")})
    >>> sorted(model.output_names), model.multitask.num_experts
    (['buy', 'click'], 2)
    >>> model.towers["buy"] is None
    True
    """

    def __init__(
        self,
        features,
        tasks,
        embedding_dim: int = 8,
        shared_table: bool = False,
        interaction=None,
        sequence_pooling=None,
        multitask=None,
        towers=None,
        linear: bool = False,
        embeddings_initializer="uniform",
        embeddings_regularizer=None,
        name: str = "ctr",
        **kwargs,
    ):
        tasks = as_tasks(
            [Task(**t) if isinstance(t, dict) else t for t in _listed(tasks)]
        )
        features = _as_specs(features)
        _check_features(features, tasks)
        check_positive_int("embedding_dim", embedding_dim)
        check_bool("shared_table", shared_table)
        check_bool("linear", linear)
        task_names = [t.name for t in tasks]
        if interaction is None:
            interaction = []
        elif not isinstance(interaction, (list, tuple)):
            interaction = [interaction]
        interaction = [_as_layer(layer) for layer in interaction]
        multitask = _as_layer(multitask)
        if isinstance(multitask, (MMoE, PLE)) and list(multitask.tasks) != task_names:
            raise ValueError(
                f"`multitask` must mix the experts for the tasks {task_names}. "
                f"Received: a {type(multitask).__name__} for {list(multitask.tasks)}"
            )
        towers = _check_task_keys("towers", towers, task_names)
        sequences = [f.name for f in features if f.kind == "sequence"]
        if sequence_pooling is None:
            sequence_pooling = {
                n: AttentionSequencePooling(name=f"{n}_din_pooling") for n in sequences
            }
        if not isinstance(sequence_pooling, dict) or set(sequence_pooling) != set(
            sequences
        ):
            raise ValueError(
                "`sequence_pooling` must be a dict of layers keyed by the sequence "
                f"features {sequences}. Received: sequence_pooling={sequence_pooling!r}"
            )
        sequence_pooling = {n: _as_layer(v) for n, v in sequence_pooling.items()}
        initializer = keras.initializers.get(embeddings_initializer)
        regularizer = keras.regularizers.get(embeddings_regularizer)

        # Inputs and preprocessing: one raw column per feature.
        inputs = {}
        for f in features:
            shape, dtype = raw_input_spec(f)
            inputs[f.name] = keras.Input(shape=shape, dtype=dtype, name=f.name)
        prep = build_preprocessing(features, inputs)
        shared = {shares for _, _, shares in prep["sequences"].values()}
        by_name = {f.name: f for f in features}
        plain = [n for n in prep["ids"] if n not in shared]
        numeric = prep["numeric"]
        if linear and not plain and numeric is None:
            # The linear part weighs the plain fields; an item a history shares is
            # the candidate of the sequence pooling, not one of them.
            raise ValueError(
                "`linear=True` needs a categorical feature that no sequence shares, "
                "or a numeric feature. Received: linear=True with features "
                f"{[f.name for f in features]}, whose categorical features "
                f"{sorted(shared)} are shared by the sequence features {sequences}"
            )
        encoded = {}

        # Encoders: field embeddings, interaction, sequence pooling.
        def plain_fields(dim, name, initializer):
            """A `FieldEmbedding` of the plain categorical fields and numbers."""
            if not plain and numeric is None:
                return None
            return FieldEmbedding(
                [by_name[n].vocabulary_size for n in plain],
                dim,
                num_numeric=0 if numeric is None else int(numeric.shape[-1]),
                shared_table=shared_table,
                embeddings_initializer=initializer,
                embeddings_regularizer=regularizer,
                validate_ids=False,  # the lookups cannot leave the range
                name=name,
            )

        def embed(layer):
            """`layer` on the ids and numbers: `(batch, fields, dim)`."""
            return layer(
                ids if plain else None, *([] if numeric is None else [numeric])
            )

        field_embedding = plain_fields(embedding_dim, "field_embedding", initializer)
        fields = []
        if plain:
            ids = StackColumns(name="categorical_ids")([prep["ids"][n] for n in plain])
            encoded["categorical_ids"] = ids
        if numeric is not None:
            encoded["numeric_preprocessing"] = numeric
        if field_embedding is not None:
            fields.append(embed(field_embedding))
        sequence_tables = {
            n: keras.layers.Embedding(
                by_name[n].vocabulary_size,
                embedding_dim,
                # The same initialization and regularization as the other fields.
                embeddings_initializer=clone_initializer(initializer),
                embeddings_regularizer=regularizer,
                name=f"{n}_embedding",
            )
            for n in sorted(shared)
        }
        candidates = {}
        for n in sorted(sequence_tables):
            encoded[f"{n}_lookup"] = prep["ids"][n]
            candidates[n] = sequence_tables[n](prep["ids"][n])  # (batch, dim)
            fields.append(
                keras.layers.Reshape((1, embedding_dim), name=f"{n}_field")(
                    candidates[n]
                )
            )
        x = (
            fields[0]
            if len(fields) == 1
            else keras.layers.Concatenate(axis=1, name="fields")(fields)
        )  # (batch, num_fields, dim)
        field_attention = []
        for layer in interaction:
            if isinstance(layer, InteractingLayer):
                # The weights come out of the same forward pass, as the gates do.
                x, weights = layer(x, return_attention_scores=True)
                field_attention.append(weights)  # (batch, heads, fields, fields)
            else:
                x = layer(x)
        dense_inputs = [keras.layers.Flatten(name="flat_fields")(x)]
        if numeric is not None:
            dense_inputs.append(numeric)
        for seq_name, (seq_ids, mask, shares) in prep["sequences"].items():
            encoded[f"{seq_name}_lookup"] = seq_ids
            encoded[f"{seq_name}_mask"] = mask
            history = sequence_tables[shares](seq_ids)  # (batch, max_len, dim)
            dense_inputs.append(
                sequence_pooling[seq_name](candidates[shares], history, mask=mask)
            )
        x = (
            dense_inputs[0]
            if len(dense_inputs) == 1
            else keras.layers.Concatenate(name="dense_input")(dense_inputs)
        )

        # Heads: the multitask block, then a tower and an output unit per task.
        gates = None
        if isinstance(multitask, (MMoE, PLE)):
            shared_out, gates = multitask(x, return_gate_weights=True)
        elif multitask is not None:
            shared_out = dict.fromkeys(task_names, multitask(x))
        else:
            shared_out = dict.fromkeys(task_names, x)
        # With a linear part the head gives the logit and the output unit follows
        # the sum; without one the head is the output unit (as models saved
        # before the linear part have it).
        linear_parts = {}
        if linear:
            linear_parts = {
                t: plain_fields(1, f"{t}_linear", clone_initializer(initializer))
                for t in task_names
            }
        heads = {
            t.name: keras.layers.Dense(
                1,
                activation=None if linear else _KINDS[t.kind][1],
                dtype="float32",  # outputs stay float32 under mixed precision
                name=f"{t.name}_logit" if linear else t.name,
            )
            for t in tasks
        }
        outputs = {}
        for t in tasks:
            h = shared_out[t.name]
            if towers[t.name] is not None:
                h = towers[t.name](h)
            outputs[t.name] = heads[t.name](h)
            if linear:
                terms = FieldSum(name=f"{t.name}_linear_logit")(
                    embed(linear_parts[t.name])
                )  # (batch, 1): the sum of the fields' weights
                logit = keras.layers.Add(dtype="float32", name=f"{t.name}_sum")(
                    [outputs[t.name], terms]
                )
                outputs[t.name] = keras.layers.Activation(
                    _KINDS[t.kind][1], dtype="float32", name=t.name
                )(logit)

        parts = Parts(
            field_embedding=field_embedding,
            sequence_tables=sequence_tables,
            interaction=interaction,
            sequence_pooling=sequence_pooling,
            multitask=multitask,
            towers=towers,
            heads=heads,
            linear=linear_parts,
        )
        arguments = {
            "features": json.loads(features_to_json(features))["features"],
            "tasks": [t.to_config() for t in tasks],
            "embedding_dim": embedding_dim,
            "shared_table": shared_table,
        }
        if linear:
            # Only a model with a linear part records it: other configs stay as
            # they were.
            arguments["linear"] = True
        self._init_functional(inputs, outputs, parts, arguments, name, **kwargs)
        # Untracked: the symbolic tensors the helpers cut the graph at.
        object.__setattr__(
            self,
            "_graph",
            {
                "inputs": inputs,
                "encoded": encoded,
                "gates": gates,
                "field_attention": field_attention,
            },
        )
        object.__setattr__(self, "_embeddings", (initializer, regularizer))
        self.features = features
        self.tasks = tasks

    def compile(
        self,
        optimizer="adam",
        loss=None,
        loss_weights=None,
        metrics=None,
        learning_rate: float | None = None,
        **kwargs,
    ):
        """Keras' `compile`, with the model's tasks as its defaults.

        Without `loss`, each task's output gets the task's loss, loss weight and
        metrics (`Task`); given a `loss`, the arguments go to Keras as given.

        Args:
            optimizer: a Keras optimizer or its name ("adam" is
                `keras_attn.optimizers.FusedAdam`, Keras' Adam update in one
                kernel per variable). Defaults to "adam".
            loss, loss_weights, metrics: as Keras' (None: the tasks').
            learning_rate: float or schedule. Sets the optimizer's learning rate
                when given.
            **kwargs: passed to `keras.Model.compile` (e.g. `jit_compile`).
        """
        if loss is None:
            loss = {t.name: t.loss for t in self.tasks}
            if loss_weights is None:
                loss_weights = {t.name: t.loss_weight for t in self.tasks}
            if metrics is None:
                metrics = {t.name: t.build_metrics() for t in self.tasks}
        super().compile(
            optimizer=_optimizer(optimizer, learning_rate),
            loss=loss,
            loss_weights=loss_weights,
            metrics=metrics,
            **kwargs,
        )

    @property
    def preprocessor(self):
        """The model from the raw inputs to the encoded values (categorical ids
        `(batch, fields)`, standardized numbers, history ids and masks), sharing
        this model's preprocessing layers; a dict keyed as `split_ctr_model`'s."""
        return keras.Model(
            self._graph["inputs"], self._graph["encoded"], name=f"{self.name}_prep"
        )

    def gate_weights_model(self):
        """A model from the same inputs to each task's gate weights over the
        experts, `{task: (batch, num_experts)}` (needs an `MMoE` or `PLE`)."""
        if self._graph["gates"] is None:
            raise ValueError(
                f"Model {self.name!r} has no MMoE or PLE block: it has no gates"
            )
        return keras.Model(
            self._graph["inputs"], self._graph["gates"], name=f"{self.name}_gates"
        )

    def explain_model(self):
        """A model (sharing the weights) from the same raw inputs to the task
        outputs and what explains them: `{task}_gate_weights` `(batch, num_experts)`
        for each task of an `MMoE` or `PLE` block (rows summing to 1), and
        `field_attention_{i}` `(batch, num_heads, fields, fields)` for each
        `InteractingLayer`. What the export's `explain` signature returns, and what
        to plot."""
        graph = self._graph
        explained = {
            f"{task}_gate_weights": gates
            for task, gates in (graph["gates"] or {}).items()
        }
        for i, weights in enumerate(graph["field_attention"]):
            explained[f"field_attention_{i}"] = weights
        if not explained:
            raise ValueError(
                f"Model {self.name!r} has neither MMoE/PLE gates nor interacting "
                "layers: there is nothing for an explain model or signature to return"
            )
        return keras.Model(
            graph["inputs"],
            {**output_tensors(self), **explained},
            name=f"{self.name}_explain",
        )

    def get_config(self):
        initializer, regularizer = self._embeddings
        return {
            **super().get_config(),
            "interaction": [_serialize(layer) for layer in self.interaction],
            "sequence_pooling": {
                n: _serialize(layer) for n, layer in self.sequence_pooling.items()
            },
            "multitask": _serialize(self.multitask),
            "towers": {t: _serialize(layer) for t, layer in self.towers.items()},
            "embeddings_initializer": keras.initializers.serialize(initializer),
            "embeddings_regularizer": (
                None
                if regularizer is None
                else keras.regularizers.serialize(regularizer)
            ),
        }


def _listed(tasks) -> list:
    return [tasks] if isinstance(tasks, (str, Task)) else list(tasks)


def _mlp(units, activation, dropout, name):
    """Dense layers (and dropout) in a `keras.Sequential`, or None without units."""
    layers = []
    for i, width in enumerate(units):
        layers.append(
            keras.layers.Dense(width, activation=activation, name=f"{name}_{i}")
        )
        if dropout:
            layers.append(keras.layers.Dropout(dropout, name=f"{name}_dropout_{i}"))
    return keras.Sequential(layers, name=name) if layers else None


def build_ctr_model(
    features: Sequence,
    tasks: Sequence[Task | str],
    embedding_dim: int = 8,
    shared_table: bool = False,
    multitask: str | None = None,
    num_experts: int = 8,
    expert_units: Sequence[int] = (64,),
    gate: str = "softmax",
    gate_score: str = "dot",
    num_shared_experts: int = 2,
    num_task_experts: int = 2,
    num_levels: int = 2,
    bottom_units: Sequence[int] = (64,),
    tower_units: Sequence[int] = (32,),
    interacting_layers: int = 0,
    num_heads: int = 2,
    key_dim: int | None = None,
    use_residual: bool = True,
    cross_layers: int = 0,
    cross_projection_dim: int | None = None,
    cross_num_experts: int = 1,
    linear: bool = False,
    din_hidden_units: Sequence[int] = (80, 40),
    din_activation: str = "dice",
    din_interaction: str = "concat_diff_product",
    activation: str = "relu",
    dropout: float = 0.0,
    embeddings_initializer="uniform",
    embeddings_regularizer=None,
    name: str = "ctr",
    mixed_precision: str = "float32",
    **deprecated,
) -> CTRModel:
    """A `CTRModel` from flat arguments: the common cases in one call.

    The parts it composes: `interacting_layers` `InteractingLayer`s (AutoInt),
    then a `FeatureCross` of `cross_layers` layers (DCN-v2), an
    `AttentionSequencePooling` per `SequenceFeature` (DIN), then `MMoE`, `PLE` or a
    shared bottom MLP (`multitask`), and a tower MLP per task. For other parts pass
    them to `CTRModel` as objects.

    Single-task models come from the same builder: AutoInt is
    `build_ctr_model(f, ["click"], interacting_layers=3, bottom_units=(),
    tower_units=())`, DIN is a model with `SequenceFeature`s and
    `bottom_units=(200, 80)`.

    Args:
        features: fitted feature specs (`keras_attn.features`).
        tasks: `Task`s or task names (binary tasks on numeric 0/1 label columns).
        embedding_dim: int. Size of each field's vector. Defaults to 8.
        shared_table: bool. One embedding table for all plain categorical fields
            (one gather per step instead of one per field; measured
            on this machine slower than one table per field). Defaults to False.
        multitask: str. "mmoe", "ple" or "shared_bottom". Defaults to "mmoe" for
            several tasks, "shared_bottom" for one.
        num_experts: int. MMoE experts. Defaults to 8.
        expert_units: list of int. Hidden sizes of each expert. Defaults to (64,).
        gate: str. "softmax" or "attention", the MMoE/PLE gate. Defaults to
            "softmax".
        gate_score: str. The attention gate's score. Defaults to "dot" (see
            `MMoE`).
        num_shared_experts: int. PLE shared experts per level. Defaults to 2.
        num_task_experts: int. PLE experts per task per level. Defaults to 2.
        num_levels: int. PLE extraction levels. Defaults to 2.
        bottom_units: list of int. The shared bottom MLP. Defaults to (64,).
        tower_units: list of int. Each task's tower. Defaults to (32,).
        interacting_layers: int. AutoInt interacting layers. Defaults to 0.
        num_heads: int. Heads of each interacting layer. Defaults to 2.
        key_dim: int. Size of each head (`att_dim` before; the old spelling
            warns). Defaults to 8.
        use_residual: bool. Residual projection in the interacting layers.
        cross_layers: int. DCN-v2 cross layers (one `FeatureCross`) on the
            flat fields, after the interacting layers. Defaults to 0.
        cross_projection_dim: int or None. Rank of the cross layers' matrices;
            None is full rank. Defaults to None.
        cross_num_experts: int. Low-rank experts per cross layer (DCN-v2's
            mixture, DCN-Mix; needs `cross_projection_dim`); 1 is one matrix per
            layer. Defaults to 1.
        linear: bool. A linear part per task beside the deep part (see
            `CTRModel`). Defaults to False.
        din_hidden_units: list of int. DIN activation unit sizes. Defaults to
            (80, 40).
        din_activation: str. DIN activation unit activation. Defaults to "dice".
        din_interaction: str. How the DIN activation unit combines the candidate
            and a history item: "concat_diff_product" or "outer_product" (see
            `LocalActivationUnit`). Defaults to "concat_diff_product".
        activation: str. Activation of the bottom and tower MLPs. Defaults to
            "relu".
        dropout: float. Dropout in experts, bottom and towers. Defaults to 0.0.
        embeddings_initializer: initializer of the field embeddings (tables and
            numeric vectors). Defaults to "uniform".
        embeddings_regularizer: optional regularizer of the field embeddings.
        name: str. The model's name. Defaults to "ctr".
        mixed_precision: str. The Keras dtype policy the model is built under
            (`keras_attn.precision.POLICIES`): "float32", "mixed_bfloat16" or
            "mixed_float16"; the output units stay float32. The global policy is
            restored afterwards. Defaults to "float32".

    Returns:
        A `CTRModel`: inputs `{feature name: (batch,)}`, outputs
        `{task name: (batch, 1)}`.

    Example:

    >>> import pandas as pd
    >>> from keras_attn.features import infer_features
    >>> df = pd.DataFrame({"city": ["a", "b", "a"], "age": [30.0, None, 50.0],
    ...                    "click": [1, 0, 1], "buy": [0, 0, 1]})
    >>> specs = infer_features(df, labels=["click", "buy"])
    >>> model = build_ctr_model(specs, ["click", "buy"], num_experts=2,
    ...                         gate="attention")
    >>> sorted(model.output_names), type(model.multitask).__name__
    (['buy', 'click'], 'MMoE')
    """
    key_dim = deprecated_argument(
        deprecated, "att_dim", "key_dim", key_dim, "build_ctr_model"
    )
    if deprecated:
        raise TypeError(
            f"build_ctr_model() got unexpected keyword arguments: {sorted(deprecated)}"
        )
    check_mixed_precision(mixed_precision)
    with policy_scope(mixed_precision):
        tasks = as_tasks(tasks)
        task_names = [t.name for t in tasks]
        if multitask is None:
            multitask = "mmoe" if len(tasks) > 1 else "shared_bottom"
        check_choice("multitask", multitask, MULTITASK)
        check_choice("din_interaction", din_interaction, INTERACTIONS)
        check_bool("use_residual", use_residual)
        check_int("interacting_layers", interacting_layers, minimum=0)
        check_int("cross_layers", cross_layers, minimum=0)
        check_positive_int("cross_num_experts", cross_num_experts)
        if cross_layers and cross_num_experts > 1 and cross_projection_dim is None:
            raise ValueError(
                "`cross_projection_dim` must be a positive integer when "
                "`cross_num_experts` > 1 (the experts are low rank). Received: "
                f"cross_projection_dim=None, cross_num_experts={cross_num_experts!r}"
            )
        interaction = [
            InteractingLayer(
                num_heads=num_heads,
                key_dim=8 if key_dim is None else key_dim,
                use_residual=use_residual,
                name=f"interacting_{i}",
            )
            for i in range(interacting_layers)
        ]
        if cross_layers:
            interaction.append(
                FeatureCross(
                    num_layers=cross_layers,
                    projection_dim=cross_projection_dim,
                    num_experts=cross_num_experts,
                    name="feature_cross",
                )
            )
        if multitask == "mmoe":
            block = MMoE(
                tasks=task_names,
                num_experts=num_experts,
                expert_units=tuple(expert_units),
                gate=gate,
                gate_score=gate_score,
                dropout=dropout,
                name="mmoe",
            )
        elif multitask == "ple":
            block = PLE(
                tasks=task_names,
                num_shared_experts=num_shared_experts,
                num_task_experts=num_task_experts,
                num_levels=num_levels,
                expert_units=tuple(expert_units),
                gate=gate,
                gate_score=gate_score,
                dropout=dropout,
                name="ple",
            )
        else:
            block = _mlp(bottom_units, activation, dropout, "bottom")
        towers = {
            t: _mlp(tower_units, activation, dropout, f"{t}_tower") for t in task_names
        }
        return CTRModel(
            features,
            tasks,
            embedding_dim=embedding_dim,
            shared_table=shared_table,
            interaction=interaction,
            sequence_pooling={
                f.name: AttentionSequencePooling(
                    hidden_units=tuple(din_hidden_units),
                    activation=din_activation,
                    interaction=din_interaction,
                    name=f"{f.name}_din_pooling",
                )
                for f in features
                if f.kind == "sequence"
            },
            multitask=block,
            towers=towers,
            linear=linear,
            embeddings_initializer=embeddings_initializer,
            embeddings_regularizer=embeddings_regularizer,
            name=name,
        )


def _optimizer(optimizer, learning_rate):
    """`optimizer` (an optimizer or its name), its learning rate set when given.

    "adam" is `FusedAdam`: Keras' Adam update, one fused kernel per variable."""
    if not isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        check_finite("learning_rate", learning_rate, 0, None, True, allow_none=True)
    if isinstance(optimizer, str) and optimizer.lower() == "adam":
        optimizer = FusedAdam()
    optimizer = keras.optimizers.get(optimizer)
    if learning_rate is not None:
        optimizer.learning_rate = learning_rate
    return optimizer


def _output_keys(model) -> list | None:
    """The names a loss dict is matched with: the keys of the output dict a
    functional model was built with (`output_tensors`; `output_names` are the
    producing layers' names, which need not be those), a list model's
    `output_names`, or None for a subclassed model never called symbolically,
    whose outputs Keras knows only on its first step."""
    try:
        return list(output_tensors(model))
    except AttributeError:  # no `.output`: "never called" / "no inbound nodes"
        names = getattr(model, "output_names", None)  # absent in Keras 3, or None
        return None if names is None else list(names)


def _compile_for_tasks(model, tasks, optimizer="adam", learning_rate=None, **kwargs):
    """Compiles any model whose outputs are keyed by the `tasks`' names."""
    tasks = as_tasks(tasks)
    outputs = _output_keys(model)
    missing = [t.name for t in tasks if outputs is not None and t.name not in outputs]
    if missing:
        raise ValueError(
            f"Tasks {missing} are not outputs of the model. Outputs: {outputs}"
        )
    keras.Model.compile(
        model,
        optimizer=_optimizer(optimizer, learning_rate),
        loss={t.name: t.loss for t in tasks},
        loss_weights={t.name: t.loss_weight for t in tasks},
        metrics={t.name: t.build_metrics() for t in tasks},
        **kwargs,
    )
    return model


def compile_ctr_model(
    model,
    tasks: Sequence[Task | str] | None = None,
    optimizer="adam",
    learning_rate: float | None = None,
    **kwargs,
):
    """Compiles a CTR model with each task's loss, loss weight and metrics.

    For a `CTRModel` this is `model.compile(optimizer, learning_rate=...)`, which
    reads the model's own tasks; passing them again (`compile_ctr_model(model,
    tasks)`, the old spelling) still works for one release and warns. A model that
    is not a `CTRModel` (e.g. the core of `split_ctr_model`) needs `tasks`.

    Args:
        model: a `CTRModel` (from `build_ctr_model`), or a model whose outputs
            are keyed by task names.
        tasks: the tasks, for a model that does not hold them.
        optimizer: a Keras optimizer or its name ("adam" is
            `keras_attn.optimizers.FusedAdam`, Keras' Adam update in one kernel
            per variable). Defaults to "adam".
        learning_rate: float. Sets the optimizer's learning rate when given.
        **kwargs: passed to `model.compile` (e.g. `jit_compile`).

    Returns:
        The model.
    """
    if isinstance(model, CTRModel):
        if tasks is None:
            model.compile(optimizer, learning_rate=learning_rate, **kwargs)
            return model
        warn_deprecated(
            "`compile_ctr_model(model, tasks)`",
            "`model.compile(optimizer)` (a CTRModel compiles for its own tasks)",
        )
    elif tasks is None:
        raise ValueError(
            "`tasks` must be given for a model that is not a CTRModel. Received: "
            f"model={type(model).__name__}, tasks=None"
        )
    return _compile_for_tasks(model, tasks, optimizer, learning_rate, **kwargs)


def _is_feature_specs(value) -> bool:
    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and all(hasattr(f, "kind") and hasattr(f, "fitted") for f in value)
    )


def _data_argument(args, data, features, tasks):
    """`(data, features, tasks)` of `fit_ctr_model(model, *args, data=...,
    features=..., tasks=...)`: `args` is `(data,)` (the spelling of now) or, the
    old spelling, `(features, tasks, data)` or a beginning of it."""
    if len(args) == 1 and not _is_feature_specs(args[0]):
        args, data = (), args[0] if data is None else data
    if len(args) > 3:
        raise TypeError(
            "`fit_ctr_model` takes `(model, data)` and its options by keyword. "
            f"Received {len(args) + 1} positional arguments"
        )
    old = dict(zip(("features", "tasks", "data"), args))
    for name, value in (("features", features), ("tasks", tasks), ("data", data)):
        if name in old and value is not None:
            raise TypeError(f"`fit_ctr_model` got two values for `{name}`")
    features = old.get("features", features)
    tasks = old.get("tasks", tasks)
    data = old.get("data", data)
    if data is None:
        raise ValueError("`data` must be a DataFrame or CSV path(s). Received: None")
    return data, features, tasks


def ctr_features_and_tasks(model, features=None, tasks=None, caller="fit_ctr_model"):
    """`(features, tasks)` of a `CTRModel`: the model's own.

    The old spellings of the helpers took them again; given here (by `caller`),
    they warn, the features must be the model's, and the given tasks (e.g. other
    loss weights) are used, as before.
    """
    _check_ctr_model(model)
    if features is not None or tasks is not None:
        warn_deprecated(
            f"Passing `features` and `tasks` to `{caller}`",
            f"`{caller}(model, ...)`: the CTRModel holds its features and tasks",
            stacklevel=4,
        )
    if features is not None and [(f.name, f.kind) for f in features] != [
        (f.name, f.kind) for f in model.features
    ]:
        raise ValueError(
            "`features` must be the feature specs `model` was built on: "
            f"{[f.name for f in model.features]}. Received: "
            f"{[getattr(f, 'name', f) for f in features]}"
        )
    return model.features, (model.tasks if tasks is None else as_tasks(tasks))


def _check_ctr_model(model) -> CTRModel:
    if not isinstance(model, CTRModel):
        raise ValueError(
            "`model` must be a CTRModel (from `build_ctr_model`). Received: "
            f"model={type(model).__name__}"
        )
    return model


def gate_weights_model(model):
    """A model from the same inputs to each task's gate weights over the experts.

    Args:
        model: a `CTRModel` with an `MMoE` or `PLE` block (`multitask="mmoe"` or
            `"ple"` in `build_ctr_model`).

    Returns:
        A `keras.Model` with outputs `{task: (batch, num_experts)}` that shares the
        model's weights.
    """
    return _check_ctr_model(model).gate_weights_model()


def split_ctr_model(model, features=None):
    """Cuts a `CTRModel` into its preprocessing and its core.

    `preprocessor` maps the raw feature dict to the encoded inputs (categorical ids
    `(batch, fields)`, standardized numbers, history ids and masks); `core` maps
    those to the task outputs. Both share the model's layers and weights, so
    `core(preprocessor(raw))` is `model(raw)`, and training `core` trains `model`.
    The core holds no string ops: it compiles with XLA.

    Args:
        model: a `CTRModel` (from `build_ctr_model`).
        features: deprecated (the model keeps its own feature specs); when given,
            they must be those and a `DeprecationWarning` says so.

    Returns:
        `(preprocessor, core)`, two `keras.Model`s; the encoded values are a dict
        (`categorical_ids`, `numeric_preprocessing`, and for a sequence feature
        `history` of item `item`: `item_lookup`, `history_lookup`, `history_mask`),
        the preprocessor's outputs and the core's inputs by the same keys.

    Example:

    >>> import pandas as pd
    >>> from keras_attn.features import infer_features
    >>> df = pd.DataFrame({"city": ["a", "b"], "age": [30.0, None], "click": [1, 0]})
    >>> specs = infer_features(df, labels=["click"])
    >>> model = build_ctr_model(specs, ["click"])
    >>> preprocessor, core = split_ctr_model(model)
    >>> sorted(preprocessor.output)
    ['categorical_ids', 'numeric_preprocessing']
    """
    ctr_features_and_tasks(model, features, caller="split_ctr_model")
    encoded = model._graph["encoded"]
    preprocessor = keras.Model(
        model._graph["inputs"], encoded, name=f"{model.name}_preprocessor"
    )
    outputs = output_tensors(model)
    with warnings.catch_warnings():
        # Keras 3 would have the dict keys match the (generated) tensor names; it
        # feeds the core by key all the same.
        warnings.filterwarnings("ignore", message="When providing `inputs` as a dict")
        core = keras.Model(encoded, outputs, name=f"{model.name}_core")
    return preprocessor, core


def fit_ctr_model(
    model,
    *args,
    data=None,
    epochs: int = 1,
    batch_size: int = 512,
    validation_data=None,
    shuffle: bool = True,
    seed: int | None = None,
    optimizer="adam",
    learning_rate: float | None = None,
    jit_compile: bool | str | None = "auto",
    steps_per_execution: int = 16,
    callbacks=None,
    verbose="auto",
    strategy=None,
    tpu: str | None = None,
    backup_dir=None,
    checkpoint_dir=None,
    mixed_precision: str | None = None,
    features=None,
    tasks=None,
):
    """Trains a `CTRModel` with its preprocessing run once.

    The model is cut with `split_ctr_model`. A DataFrame is encoded once by the
    preprocessing (CSV files are encoded as they stream); the core, compiled with
    `compile_ctr_model` under XLA, trains on batches of one fixed size, so XLA
    compiles one program: the rows stream in a new order on each pass and an
    epoch is `rows // batch_size` batches, the last, smaller batch left out. CSV
    files are read once before training (records counted, labels checked), so
    too few rows or a bad label fail before the first step. The
    weights are the model's: afterwards `model` takes raw values and is compiled
    (without XLA, which cannot run its string lookups) with the core's optimizer,
    ready for `evaluate`, more `fit` or export.

    Called `fit_ctr_model(model, data, **options)`: the model holds its feature
    specs and tasks. The old spelling `fit_ctr_model(model, features, tasks, data,
    ...)` (positional, or `features=` / `tasks=`) works for one release and warns.

    Args:
        model: a `CTRModel` (from `build_ctr_model`).
        data: a DataFrame or CSV path(s) (or `keras_attn.features.CSVFiles`), as
            for `keras_attn.features.to_dataset`.
        epochs: int. Defaults to 1.
        batch_size: int. Defaults to 512.
        validation_data: optional DataFrame or CSV path(s) with the label columns;
            all its rows are evaluated after each epoch.
        shuffle: bool. Shuffle the rows each epoch. Defaults to True.
        seed: int. Shuffle seed.
        optimizer: a Keras optimizer or its name ("adam" is
            `keras_attn.optimizers.FusedAdam`, Keras' Adam update in one kernel
            per variable). Defaults to "adam".
        learning_rate: float. The optimizer's learning rate, when given.
        jit_compile: bool, or "auto" / None: compile the core's steps with XLA.
            "auto" compiles with XLA on a GPU or TPU and, for a float32 model,
            not on a CPU-only machine: there every fit of the CTR benchmarks
            (census MMoE 5 epochs, DIN 2, AutoInt 3) took less wall time without
            XLA, whose compile costs more than it saves in a short fit. A
            bfloat16 model on a CPU follows `keras_attn.precision`'s rule (no XLA
            with AMX / AVX512-BF16, XLA without). For a long MMoE fit on a CPU
            True may pay: on a loaded machine the census benchmark's epochs ran
            1.5-1.9x faster under XLA, paying back the compile after roughly a
            thousand steps (`benchmarks/RESULTS.md`, bench_ctr); on a quiet one
            (AMD EPYC, 2026-12-05) they ran at the same speed. Measure on yours.
            Defaults to "auto".
        steps_per_execution: int. Training steps per call into the compiled
            function (with a DataFrame under Keras 3 on one replica, whatever
            the number of steps per epoch; from CSV files, the largest divisor
            of it up to this). Defaults to 16.
        callbacks: list of Keras callbacks.
        verbose: Keras' `fit` verbosity. Defaults to "auto".
        strategy: a `tf.distribute.Strategy` or a kind of
            `keras_attn.distribute.get_strategy` ("mirrored", "multi_worker", ...).
            The model must have been built inside its `scope()`; None trains under
            the strategy the model was built under (none, or that scope's). The
            preprocessing runs on the host in `tf.data`; only the core, which
            holds the trainable weights, is replicated. `batch_size` is the global
            batch.
        tpu: str. TPU name for `strategy="tpu"`.
        backup_dir: str. `BackupAndRestore` directory: a run killed mid-epoch and
            started again with the same arguments resumes from its last finished
            epoch, with that epoch's data order (the rows are then shuffled by
            `(seed, epoch)`, from a DataFrame or from CSV files), and ends with the
            uninterrupted run's weights.
        checkpoint_dir: str. Weights after each epoch go to
            `checkpoint_dir/epoch_NNN.weights.h5` (the core's weights, which are
            the model's trainable ones, in the core's order).
        mixed_precision: str or None. The policy the model was built under
            (`build_ctr_model(..., mixed_precision=...)`); a built model cannot
            change it, so a different value raises. None reads it from the model.
            It picks the "auto" `jit_compile`. Defaults to None.
        features, tasks: deprecated (the model's own are used); given tasks
            (e.g. other loss weights) are used as before.

    Returns:
        The `History` of the core's `fit` (its logs are keyed by task name as the
        model's would be; `history.model` is `model`).

    Example:

    >>> import pandas as pd
    >>> from keras_attn.features import infer_features
    >>> df = pd.DataFrame({"city": ["a", "b"] * 32, "age": [30.0, None] * 32,
    ...                    "click": [1, 0] * 32})
    >>> specs = infer_features(df, labels=["click"])
    >>> model = build_ctr_model(specs, ["click"])
    >>> history = fit_ctr_model(model, df, batch_size=16, jit_compile=False,
    ...                         verbose=0)
    >>> len(history.history["loss"])
    1
    """
    data, features, tasks = _data_argument(args, data, features, tasks)
    features, tasks = ctr_features_and_tasks(model, features, tasks, "fit_ctr_model")
    check_positive_int("batch_size", batch_size)
    check_positive_int("epochs", epochs)
    if mixed_precision is not None:
        check_mixed_precision(mixed_precision)
    # Written after the first epoch: a file in the way fails now, not then.
    for name, folder in (
        ("backup_dir", backup_dir),
        ("checkpoint_dir", checkpoint_dir),
    ):
        if folder is not None:
            check_folder(name, folder)
    # CSV files are read once here: their records counted, their labels checked
    # (to_dataset reuses the pass), before any training.
    steps = count_batches(data, batch_size, tasks, features)
    if validation_data is not None and not count_rows(validation_data, tasks, features):
        # Named here: to_dataset would call it `data`.
        shown = (
            "an empty DataFrame"
            if isinstance(validation_data, pd.DataFrame)
            else f"CSV file(s) {csv_files(validation_data).paths} with a header only"
        )
        raise ValueError(
            f"`validation_data` must have at least one row. Received: {shown}"
        )
    strategy = distribute.model_strategy(model, distribute.as_strategy(strategy, tpu))
    with strategy.scope():
        # The core's optimizer must live under the strategy of its variables.
        preprocessor, core = split_ctr_model(model)
    policy = check_model_policy(model, mixed_precision, "fit_ctr_model")
    # "auto": XLA with an accelerator only (the docstring says why).
    jit_compile = resolve_jit_compile(jit_compile, policy, default=has_accelerator())
    replicated = strategy.num_replicas_in_sync > 1
    start_epoch = training.completed_epochs(backup_dir) if backup_dir else 0
    if seed is None:
        # With a backup, the seed a restarted run takes again (a CSV file's order
        # came from a fresh random seed: the resumed epochs were another order);
        # else a new order each run, reproducible under keras.utils.set_random_seed.
        seed = (
            0
            if backup_dir is not None
            else int(tf.random.uniform([], 0, 2**31 - 1, dtype=tf.int64))
        )
    if isinstance(data, pd.DataFrame):
        # Whole columns, encoded once on the host; epoch e's order is a function
        # of (seed, e) (`training.epoch_batches`), so a resumed run keeps it.
        feed = training.feed_epochs(
            frame_tensors(data, features, tasks, preprocessor),
            len(data),
            batch_size,
            strategy,
            steps_per_execution,
            shuffle=shuffle,
            seed=seed,
            start_epoch=start_epoch,
            # Several replicas: no boolean mask in the batches Keras 3 averages.
            replicated_input=training.numbers_only,
        )
    else:

        def train_dataset(size, context):
            ds = to_dataset(
                data,
                features,
                tasks,
                batch_size=size,
                shuffle=shuffle,
                seed=seed,
                # The batches repeat and `fit` counts `steps` per epoch: one
                # iterator for the whole fit. A CSV pass gives exactly `steps`
                # full batches, its order a function of (seed, epoch): a resumed
                # fit starts at its epoch's batches.
                num_epochs=None,
                drop_remainder=True,
                preprocessor=preprocessor,
                start_epoch=start_epoch,
            )
            return training.numbers_only(ds) if replicated else ds

        feed = training.EpochFeed(
            training.distribute_dataset(strategy, train_dataset, batch_size),
            steps,
            training.steps_per_execution(strategy, steps_per_execution, steps),
            [],
        )
    validation = None
    if validation_data is not None:
        validation = to_dataset(
            validation_data,
            features,
            tasks,
            batch_size=batch_size,
            preprocessor=preprocessor,
        )
        if replicated:
            validation = training.numbers_only(validation)
    with strategy.scope():
        _compile_for_tasks(
            core,
            tasks,
            optimizer=optimizer,
            learning_rate=learning_rate,
            jit_compile=jit_compile,
            steps_per_execution=feed.steps_per_execution,
        )
    # Labels of one batch's shape: the loss and metric state is made before the
    # step is traced (one trace instead of two).
    training.build_training_state(
        core, {t.name: tf.zeros([batch_size, 1]) for t in tasks}
    )
    # The dataset shuffles itself; shuffle=False keeps Keras from warning.
    history = core.fit(
        feed.dataset,
        epochs=epochs,
        steps_per_epoch=feed.steps_per_epoch,
        validation_data=validation,
        callbacks=training.fit_callbacks(callbacks, backup_dir, checkpoint_dir)
        + feed.callbacks,
        verbose=verbose,
        shuffle=False,
    )
    with strategy.scope():
        _compile_for_tasks(model, tasks, optimizer=core.optimizer)
    # The model trained, as every fit helper's History has (the core's fit set its
    # own: the part of `model` that holds the weights).
    history.set_model(model)
    return history
