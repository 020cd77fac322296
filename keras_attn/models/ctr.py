"""Multi-task CTR models: raw features -> embeddings -> [AutoInt] [DIN] -> MMoE/PLE
-> one tower per task.

`build_ctr_model` returns a functional Keras model whose inputs are the raw feature
columns (strings for categories, floats for numbers, joined id strings for
histories) and whose outputs are a dict keyed by task name. The preprocessing
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
import warnings
from collections.abc import Sequence

from keras_attn._validation import (
    check_bool,
    check_choice,
    check_finite,
    check_positive_int,
)
from keras_attn.backend import KERAS_3, keras
from keras_attn.features.preprocessing import (
    StackColumns,
    build_preprocessing,
    raw_input_spec,
)
from keras_attn.layers import (
    PLE,
    AttentionSequencePooling,
    FieldEmbedding,
    InteractingLayer,
    MMoE,
)

__all__ = [
    "MULTITASK",
    "Task",
    "build_ctr_model",
    "compile_ctr_model",
    "fit_ctr_model",
    "gate_weights_model",
    "split_ctr_model",
]

#: How the tasks share the bottom of the model.
MULTITASK = ("mmoe", "ple", "shared_bottom")
_KINDS = {
    "binary": ("binary_crossentropy", "sigmoid"),
    "regression": ("mse", None),
}


@dataclasses.dataclass
class Task:
    """One prediction task of a CTR model: its label, loss, weight and metrics.

    Args:
        name: str. The output's name (a Python identifier).
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
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(
                "`name` of a Task must be a Python identifier (it names the "
                f"output). Received: name={self.name!r}"
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


def _as_tasks(tasks) -> list[Task]:
    if isinstance(tasks, (str, Task)):
        tasks = [tasks]
    out = [t if isinstance(t, Task) else Task(t) for t in tasks]
    if not out:
        raise ValueError("`tasks` must name at least one task. Received: tasks=[]")
    names = [t.name for t in out]
    if len(set(names)) != len(names):
        raise ValueError(f"Task names must be unique. Received: {names}")
    return out


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
    att_dim: int = 8,
    use_residual: bool = True,
    din_hidden_units: Sequence[int] = (80, 40),
    din_activation: str = "dice",
    activation: str = "relu",
    dropout: float = 0.0,
    embeddings_initializer="uniform",
    embeddings_regularizer=None,
    name: str = "ctr",
):
    """Builds a (multi-task) CTR model on raw feature inputs.

    Sections: a named raw input per feature; preprocessing (lookup or hashing of
    categories, standardization and missing-value handling of numbers, splitting of
    histories); `FieldEmbedding` (one vector per field; a categorical feature that a
    sequence shares gets its own table, used for its candidate and its history);
    optional `InteractingLayer`s (AutoInt); DIN `AttentionSequencePooling` of each
    sequence against its candidate; then `MMoE`, `PLE` or a shared bottom MLP, and a
    tower per task ending in the task's output unit.

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
        att_dim: int. Size of each head. Defaults to 8.
        use_residual: bool. Residual projection in the interacting layers.
        din_hidden_units: list of int. DIN activation unit sizes. Defaults to
            (80, 40).
        din_activation: str. DIN activation unit activation. Defaults to "dice".
        activation: str. Activation of the bottom and tower MLPs. Defaults to
            "relu".
        dropout: float. Dropout in experts, bottom and towers. Defaults to 0.0.
        embeddings_initializer: initializer of the field embeddings (tables and
            numeric vectors). Defaults to "uniform".
        embeddings_regularizer: optional regularizer of the field embeddings.
        name: str. The model's name. Defaults to "ctr".

    Returns:
        A functional `keras.Model`: inputs `{feature name: (batch,)}`, outputs
        `{task name: (batch, 1)}`.

    Example:

    >>> import pandas as pd
    >>> from keras_attn.features import infer_features
    >>> df = pd.DataFrame({"city": ["a", "b", "a"], "age": [30.0, None, 50.0],
    ...                    "click": [1, 0, 1], "buy": [0, 0, 1]})
    >>> specs = infer_features(df, labels=["click", "buy"])
    >>> model = build_ctr_model(specs, ["click", "buy"], num_experts=2,
    ...                         gate="attention")
    >>> sorted(model.output_names)
    ['buy', 'click']
    """
    tasks = _as_tasks(tasks)
    features = list(features)
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
    if multitask is None:
        multitask = "mmoe" if len(tasks) > 1 else "shared_bottom"
    check_choice("multitask", multitask, MULTITASK)
    check_bool("shared_table", shared_table)
    check_bool("use_residual", use_residual)
    for f in features:
        if not f.fitted:
            raise ValueError(
                f"Feature {f.name!r} is not fitted: call `fit_features(features, "
                "data)` first (or build the specs with `infer_features`)"
            )

    # Inputs: one raw column per feature.
    inputs = {}
    for f in features:
        shape, dtype = raw_input_spec(f)
        inputs[f.name] = keras.Input(shape=shape, dtype=dtype, name=f.name)
    prep = build_preprocessing(features, inputs)

    # Encoders: field embeddings, AutoInt, DIN.
    shared = {seq_shares for _, _, seq_shares in prep["sequences"].values()}
    by_name = {f.name: f for f in features}
    plain = [n for n in prep["ids"] if n not in shared]
    numeric = prep["numeric"]
    parts = []
    if plain or numeric is not None:
        embedding = FieldEmbedding(
            [by_name[n].vocabulary_size for n in plain],
            embedding_dim,
            num_numeric=0 if numeric is None else int(numeric.shape[-1]),
            shared_table=shared_table,
            embeddings_initializer=embeddings_initializer,
            embeddings_regularizer=embeddings_regularizer,
            validate_ids=False,  # the lookups cannot leave the range
            name="field_embedding",
        )
        ids = StackColumns(name="categorical_ids")([prep["ids"][n] for n in plain])
        parts.append(embedding(ids, numeric) if numeric is not None else embedding(ids))
    tables = {
        n: keras.layers.Embedding(
            by_name[n].vocabulary_size, embedding_dim, name=f"{n}_embedding"
        )
        for n in sorted(shared)
    }
    candidates = {n: tables[n](prep["ids"][n]) for n in tables}  # (batch, dim)
    for n in sorted(candidates):
        parts.append(
            keras.layers.Reshape((1, embedding_dim), name=f"{n}_field")(candidates[n])
        )
    fields = (
        parts[0]
        if len(parts) == 1
        else keras.layers.Concatenate(axis=1, name="fields")(parts)
    )  # (batch, num_fields, dim)
    for i in range(interacting_layers):
        fields = InteractingLayer(
            num_heads=num_heads,
            att_dim=att_dim,
            use_residual=use_residual,
            name=f"interacting_{i}",
        )(fields)
    dense_inputs = [keras.layers.Flatten(name="flat_fields")(fields)]
    if numeric is not None:
        dense_inputs.append(numeric)
    for seq_name, (seq_ids, mask, shares) in prep["sequences"].items():
        history = tables[shares](seq_ids)  # (batch, max_len, dim)
        pooled = AttentionSequencePooling(
            hidden_units=tuple(din_hidden_units),
            activation=din_activation,
            name=f"{seq_name}_din_pooling",
        )(candidates[shares], history, mask=mask)
        dense_inputs.append(pooled)
    x = (
        dense_inputs[0]
        if len(dense_inputs) == 1
        else keras.layers.Concatenate(name="dense_input")(dense_inputs)
    )

    # Heads: experts and gates, or a shared bottom; then one tower per task.
    task_names = [t.name for t in tasks]
    if multitask == "mmoe":
        shared_out = MMoE(
            tasks=task_names,
            num_experts=num_experts,
            expert_units=tuple(expert_units),
            gate=gate,
            gate_score=gate_score,
            dropout=dropout,
            name="mmoe",
        )(x, return_gate_weights=True)[0]
    elif multitask == "ple":
        shared_out = PLE(
            tasks=task_names,
            num_shared_experts=num_shared_experts,
            num_task_experts=num_task_experts,
            num_levels=num_levels,
            expert_units=tuple(expert_units),
            gate=gate,
            gate_score=gate_score,
            dropout=dropout,
            name="ple",
        )(x, return_gate_weights=True)[0]
    else:
        for i, units in enumerate(bottom_units):
            x = keras.layers.Dense(units, activation=activation, name=f"bottom_{i}")(x)
            if dropout:
                x = keras.layers.Dropout(dropout, name=f"bottom_dropout_{i}")(x)
        shared_out = {t: x for t in task_names}
    outputs = {}
    for task in tasks:
        h = shared_out[task.name]
        for i, units in enumerate(tower_units):
            h = keras.layers.Dense(
                units, activation=activation, name=f"{task.name}_tower_{i}"
            )(h)
            if dropout:
                h = keras.layers.Dropout(dropout, name=f"{task.name}_dropout_{i}")(h)
        outputs[task.name] = keras.layers.Dense(
            1,
            activation=_KINDS[task.kind][1],
            dtype="float32",  # outputs stay float32 under mixed precision
            name=task.name,
        )(h)
    return keras.Model(inputs=inputs, outputs=outputs, name=name)


