"""Training plumbing shared by the fit helpers: the input pipelines under a strategy
(`distribute_dataset`, `numbers_only`, `epoch_batches`), resumable runs
(`BackupAndRestore` plus the record of finished epochs, so a restart resumes the
data order too), per-epoch weight checkpoints, the warm-up and timing callbacks, and
the keywords every `fit_*` helper takes (`strategy`, `tpu`, `backup_dir`,
`checkpoint_dir`, `mixed_precision`, `jit_compile`, `callbacks`, `verbose`, `seed`),
checked and resolved in one place by `fit_options`.

What a `fit_*` helper returns: the Keras `History` of its `fit` (its `.model` is
the model trained), or, where it reports more than the fit's logs, an object with
that `History` as `.history` and the model as `.model` (e.g.
`keras_attn.models.AoAReaderResult`).

The strategy itself is chosen by `keras_attn.distribute`. The fit helpers run every
raw-value step (string lookups, tokenization) on the host, in `tf.data`, so a
replicated model sees numbers only: Keras 3 averages a first batch across replicas
to build a model under a strategy, and that fails on string tensors (`AddN` has no
string kernel).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable

from keras_attn import distribute
from keras_attn._deprecation import warn_deprecated
from keras_attn._validation import check_folder, check_int
from keras_attn.backend import KERAS_3, keras, tf
from keras_attn.precision import check_model_policy, resolve_jit_compile

__all__ = [
    "EpochFeed",
    "EpochTimer",
    "FitOptions",
    "WarmUp",
    "build_training_state",
    "check_callbacks",
    "check_static_input",
    "completed_epochs",
    "distribute_dataset",
    "epoch_batches",
    "feed_epochs",
    "fit_callbacks",
    "fit_options",
    "numbers_only",
    "readable_as_logs",
    "seed_run",
    "steps_per_execution",
    "weights_checkpoint",
]


def distribute_dataset(
    strategy, dataset_fn: Callable, global_batch_size: int, per_pipeline=None
):
    """The input of `fit` under `strategy`: one pipeline per input worker.

    On one machine (the default strategy or `MirroredStrategy`), the dataset of the
    global batch, which Keras splits over the replicas itself. Elsewhere
    (multi-worker, TPU), `strategy.distribute_datasets_from_function`: each input
    pipeline builds its own dataset with `dataset_fn(batch_size, input_context)` at
    the per-replica batch size and keeps its own shard of the batches
    (`input_context.input_pipeline_id` of `num_input_pipelines`).

    Args:
        strategy: a `tf.distribute.Strategy`.
        dataset_fn: `(batch_size, input_context or None) -> tf.data.Dataset` of
            batches of `batch_size`.
        global_batch_size: int. Examples per step over all replicas.
        per_pipeline: bool. Force (True) or forbid (False) one pipeline per input
            worker; None chooses as above.

    Returns:
        A `tf.data.Dataset` or a distributed dataset.
    """
    replicas = strategy.num_replicas_in_sync
    if global_batch_size % replicas:
        raise ValueError(
            f"`batch_size` must be a multiple of the {replicas} replicas in sync. "
            f"Received: batch_size={global_batch_size}"
        )
    if per_pipeline is None:
        # MirroredStrategy is one host: Keras splits its global batches itself.
        per_pipeline = replicas > 1 and not isinstance(
            strategy, tf.distribute.MirroredStrategy
        )
    if not per_pipeline:
        return dataset_fn(global_batch_size, None)

    def make(context):
        ds = dataset_fn(context.get_per_replica_batch_size(global_batch_size), context)
        return ds.shard(context.num_input_pipelines, context.input_pipeline_id)

    return strategy.distribute_datasets_from_function(make)


def numbers_only(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` with boolean tensors (masks) as int32; refuses strings.

    Keras 3 builds a model under a strategy from the replicas' first batch averaged
    over the replicas (`strategy.reduce("MEAN", ...)`), which has no kernel for
    strings or booleans. A functional model casts an int32 mask back to its boolean
    input.
    """
    strings = [
        str(spec)
        for spec in tf.nest.flatten(dataset.element_spec)
        if spec.dtype == tf.string
    ]
    if strings:
        raise ValueError(
            "The input of a replicated model must be numbers: run the string "
            "preprocessing in tf.data first (e.g. `to_dataset(..., "
            f"preprocessor=...)`). Received string tensors: {strings}"
        )

    def cast(*batch):
        batch = tf.nest.map_structure(
            lambda t: tf.cast(t, tf.int32) if t.dtype == tf.bool else t, batch
        )
        return batch if len(batch) > 1 else batch[0]

    return dataset.map(cast)


