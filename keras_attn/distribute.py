"""Choosing a `tf.distribute` strategy.

`get_strategy(kind)` builds TensorFlow's strategy for where the program runs:
`"tpu"` (`TPUStrategy` through a `TPUClusterResolver`), `"multi_worker"`
(`MultiWorkerMirroredStrategy` from `TF_CONFIG`), `"parameter_server"`
(`ParameterServerStrategy` from `TF_CONFIG`, its variables split across the
parameter servers so embedding tables larger than one host fit), `"mirrored"` (the
local devices), `"default"` (no distribution), or `"auto"`, which reads the
environment (`choose_kind`).

The fit helpers take `strategy=` (a strategy or one of these kinds; `as_strategy`,
`model_strategy`); training under one (the input pipelines, resumable epochs,
checkpoints) is `keras_attn.training`'s.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from keras_attn._deprecation import moved
from keras_attn._validation import check_positive_int
from keras_attn.backend import tf

__all__ = [
    "KINDS",
    "as_strategy",
    "choose_kind",
    "get_strategy",
    "model_strategy",
    "read_tf_config",
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
    check_positive_int("min_shard_bytes", min_shard_bytes)
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


__getattr__ = moved(
    __name__,
    {
        "check_static_input": "keras_attn.training:check_static_input",
        "completed_epochs": "keras_attn.training:completed_epochs",
        "distribute_dataset": "keras_attn.training:distribute_dataset",
        "epoch_batches": "keras_attn.training:epoch_batches",
        "fit_callbacks": "keras_attn.training:fit_callbacks",
        "numbers_only": "keras_attn.training:numbers_only",
        "steps_per_execution": "keras_attn.training:steps_per_execution",
        "weights_checkpoint": "keras_attn.training:weights_checkpoint",
    },
)