def compile_ctr_model(
    model,
    tasks: Sequence[Task | str],
    optimizer="adam",
    learning_rate: float | None = None,
    **kwargs,
):
    """Compiles a CTR model with each task's loss, loss weight and metrics.

    Args:
        model: a model from `build_ctr_model`.
        tasks: the same tasks.
        optimizer: a Keras optimizer or its name. Defaults to "adam".
        learning_rate: float. Sets the optimizer's learning rate when given.
        **kwargs: passed to `model.compile` (e.g. `jit_compile`).

    Returns:
        The model.
    """
    tasks = _as_tasks(tasks)
    missing = [t.name for t in tasks if t.name not in model.output_names]
    if missing:
        raise ValueError(
            f"Tasks {missing} are not outputs of the model. Outputs: "
            f"{list(model.output_names)}"
        )
    if not isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        check_finite("learning_rate", learning_rate, 0, None, True, allow_none=True)
    optimizer = keras.optimizers.get(optimizer)
    if learning_rate is not None:
        optimizer.learning_rate = learning_rate
    model.compile(
        optimizer=optimizer,
        loss={t.name: t.loss for t in tasks},
        loss_weights={t.name: t.loss_weight for t in tasks},
        metrics={t.name: t.build_metrics() for t in tasks},
        **kwargs,
    )
    return model