def check_static_input(dataset) -> None:
    """Raises unless `dataset` fits a TPU step: numbers only, every shape fixed.

    A TPU (and XLA at large) compiles one program per input shape and runs no
    string op: batches must be full (`drop_remainder=True`), lengths padded to a
    fixed size, and the tokenization or lookups done before, in `tf.data`.

    Args:
        dataset: a `tf.data.Dataset`.

    Example:

    >>> import tensorflow as tf
    >>> check_static_input(tf.data.Dataset.range(8).batch(4, drop_remainder=True))
    """
    bad = [
        f"{spec.dtype.name}{spec.shape}"
        for spec in tf.nest.flatten(dataset.element_spec)
        if spec.dtype == tf.string or not spec.shape.is_fully_defined()
    ]
    if bad:
        raise ValueError(
            "`dataset` must give numeric batches of fixed shapes for a TPU / XLA "
            "step (batch with drop_remainder=True, pad to fixed lengths, tokenize "
            f"in tf.data). Received element specs: {bad}"
        )


def steps_per_execution(
    strategy, requested: int, steps_per_epoch: int | None = None
) -> int:
    """`requested` steps per call, made safe for Keras and for the epoch's steps.

    - Keras 3.15 runs `steps_per_execution > 1` as a `tf.while_loop` over optional
      batches, which fails under `MirroredStrategy` / `MultiWorkerMirroredStrategy`
      with more than one replica ("You must feed a value for placeholder tensor
      ... while/cond/Placeholder"; seen on two logical CPU devices): 1 there.
      tf_keras runs it; TPUStrategy keeps the request (untested here: no TPU).
    - Keras 3 runs whole executions: on an endless dataset, an epoch of
      `steps_per_epoch` steps trains `ceil(steps_per_epoch / k) * k` of them. The
      result divides `steps_per_epoch` (the largest divisor <= the request).
    """
    k = max(1, int(requested))
    if (
        KERAS_3
        and strategy.num_replicas_in_sync > 1
        and not isinstance(strategy, tf.distribute.TPUStrategy)
    ):
        return 1
    if steps_per_epoch:
        k = min(k, steps_per_epoch)
        while steps_per_epoch % k:
            k -= 1
    return k


_safe_steps = steps_per_execution


def _epoch_order(epoch, num_rows, batch_size, shuffle, seed, drop_remainder):
    """The row indices of epoch `epoch`, one dataset element per batch.

    A batch is a slice of the epoch's permutation (`stateless_shuffle` of the rows
    with the seed `(seed, epoch)`): one element per batch, where `.batch` over
    the permuted rows moved each row through the pipeline on its own (on the
    census fit, a few ms of the two cores per step)."""
    rows = tf.range(num_rows, dtype=tf.int64)
    if shuffle:
        rows = tf.random.experimental.stateless_shuffle(
            rows, seed=tf.stack([tf.constant(seed, tf.int64), epoch])
        )
    full = num_rows // batch_size
    batches = tf.data.Dataset.from_tensor_slices(
        tf.reshape(rows[: full * batch_size], [full, batch_size])
    )
    if not drop_remainder and num_rows % batch_size:
        last = tf.data.Dataset.from_tensors(rows[full * batch_size :])
        # (None,) for both: the last batch is smaller.
        batches = batches.map(_plain(lambda b: tf.reshape(b, [-1]))).concatenate(last)
    return batches


