"""Choosing a `tf.distribute` strategy, and training a model under one.

`get_strategy(kind)` builds TensorFlow's strategy for where the program runs:
`"tpu"` (`TPUStrategy` through a `TPUClusterResolver`), `"multi_worker"`
(`MultiWorkerMirroredStrategy` from `TF_CONFIG`), `"parameter_server"`
(`ParameterServerStrategy` from `TF_CONFIG`, its variables split across the
parameter servers so embedding tables larger than one host fit), `"mirrored"` (the
local devices), `"default"` (no distribution), or `"auto"`, which reads the
environment (`choose_kind`).

The fit helpers (`fit_ctr_model`, `fit_text_classifier`, `fit_bert_pretrainer`) take
`strategy=` (a strategy or one of these kinds) and run on the host, in `tf.data`,
every raw-value step (string lookups, tokenization), so the replicated model sees
numbers only: Keras 3 averages a first batch across replicas to build a model under
a strategy, and that fails on string tensors (`AddN` has no string kernel).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping

from keras_attn.backend import KERAS_3, keras, tf

__all__ = [
    "KINDS",
    "as_strategy",
    "choose_kind",
    "completed_epochs",
    "distribute_dataset",
    "epoch_batches",
    "fit_callbacks",
    "get_strategy",
    "model_strategy",
    "check_static_input",
    "numbers_only",
    "read_tf_config",
    "steps_per_execution",
    "weights_checkpoint",
]

#: The strategies `get_strategy` builds.
KINDS = ("auto", "tpu", "multi_worker", "parameter_server", "mirrored", "default")

# Set on Cloud TPU VMs and in TPU pods / notebooks; any of them means "a TPU is here".
_TPU_ENV = ("TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_ACCELERATOR_TYPE")
_WORKER_TYPES = ("chief", "worker")


def read_tf_config(environ: Mapping[str, str] | None = None) -> dict | None:
    """The parsed `TF_CONFIG` (`{"cluster": {...}, "task": {...}}`), or None.

    Checks that the cluster lists tasks and that this process's task is one of them.

    Args:
        environ: mapping to read instead of `os.environ` (for tests).

    Returns:
        The dict, or None when `TF_CONFIG` is unset or empty.

    Example:

    >>> config = '{"cluster": {"worker": ["127.0.0.1:2222"]}, '
    >>> config += '"task": {"type": "worker", "index": 0}}'
    >>> read_tf_config({"TF_CONFIG": config})["task"]
    {'type': 'worker', 'index': 0}
    """
    environ = os.environ if environ is None else environ
    raw = environ.get("TF_CONFIG", "")
    if not raw.strip():
        return None
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"`TF_CONFIG` must be JSON ({error}). Received: TF_CONFIG={raw!r}"
        ) from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    if not isinstance(cluster, dict) or not cluster:
        raise ValueError(
            "`TF_CONFIG` must hold a non-empty `cluster` dict of task lists. "
            f"Received: TF_CONFIG={raw!r}"
        )
    for task_type, addresses in cluster.items():
        if not isinstance(addresses, list) or not addresses:
            raise ValueError(
                f"`TF_CONFIG` cluster entry {task_type!r} must be a non-empty list "
                f"of 'host:port' addresses. Received: {addresses!r}"
            )
    task = config.get("task")
    if task is not None:
        task_type, index = task.get("type"), task.get("index", 0)
        if task_type not in cluster or not (
            isinstance(index, int) and 0 <= index < len(cluster[task_type])
        ):
            raise ValueError(
                "`TF_CONFIG` task must name a task of the cluster "
                f"({ {k: len(v) for k, v in cluster.items()} }). "
                f"Received: task={task!r}"
            )
    return config


def _local_gpus() -> int:
    return len(tf.config.list_logical_devices("GPU"))


def choose_kind(
    kind: str = "auto",
    tpu: str | None = None,
    environ: Mapping[str, str] | None = None,
    num_gpus: int | None = None,
) -> str:
    """The strategy kind `get_strategy` would build, from `kind` and the environment.

    "auto" picks, in this order: "tpu" when `tpu` is given or a TPU environment
    variable is set (`TPU_NAME`, `KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS`,
    `TPU_ACCELERATOR_TYPE`); "parameter_server" when `TF_CONFIG` lists `ps` tasks;
    "multi_worker" when it lists more than one chief/worker task; "mirrored" with
    more than one local GPU; else "default". An explicit kind is checked against the
    environment (`TF_CONFIG` with `ps` tasks is not a multi-worker cluster, and so
    on).

    Args:
        kind: str. One of `KINDS`. Defaults to "auto".
        tpu: str. A TPU name or address (`TPUClusterResolver(tpu=...)`), or None.
        environ: mapping to read instead of `os.environ` (for tests).
        num_gpus: int. Local GPUs; None counts them.

    Returns:
        One of "tpu", "multi_worker", "parameter_server", "mirrored", "default".

    Example:

    >>> choose_kind("auto", environ={}, num_gpus=0)
    'default'
    >>> choose_kind("auto", environ={"TPU_NAME": "my-tpu"})
    'tpu'
    """
    if kind not in KINDS:
        raise ValueError(
            f"`kind` must be one of {list(KINDS)}. Received: kind={kind!r}"
        )
    if tpu is not None and (not isinstance(tpu, str) or not tpu):
        raise ValueError(
            f"`tpu` must be a TPU name or address (a non-empty str) or None. "
            f"Received: tpu={tpu!r}"
        )
    if tpu is not None and kind not in ("auto", "tpu"):
        raise ValueError(
            f"`tpu` is only used with kind 'tpu' or 'auto'. Received: kind={kind!r}, "
            f"tpu={tpu!r}"
        )
    environ = os.environ if environ is None else environ
    config = read_tf_config(environ)
    cluster = config["cluster"] if config else {}
    num_ps = len(cluster.get("ps", []))
    num_workers = sum(len(cluster.get(t, [])) for t in _WORKER_TYPES)
    on_tpu = tpu is not None or any(environ.get(v) for v in _TPU_ENV)
    if kind == "auto":
        if on_tpu:
            return "tpu"
        if num_ps:
            return "parameter_server"
        if num_workers > 1:
            return "multi_worker"
        if (_local_gpus() if num_gpus is None else num_gpus) > 1:
            return "mirrored"
        return "default"
    if kind == "tpu" and not on_tpu:
        raise ValueError(
            "kind 'tpu' needs `tpu=` (a TPU name or address, 'local' on a TPU VM) or "
            f"one of the environment variables {list(_TPU_ENV)}. Received: tpu=None "
            "and none of them set"
        )
    if kind == "multi_worker":
        if config is None:
            raise ValueError(
                "kind 'multi_worker' reads the cluster from `TF_CONFIG`, which is "
                "unset (use kind 'mirrored' for the devices of one machine). "
                "Received: TF_CONFIG=None"
            )
        if num_ps:
            raise ValueError(
                "kind 'multi_worker' is for a cluster of workers only; this "
                f"`TF_CONFIG` lists {num_ps} 'ps' task(s): use kind "
                f"'parameter_server'. Received: cluster={cluster!r}"
            )
        if not num_workers:
            raise ValueError(
                "kind 'multi_worker' needs 'worker' (or 'chief') tasks in `TF_CONFIG`. "
                f"Received: cluster={cluster!r}"
            )
    if kind == "parameter_server":
        if not num_ps or not cluster.get("worker"):
            raise ValueError(
                "kind 'parameter_server' needs a `TF_CONFIG` cluster with 'ps' and "
                "'worker' tasks (and a 'chief', the coordinator). Received: "
                f"cluster={cluster or None!r}"
            )
        task_type = (config.get("task") or {}).get("type")
        if task_type not in ("chief", None):
            raise ValueError(
                "ParameterServerStrategy runs on the coordinator (the 'chief' task); "
                f"a {task_type!r} task serves with `tf.distribute.Server(...).join()`. "
                f"Received: task={config.get('task')!r}"
            )
    if kind in ("mirrored", "default") and num_workers > 1:
        raise ValueError(
            f"kind {kind!r} trains on one machine, but `TF_CONFIG` describes a "
            f"cluster: use 'multi_worker' or 'parameter_server'. Received: "
            f"cluster={cluster!r}"
        )
    return kind


def get_strategy(
    kind: str = "auto",
    tpu: str | None = None,
    devices: list[str] | None = None,
    min_shard_bytes: int = 256 << 10,
    variable_partitioner=None,
) -> tf.distribute.Strategy:
    """Builds the `tf.distribute` strategy of `kind` (see `choose_kind` for "auto").

    - "tpu": `TPUClusterResolver(tpu)` (None reads the environment), connects to the
      cluster, initializes the TPU system, returns `TPUStrategy`.
    - "multi_worker": `MultiWorkerMirroredStrategy`, the cluster read from
      `TF_CONFIG` (every worker runs the same program with its own task).
    - "parameter_server": `ParameterServerStrategy` (on the coordinator) from a
      `TFConfigClusterResolver`; each variable is split into at most as many shards
      as there are parameter servers, none smaller than `min_shard_bytes`
      (`MinSizePartitioner`), so a large embedding table spreads over the servers
      and small weights stay whole. Train with `keras.Model.fit` (Keras 2) or a
      `tf.distribute.coordinator.ClusterCoordinator`.
    - "mirrored": `MirroredStrategy(devices)` over the local devices.
    - "default": `tf.distribute.get_strategy()`, no distribution.

    Args:
        kind: str. One of `KINDS`. Defaults to "auto".
        tpu: str. TPU name or address for "tpu" ("local" on a TPU VM).
        devices: list of str. Devices of "mirrored" (e.g. `["/cpu:0", "/cpu:1"]`);
            None uses all local GPUs (or the CPU).
        min_shard_bytes: int. Smallest shard of a partitioned variable
            ("parameter_server"). Defaults to 256 KiB.
        variable_partitioner: a `tf.distribute.experimental.partitioners`
            partitioner replacing the default one ("parameter_server").

    Returns:
        A `tf.distribute.Strategy`.

    Example:

    >>> get_strategy("default").num_replicas_in_sync
    1
    """
    if (
        isinstance(min_shard_bytes, bool)
        or not isinstance(min_shard_bytes, int)
        or min_shard_bytes < 1
    ):
        raise ValueError(
            "`min_shard_bytes` must be a positive integer. Received: "
            f"min_shard_bytes={min_shard_bytes!r}"
        )
    if devices is not None and kind not in ("mirrored", "auto"):
        raise ValueError(
            f"`devices` is only used with kind 'mirrored'. Received: kind={kind!r}, "
            f"devices={devices!r}"
        )
    kind = choose_kind(kind, tpu)
    if kind == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    if kind == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if kind == "parameter_server":
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        num_ps = len(resolver.cluster_spec().as_dict().get("ps", []))
        if variable_partitioner is None:
            variable_partitioner = (
                tf.distribute.experimental.partitioners.MinSizePartitioner(
                    min_shard_bytes=min_shard_bytes, max_shards=num_ps
                )
            )
        return tf.distribute.experimental.ParameterServerStrategy(
            resolver, variable_partitioner=variable_partitioner
        )
    if kind == "mirrored" or devices is not None:
        return tf.distribute.MirroredStrategy(devices)
    return tf.distribute.get_strategy()


def as_strategy(strategy, tpu: str | None = None) -> tf.distribute.Strategy | None:
    """A strategy from a fit helper's `strategy=` argument.

    Args:
        strategy: a `tf.distribute.Strategy`, a kind for `get_strategy`, or None.
        tpu: the TPU name for the "tpu" kind.

    Returns:
        The strategy, or None for None.
    """
    if strategy is None or isinstance(strategy, tf.distribute.Strategy):
        if tpu is not None and strategy is not None:
            raise ValueError(
                "`tpu` is only used when `strategy` is a kind string. Received: "
                f"strategy={strategy!r}, tpu={tpu!r}"
            )
        return strategy
    if isinstance(strategy, str):
        return get_strategy(strategy, tpu=tpu)
    raise ValueError(
        f"`strategy` must be a tf.distribute.Strategy or one of {list(KINDS)}. "
        f"Received: strategy={strategy!r}"
    )


def model_strategy(model, strategy=None) -> tf.distribute.Strategy:
    """The strategy to train `model` under: the one its variables were made in.

    A model built inside `strategy.scope()` trains under that strategy without
    `strategy=`; a given strategy must be the one the model was built under (its
    variables are replicated, or not, when they are created).

    Args:
        model: a built Keras model.
        strategy: None, a strategy or a kind (see `as_strategy`).

    Returns:
        A `tf.distribute.Strategy` (the default one when there is none).
    """
    built = model.distribute_strategy
    strategy = as_strategy(strategy)
    if strategy is None or strategy is built:
        return built
    raise ValueError(
        "`strategy` must be the strategy the model was built under (its variables "
        "are made when it is built): build it inside `with strategy.scope():`, or "
        "let the fit helper build it. Received: strategy="
        f"{type(strategy).__name__} for a model built under "
        f"{type(built).__name__}"
    )


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

    def order(epoch):
        rows = tf.range(num_rows, dtype=tf.int64)
        if shuffle:
            rows = tf.random.experimental.stateless_shuffle(
                rows, seed=tf.stack([tf.constant(seed, tf.int64), epoch])
            )
        return tf.data.Dataset.from_tensor_slices(rows).batch(
            batch_size, drop_remainder=drop_remainder
        )

    ds = tf.data.Dataset.range(start_epoch, 2**62).flat_map(order)
    ds = ds.map(
        lambda i: tf.nest.map_structure(lambda t: tf.gather(t, i), tensors),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return ds.prefetch(tf.data.AUTOTUNE)


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
    callbacks = list(callbacks or [])
    if checkpoint_dir is not None:
        _check_dir("checkpoint_dir", checkpoint_dir)
        os.makedirs(checkpoint_dir, exist_ok=True)
        callbacks.append(
            keras.callbacks.ModelCheckpoint(
                os.path.join(checkpoint_dir, "epoch_{epoch:03d}.weights.h5"),
                save_weights_only=True,
            )
        )
    if backup_dir is not None:
        _check_dir("backup_dir", backup_dir)
        # The record goes after the backup, so it never names an epoch whose
        # backup is not written.
        callbacks.append(keras.callbacks.BackupAndRestore(str(backup_dir)))
        callbacks.append(_EpochRecord(backup_dir))
    return callbacks


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
    _check_dir("checkpoint_dir", checkpoint_dir)
    os.makedirs(checkpoint_dir, exist_ok=True)
    return _WeightsCheckpoint(model, checkpoint_dir)


def _check_dir(name, value):
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise ValueError(
            f"`{name}` must be a directory path (str). Received: {name}={value!r}"
        )