def gate_weights_model(model):
    """A model from the same inputs to each task's gate weights over the experts.

    Args:
        model: a model from `build_ctr_model` with `multitask="mmoe"` or `"ple"`.

    Returns:
        A `keras.Model` with outputs `{task: (batch, num_experts)}` that shares the
        model's weights.
    """
    layer = None
    for candidate in ("mmoe", "ple"):
        try:
            layer = model.get_layer(candidate)
            break
        except ValueError:
            continue
    if layer is None:
        raise ValueError(
            f"Model {model.name!r} has no MMoE or PLE layer (named 'mmoe' or 'ple')"
        )
    # The builder calls the layer with return_gate_weights=True, so its output holds
    # the gates (Keras 3 cannot call a built layer again with a new output structure).
    output = layer.output
    if KERAS_3:
        # Keras 3 flattens (outputs, gates), each dict by sorted key.
        names = sorted(layer.tasks)
        gates = dict(zip(names, list(output)[len(names) :]))
    else:
        gates = output[1]  # tf_keras keeps the nested structure
    return keras.Model(model.inputs, gates, name=f"{model.name}_gates")


def _encoded_tensors(model, features) -> dict:
    """The symbolic tensors where a `build_ctr_model` graph leaves its preprocessing:
    `{name: tensor}`, each the single output of a layer named after it."""
    features = list(features)
    kinds = {f.kind for f in features}
    shares = {f.shares for f in features if f.kind == "sequence"}
    names = []
    if any(f.kind == "categorical" and f.name not in shares for f in features):
        names.append("categorical_ids")
    if "numeric" in kinds:
        names.append("numeric_preprocessing")
    names += [f"{n}_lookup" for n in sorted(shares)]
    encoded = {}
    try:
        for name in names:
            encoded[name] = model.get_layer(name).output
        for f in features:
            if f.kind == "sequence":
                encoded[f"{f.name}_lookup"] = model.get_layer(f"{f.name}_lookup").output
                encoded[f"{f.name}_mask"] = model.get_layer(f"{f.name}_split").output[1]
    except (ValueError, AttributeError, RuntimeError) as error:
        raise ValueError(
            f"Model {model.name!r} does not look like a `build_ctr_model` model on "
            f"these features (built by this version): {error}"
        ) from None
    return encoded