# The pipelines' functions hold no Python control flow: converting them with
# AutoGraph took 0.7 s of a census fit (under load).
_plain = tf.autograph.experimental.do_not_convert


def _gathered(
    indices: tf.data.Dataset, tensors, autotune: bool = True
) -> tf.data.Dataset:
    gather = _plain(lambda i: tf.nest.map_structure(lambda t: tf.gather(t, i), tensors))
    if autotune:
        ds = indices.map(gather, num_parallel_calls=tf.data.AUTOTUNE)
        return ds.prefetch(tf.data.AUTOTUNE)
    # A batch is one gather per tensor: it needs no parallel calls, and without
    # tf.data's autotuning no thread of it competes with the step. On bench_din's
    # fits (2 shared cores) the autotuned pipeline ran its epochs slower and held
    # the fit's return for 1-1.4 s (up to 4 s) after the last epoch.
    options = tf.data.Options()
    options.autotune.enabled = False
    return indices.map(gather).prefetch(2).with_options(options)


def epoch_batches(
    tensors,
    num_rows: int,
    batch_size: int,
    shuffle: bool = True,
    seed: int | None = None,
    start_epoch: int = 0,
    drop_remainder: bool = True,
) -> tf.data.Dataset:
    """Endless batches of in-memory `tensors` whose order depends only on the epoch.

    Epoch `e` visits the rows in the order `stateless_shuffle(range(num_rows),
    seed=(seed, e))` (or in order without `shuffle`), so a run that resumes at epoch
    `start_epoch` (after `BackupAndRestore`) sees the batches an uninterrupted run
    saw from there. Each epoch is `num_rows // batch_size` batches
    (`drop_remainder`) or `ceil(num_rows / batch_size)`.

    Args:
        tensors: nested structure of tensors with `num_rows` rows each.
        num_rows: int. Rows of each tensor.
        batch_size: int. Rows per batch.
        shuffle: bool. Defaults to True.
        seed: int. Defaults to 0 when None.
        start_epoch: int. The first epoch to produce. Defaults to 0.
        drop_remainder: bool. Defaults to True.

    Returns:
        A `tf.data.Dataset` of batches of `tensors`.
    """
    seed = 0 if seed is None else int(seed)
    order = tf.data.Dataset.range(start_epoch, 2**62).flat_map(
        _plain(
            lambda e: _epoch_order(
                e, num_rows, batch_size, shuffle, seed, drop_remainder
            )
        )
    )
    return _gathered(order, tensors)


@dataclasses.dataclass(frozen=True)
class EpochFeed:
    """The arguments of `fit` for in-memory rows, from `feed_epochs`."""

    #: The training input: a dataset, or a distributed one.
    dataset: object
    #: `fit`'s `steps_per_epoch` (None: the dataset holds one epoch).
    steps_per_epoch: int | None
    #: For `compile`.
    steps_per_execution: int
    #: Callbacks the feed needs (to add to the user's).
    callbacks: list


class _EpochFeed(keras.callbacks.Callback):
    """Sets the epoch whose batches the next iterator of the dataset gives.

    Keras 3 creates an epoch's iterator after `on_epoch_begin`."""

    def __init__(self, epoch: tf.Variable):
        super().__init__()
        self._epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch.assign(epoch)


def feed_epochs(
    tensors,
    num_rows: int,
    batch_size: int,
    strategy,
    steps_per_execution: int,
    shuffle: bool = True,
    seed: int | None = None,
    start_epoch: int = 0,
    replicated_input: Callable | None = None,
) -> EpochFeed:
    """In-memory rows as `fit`'s input: the batches of `epoch_batches` (full ones
    only), with `steps_per_execution` kept whatever the number of steps.

    Keras 3 runs an execution to its end on an endless dataset, so on one of
    those an epoch can only take a divisor of its steps per execution (census:
    109 steps, a prime, took 1 step per call, and each call cost the Python of
    `fit` on top of the step). Under Keras 3 on one replica the dataset is
    therefore one epoch long: an execution stops where the epoch's batches end,
    and the epoch it gives is set by a callback at each `on_epoch_begin` (the
    same batches as `epoch_batches`, so a resumed run keeps its order). tf_keras
    cuts the last execution of an epoch short itself: there, and under several
    replicas, the dataset is `epoch_batches`, distributed by `distribute_dataset`.

    Args:
        tensors: nested structure of tensors with `num_rows` rows each.
        num_rows: int. Rows of each tensor.
        batch_size: int. The global batch.
        strategy: the model's `tf.distribute.Strategy`.
        steps_per_execution: int. The requested training steps per call.
        shuffle: bool. Defaults to True.
        seed: int. Defaults to 0 when None.
        start_epoch: int. The first epoch (a resumed run's). Defaults to 0.
        replicated_input: optional function applied to each pipeline's dataset
            under several replicas (e.g. `numbers_only`).

    Returns:
        An `EpochFeed`.
    """
    steps = num_rows // batch_size
    seed = 0 if seed is None else int(seed)
    if KERAS_3 and strategy.num_replicas_in_sync == 1:
        # Outside any strategy scope: a host-side counter, not a model variable.
        with tf.init_scope():
            epoch = tf.Variable(start_epoch, dtype=tf.int64, trainable=False)
        order = tf.data.Dataset.from_tensors(0).flat_map(
            _plain(
                lambda _: _epoch_order(
                    epoch.read_value(), num_rows, batch_size, shuffle, seed, True
                )
            )
        )
        # Known length: Keras counts the epoch's steps from it.
        order = order.apply(tf.data.experimental.assert_cardinality(steps))
        return EpochFeed(
            _gathered(order, tensors, autotune=False),
            None,
            max(1, min(int(steps_per_execution), steps)),
            [_EpochFeed(epoch)],
        )

    def dataset_fn(size, context):
        ds = epoch_batches(
            tensors, num_rows, size, shuffle, seed, start_epoch=start_epoch
        )
        if strategy.num_replicas_in_sync > 1 and replicated_input is not None:
            ds = replicated_input(ds)
        return ds

    return EpochFeed(
        distribute_dataset(strategy, dataset_fn, batch_size),
        steps,
        # (The argument hides the module's function of that name.)
        _safe_steps(strategy, steps_per_execution, steps if KERAS_3 else None),
        [],
    )


def build_training_state(model, y) -> None:
    """Creates a compiled model's optimizer slots and its loss and metric trackers
    before `fit` traces the first step.

    Without a strategy Keras creates them while tracing that step, and a
    `tf.function` that creates variables is traced twice (once to lift their
    initializers out): on the census MMoE the second trace was a quarter of the
    first epoch. The trackers are built by one eager evaluation on the labels
    `y` of a batch standing in for the predictions (`fit` resets them). A model
    under a `tf.distribute` strategy is left to Keras (Keras 3 builds it
    symbolically first; its metrics' variables take no eager update outside a
    replica).

    Args:
        model: a compiled Keras model.
        y: the labels of one batch, in the structure of the model's outputs.
    """
    strategy = model.distribute_strategy
    with strategy.scope():
        if tf.distribute.has_strategy():
            return
        optimizer = model.optimizer
        if optimizer is not None and not getattr(optimizer, "built", True):
            optimizer.build(model.trainable_variables)
        model.compute_loss(y=y, y_pred=y)
        model.compute_metrics(None, y, y, sample_weight=None)


_EPOCHS_FILE = "keras_attn_epochs.json"