def split_ctr_model(model, features):
    """Cuts a `build_ctr_model` model into its preprocessing and its core.

    `preprocessor` maps the raw feature dict to the encoded inputs (categorical ids
    `(batch, fields)`, standardized numbers, history ids and masks); `core` maps
    those to the task outputs. Both share the model's layers and weights, so
    `core(preprocessor(raw))` is `model(raw)`, and training `core` trains `model`.
    The core holds no string ops: it compiles with XLA.

    Args:
        model: a model from `build_ctr_model`.
        features: the feature specs it was built on.

    Returns:
        `(preprocessor, core)`, two `keras.Model`s; the encoded values are a dict
        keyed by the names of the layers that make them.

    Example:

    >>> import pandas as pd
    >>> from keras_attn.features import infer_features
    >>> df = pd.DataFrame({"city": ["a", "b"], "age": [30.0, None], "click": [1, 0]})
    >>> specs = infer_features(df, labels=["click"])
    >>> model = build_ctr_model(specs, ["click"])
    >>> preprocessor, core = split_ctr_model(model, specs)
    >>> sorted(preprocessor.output_names)
    ['categorical_ids', 'numeric_preprocessing']
    """
    encoded = _encoded_tensors(model, features)
    preprocessor = keras.Model(model.inputs, encoded, name=f"{model.name}_preprocessor")
    outputs = model.output if KERAS_3 else model.outputs
    if not KERAS_3:
        outputs = dict(zip(model.output_names, outputs))
    with warnings.catch_warnings():
        # Keras 3 would have the dict keys match the (generated) tensor names; it
        # feeds the core by key all the same.
        warnings.filterwarnings("ignore", message="When providing `inputs` as a dict")
        core = keras.Model(encoded, outputs, name=f"{model.name}_core")
    return preprocessor, core