def completed_epochs(backup_dir) -> int:
    """Epochs a run with `backup_dir` finished before it stopped (0 if none)."""
    if backup_dir is None:
        return 0
    path = os.path.join(backup_dir, _EPOCHS_FILE)
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return int(json.load(f)["epochs"])


class _EpochRecord(keras.callbacks.Callback):
    """Writes the number of finished epochs next to `BackupAndRestore`'s files
    (after its backup of that epoch), so a restart knows which data order to
    resume with; removes it when training ends, as `BackupAndRestore` does its own.

    Under a multi-worker strategy every worker gets the same `backup_dir`, so only
    the chief writes and removes the record (as `BackupAndRestore` writes its
    checkpoint there from the chief only); every worker reads it on restart.
    """

    def __init__(self, backup_dir):
        super().__init__()
        self.backup_dir = str(backup_dir)

    def _is_chief(self) -> bool:
        strategy = getattr(self.model, "distribute_strategy", None)
        if strategy is None:
            strategy = tf.distribute.get_strategy()
        return bool(getattr(strategy.extended, "should_checkpoint", True))

    def on_epoch_end(self, epoch, logs=None):
        if not self._is_chief():
            return
        os.makedirs(self.backup_dir, exist_ok=True)
        path = os.path.join(self.backup_dir, _EPOCHS_FILE)
        # A name of this process's own: two writers never share a temporary file.
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"epochs": epoch + 1}, f)
        os.replace(tmp, path)  # atomic: a kill leaves the old or new one

    def on_train_end(self, logs=None):
        if not self._is_chief():
            return
        path = os.path.join(self.backup_dir, _EPOCHS_FILE)
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def fit_callbacks(callbacks=None, backup_dir=None, checkpoint_dir=None) -> list:
    """`callbacks` plus fault tolerance: `BackupAndRestore` and per-epoch weights.

    Args:
        callbacks: list of Keras callbacks, or None.
        backup_dir: str. Where `keras.callbacks.BackupAndRestore` keeps the training
            state: a run killed mid-epoch and started again with the same
            arguments resumes where the last backup was taken. None: no backup.
        checkpoint_dir: str. Where `ModelCheckpoint` writes the weights after each
            epoch (`epoch_{epoch:03d}.weights.h5`). None: no checkpoints.

    Returns:
        A list of callbacks.
    """
    callbacks = check_callbacks(callbacks)
    if checkpoint_dir is not None:
        check_folder("checkpoint_dir", checkpoint_dir)
        os.makedirs(checkpoint_dir, exist_ok=True)
        callbacks.append(
            keras.callbacks.ModelCheckpoint(
                os.path.join(checkpoint_dir, "epoch_{epoch:03d}.weights.h5"),
                save_weights_only=True,
            )
        )
    if backup_dir is not None:
        check_folder("backup_dir", backup_dir)
        # The record goes after the backup, so it never names an epoch whose
        # backup is not written.
        callbacks.append(keras.callbacks.BackupAndRestore(str(backup_dir)))
        callbacks.append(_EpochRecord(backup_dir))
    return callbacks


class _LogsHistory(keras.callbacks.History):
    """A `History` that also reads like its logs dict (`history["loss"]`), with a
    `DeprecationWarning`: for a result whose `.history` was that dict."""

    def _logs(self):
        warn_deprecated(
            f"Reading `{self._owner}` as a dict",
            f"`{self._owner}.history` (`{self._owner}` is the Keras History)",
            stacklevel=4,
        )
        return self.history

    def __getitem__(self, key):
        return self._logs()[key]

    def __iter__(self):
        return iter(self._logs())

    def __len__(self):
        return len(self._logs())

    def __contains__(self, key):
        return key in self._logs()

    def keys(self):
        return self._logs().keys()

    def items(self):
        return self._logs().items()

    def values(self):
        return self._logs().values()

    def get(self, key, default=None):
        return self._logs().get(key, default)


def readable_as_logs(history, owner: str):
    """`history` (a Keras `History`), sharing its state, that can also be read as
    its logs dict for one release, warning that `owner` (e.g.
    `"AoAReaderResult.history"`) is now the `History` itself."""
    result = _LogsHistory.__new__(_LogsHistory)
    result.__dict__ = history.__dict__
    object.__setattr__(result, "_owner", owner)
    return result


def check_callbacks(callbacks) -> list:
    """`callbacks` as a new list: None gives []; anything but a list or tuple of
    `keras.callbacks.Callback`s raises (before any training)."""
    if callbacks is None:
        return []
    if not isinstance(callbacks, (list, tuple)) or not all(
        isinstance(c, keras.callbacks.Callback) for c in callbacks
    ):
        raise ValueError(
            "`callbacks` must be a list of `keras.callbacks.Callback`s. Received: "
            f"callbacks={callbacks!r}"
        )
    return list(callbacks)


def _seed_generators(model) -> list:
    """The Keras 3 `SeedGenerator`s of `model`'s layers (a `Dropout`'s), in layer
    order; none under tf_keras, whose dropout draws from TensorFlow's seed."""
    if not KERAS_3:
        return []
    return [
        generator
        for layer in model._flatten_layers(include_self=True, recursive=True)
        for generator in getattr(layer, "_seed_generators", ())
    ]


class _EpochSeeds(keras.callbacks.Callback):
    """Restarts the model's random-number generators at each epoch from
    `(seed, epoch)`: an epoch's dropout masks depend on those two only, as its
    data order does (`epoch_batches`), so a run resumed at epoch `e` draws what an
    uninterrupted one drew (the generators' states are not in a backup)."""

    def __init__(self, seed: int):
        super().__init__()
        self.seed = seed

    def on_epoch_begin(self, epoch, logs=None):
        generators = _seed_generators(self.model)
        if not generators:
            return
        # One stream per generator.
        streams = tf.random.stateless_uniform(
            [len(generators)],
            seed=[self.seed, epoch],
            maxval=2**31 - 1,
            dtype=tf.int64,
        ).numpy()
        for generator, stream in zip(generators, streams):
            state = generator.state
            state.assign(tf.constant([stream, 0], dtype=state.dtype))


def seed_run(seed: int) -> keras.callbacks.Callback:
    """Seeds a fit: two fits with one `seed` from the same weights end with the
    same weights.

    Sets Python's, NumPy's and TensorFlow's seeds
    (`keras.utils.set_random_seed`; tf_keras' dropout draws from TensorFlow's)
    and returns the callback for `fit` that restarts the model's own generators
    (under Keras 3, a `Dropout`'s `SeedGenerator`, which every training call
    advances) at each epoch from `(seed, epoch)`.

    Args:
        seed: int.

    Returns:
        A `keras.callbacks.Callback`.
    """
    check_int("seed", seed, minimum=0)
    keras.utils.set_random_seed(seed)
    return _EpochSeeds(seed)


@dataclasses.dataclass(frozen=True)
class FitOptions:
    """The common keywords of a fit helper, checked and resolved (`fit_options`)."""

    #: The strategy the model was built under (the default one when none).
    strategy: object
    #: The model's policy, a `keras_attn.precision.POLICIES` name.
    mixed_precision: str
    #: What to compile with (`resolve_jit_compile`).
    jit_compile: bool | None
    #: Epochs a run with the same `backup_dir` finished before it stopped.
    start_epoch: int
    #: The user's callbacks, then `BackupAndRestore` and the checkpoints.
    callbacks: list

    def compile_options(self) -> dict:
        """`compile`'s `jit_compile`, left out when None (Keras' own default)."""
        if self.jit_compile is None:
            return {}
        return {"jit_compile": self.jit_compile}