def fit_ctr_model(
    model,
    features,
    tasks: Sequence[Task | str],
    data,
    epochs: int = 1,
    batch_size: int = 512,
    validation_data=None,
    shuffle: bool = True,
    seed: int | None = None,
    optimizer="adam",
    learning_rate: float | None = None,
    jit_compile: bool = True,
    steps_per_execution: int = 16,
    callbacks=None,
    verbose="auto",
):
    """Trains a `build_ctr_model` model with its preprocessing run once.

    The model is cut with `split_ctr_model`. A DataFrame is encoded once by the
    preprocessing (CSV files are encoded as they stream); the core, compiled with
    `compile_ctr_model` under XLA, trains on batches of one fixed size, so XLA
    compiles one program: a DataFrame's rows stream in a new order on each pass and
    an epoch is `len(data) // batch_size` batches of that stream; a CSV epoch is
    one pass over the files, its last, smaller batch left out. The
    weights are the model's: afterwards `model` takes raw values and is compiled
    (without XLA, which cannot run its string lookups) with the core's optimizer,
    ready for `evaluate`, more `fit` or export.

    Args:
        model: a model from `build_ctr_model`.
        features: the feature specs it was built on.
        tasks: its tasks (`Task`s or names).
        data: a DataFrame or CSV path(s), as for `keras_attn.features.to_dataset`.
        epochs: int. Defaults to 1.
        batch_size: int. Defaults to 512.
        validation_data: optional DataFrame or CSV path(s) with the label columns;
            all its rows are evaluated after each epoch.
        shuffle: bool. Shuffle the rows each epoch. Defaults to True.
        seed: int. Shuffle seed.
        optimizer: a Keras optimizer or its name. Defaults to "adam".
        learning_rate: float. The optimizer's learning rate, when given.
        jit_compile: bool. Compile the core's steps with XLA. Defaults to True.
        steps_per_execution: int. Training steps per call into the compiled
            function (1 under tf_keras for CSV input, whose length is unknown).
            Defaults to 16.
        callbacks: list of Keras callbacks.
        verbose: Keras' `fit` verbosity. Defaults to "auto".

    Returns:
        The `History` of the core's `fit` (its logs are keyed by task name as the
        model's would be).

    Example:

    >>> import pandas as pd
    >>> from keras_attn.features import infer_features
    >>> df = pd.DataFrame({"city": ["a", "b"] * 32, "age": [30.0, None] * 32,
    ...                    "click": [1, 0] * 32})
    >>> specs = infer_features(df, labels=["click"])
    >>> model = build_ctr_model(specs, ["click"])
    >>> history = fit_ctr_model(model, specs, ["click"], df, batch_size=16,
    ...                         jit_compile=False, verbose=0)
    >>> len(history.history["loss"])
    1
    """
    import pandas as pd

    from keras_attn.features.dataset import to_dataset

    check_positive_int("batch_size", batch_size)
    check_positive_int("epochs", epochs)
    tasks = _as_tasks(tasks)
    steps = None
    if isinstance(data, pd.DataFrame):  # as to_dataset tells it from CSV paths
        steps = len(data) // batch_size
        if steps == 0:
            raise ValueError(
                f"`data` must hold at least one full batch of `batch_size` rows. "
                f"Received: {len(data)} rows, batch_size={batch_size}"
            )
    preprocessor, core = split_ctr_model(model, features)
    train = to_dataset(
        data,
        features,
        tasks,
        batch_size=batch_size,
        shuffle=shuffle,
        seed=seed,
        # A DataFrame's batches repeat (reshuffled each pass) and `fit` counts
        # `steps` per epoch: one iterator for the whole fit, instead of a new one
        # (and a refilled shuffle buffer) every epoch, which cost 60-300 ms per
        # epoch of ~1 s on the census benchmark.
        num_epochs=None if steps else 1,
        drop_remainder=True,
        preprocessor=preprocessor,
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
    if not KERAS_3 and steps is None:
        # tf_keras needs a known number of steps for several steps per execution,
        # and a streamed CSV has none.
        steps_per_execution = 1
    compile_ctr_model(
        core,
        tasks,
        optimizer=optimizer,
        learning_rate=learning_rate,
        jit_compile=jit_compile,
        steps_per_execution=steps_per_execution,
    )
    # The dataset shuffles itself; shuffle=False keeps Keras from warning.
    history = core.fit(
        train,
        epochs=epochs,
        steps_per_epoch=steps,
        validation_data=validation,
        callbacks=callbacks,
        verbose=verbose,
        shuffle=False,
    )
    compile_ctr_model(model, tasks, optimizer=core.optimizer)
    return history