def fit_options(
    model,
    where: str,
    strategy=None,
    tpu: str | None = None,
    backup_dir=None,
    checkpoint_dir=None,
    mixed_precision: str | None = None,
    jit_compile: bool | str | None = False,
    jit_default: bool | None = False,
    callbacks=None,
    seed: int | None = None,
) -> FitOptions:
    """Checks and resolves the keywords every `fit_*` helper takes, for a built
    `model`, before anything is trained.

    - `strategy` (a `tf.distribute.Strategy` or a `get_strategy` kind, with `tpu`
      for "tpu") must be the one the model was built under
      (`keras_attn.distribute.model_strategy`); None takes that one.
    - `mixed_precision` must be the policy the model was built under
      (`keras_attn.precision.check_model_policy`); None reads it.
    - `jit_compile`: True, False, or "auto" / None, resolved by
      `keras_attn.precision.resolve_jit_compile` with `jit_default`.
    - `backup_dir` / `checkpoint_dir`: folders (`fit_callbacks`); the run resumes
      at `completed_epochs(backup_dir)`.
    - `callbacks`: a list of Keras callbacks (`check_callbacks`).
    - `seed`: None, or an int seeding the run (`seed_run`; its callback comes
      first).

    Args:
        model: the built model the helper trains.
        where: the helper's name, for the errors.

    Returns:
        A `FitOptions`.
    """
    policy = check_model_policy(model, mixed_precision, where)
    jit_compile = resolve_jit_compile(jit_compile, policy, default=jit_default)
    strategy = distribute.model_strategy(model, distribute.as_strategy(strategy, tpu))
    callbacks = fit_callbacks(callbacks, backup_dir, checkpoint_dir)
    if seed is not None:
        callbacks.insert(0, seed_run(seed))
    return FitOptions(
        strategy=strategy,
        mixed_precision=policy,
        jit_compile=jit_compile,
        start_epoch=completed_epochs(backup_dir),
        callbacks=callbacks,
    )


class _WeightsCheckpoint(keras.callbacks.Callback):
    def __init__(self, model, directory):
        super().__init__()
        self.target = model
        self.directory = str(directory)

    def on_epoch_end(self, epoch, logs=None):
        strategy = getattr(self.target, "distribute_strategy", None)
        if strategy is not None and not strategy.extended.should_checkpoint:
            return  # a multi-worker job: the chief writes, as ModelCheckpoint does
        path = os.path.join(self.directory, f"epoch_{epoch + 1:03d}.weights.h5")
        self.target.save_weights(path)


def weights_checkpoint(model, checkpoint_dir):
    """A callback writing `model`'s weights to `checkpoint_dir/epoch_NNN.weights.h5`
    after each epoch, whichever model the epoch loop trains (e.g. one part of
    `model`, sharing its weights).

    Args:
        model: the `keras.Model` whose weights are saved.
        checkpoint_dir: str. Created if absent.

    Returns:
        A `keras.callbacks.Callback`.
    """
    check_folder("checkpoint_dir", checkpoint_dir)
    os.makedirs(checkpoint_dir, exist_ok=True)
    return _WeightsCheckpoint(model, checkpoint_dir)


class WarmUp(keras.callbacks.Callback):
    """Raises the learning rate linearly from ~0 to its value over `steps` batches."""

    def __init__(self, learning_rate, steps):
        super().__init__()
        self.learning_rate = float(learning_rate)
        self.steps = max(int(steps), 1)
        self._step = 0

    def on_train_batch_begin(self, batch, logs=None):
        if self._step < self.steps:
            self._step += 1
            rate = self.learning_rate * self._step / self.steps
            self.model.optimizer.learning_rate.assign(rate)


class EpochTimer(keras.callbacks.Callback):
    """Records each epoch's wall time in seconds (`times`), the first one
    (tracing and compilation included) and the steady ones alike."""

    def __init__(self):
        super().__init__()
        self.times = []

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.times.append(time.perf_counter() - self._start)
