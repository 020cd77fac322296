"""One task of a local tf.distribute cluster started by `tests/cluster.py`.

Run as `python tests/distributed_worker.py COMMAND ...` with `TF_CONFIG` set:

- `server`: a parameter server or parameter-server worker (a `tf.distribute.Server`
  that serves until it is stopped).
- `mwms --out DIR [--models ctr,bert] [--epochs N] [--backup DIR]
  [--pause-at EPOCH:BATCH]`: one worker of a MultiWorkerMirroredStrategy job;
  trains the census CTR model and/or a tiny BERT pretrainer with Keras `fit`
  (deterministic: seeds, op determinism, no shuffle) and writes
  `DIR/<model>_worker<i>.npz` (final weights) and `.json` (losses per epoch).
  `--backup` adds `BackupAndRestore` (epoch-level); `--pause-at` makes worker 1
  write `DIR/paused` at that batch and sleep, for the test to kill it.
- `ps_coordinator --out DIR --steps N`: the coordinator of a parameter-server
  job (TF_CONFIG task "chief"); trains the CTR model with its embedding table
  sharded over the servers (`keras_attn.cluster`), exports it, and then runs the
  fault phases the test drives through marker files (see `_ps_coordinator`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from keras_attn.backend import KERAS_3, keras, tf

#: Rows of the shipped census sample the CTR jobs train on (4 steps of 64).
CTR_ROWS = 256
CTR_BATCH = 64


def _resolver():
    return tf.distribute.cluster_resolver.TFConfigClusterResolver()


def _deterministic():
    if KERAS_3:
        keras.config.disable_traceback_filtering()  # whole tracebacks in the logs
    keras.utils.set_random_seed(0)
    tf.config.experimental.enable_op_determinism()


def _census(rows=CTR_ROWS):
    from keras_attn.datasets import census_features, census_tasks, load_census_sample

    df = load_census_sample().iloc[:rows].reset_index(drop=True)
    return df, census_features(df), census_tasks()


def _write(out: Path, name: str, weights, info: dict) -> None:
    # Write beside and rename: the test never reads a half-written file.
    tmp = out / f".{name}.npz"
    np.savez(tmp, *weights)
    os.replace(tmp, out / f"{name}.npz")
    (out / f".{name}.json").write_text(json.dumps(info))
    os.replace(out / f".{name}.json", out / f"{name}.json")


class _PauseAt(keras.callbacks.Callback):
    """At (epoch, batch), writes `marker` and sleeps: the test kills the process."""

    def __init__(self, epoch, batch, marker):
        super().__init__()
        self.epoch, self.batch, self.marker = epoch, batch, Path(marker)
        self._current = -1

    def on_epoch_begin(self, epoch, logs=None):
        self._current = epoch

    def on_train_batch_end(self, batch, logs=None):
        if (self._current, batch) == (self.epoch, self.batch):
            self.marker.write_text(f"{self.epoch}:{self.batch}")
            time.sleep(
                300
            )  # the test's SIGKILL ends this; the test's timeout bounds it


class _EpochTimer(keras.callbacks.Callback):
    """Wall-clock seconds of each epoch, and of the step calls within it (for
    benchmarks/bench_distribute.py).

    With one step per execution, the time from a batch's begin to its end is the
    call of the compiled train function (the next batch from the prefetched
    dataset, the step, its all-reduce); the rest of the epoch is outside it: the
    Python loop of `fit`, callbacks, logs.
    """

    def __init__(self):
        super().__init__()
        self.seconds = []
        self.step_seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self._in_steps = 0.0
        self._start = time.perf_counter()

    def on_train_batch_begin(self, batch, logs=None):
        self._batch_start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self._in_steps += time.perf_counter() - self._batch_start

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self._start)
        self.step_seconds.append(self._in_steps)


def _fault_options(args, task_id, model_name, timer=None):
    """`backup_dir` and the pause callback of this worker."""
    options = {"callbacks": [timer] if timer else []}
    if args.backup:
        # One folder for the job, shared by its workers (tf_keras' BackupAndRestore
        # writes the chief's state there, the others' in temporary folders).
        options["backup_dir"] = str(Path(args.backup) / model_name)
    if args.pause_at and task_id == 1:
        epoch, batch = map(int, args.pause_at.split(":"))
        options["callbacks"].append(_PauseAt(epoch, batch, Path(args.out) / "paused"))
    return options


def _train_ctr(strategy, args, task_id):
    from keras_attn.models import build_ctr_model, fit_ctr_model

    df, specs, tasks = _census(rows=args.rows)
    with strategy.scope():
        if args.rows == CTR_ROWS:
            model = build_ctr_model(
                specs, tasks, num_experts=2, expert_units=(8,), tower_units=(8,)
            )
        else:  # the benchmark: the library's default sizes
            model = build_ctr_model(specs, tasks)
    if KERAS_3:
        return _train_ctr_loop(strategy, args, task_id, model, df, specs, tasks)
    timer = _EpochTimer()
    # The raw-string preprocessing runs on the host in tf.data; the replicated
    # core holds the trainable weights (see fit_ctr_model).
    history = fit_ctr_model(
        model,
        df,
        epochs=args.epochs,
        batch_size=args.batch,
        seed=0,
        learning_rate=1e-2,
        jit_compile=False,
        steps_per_execution=1,
        strategy=strategy,
        verbose=0,
        **_fault_options(args, task_id, "ctr", timer),
    )
    history = {
        **history.history,
        "epoch_seconds": timer.seconds,
        "step_seconds": timer.step_seconds,
    }
    return model.get_weights(), history


def _hold_at(ds, batch, marker):
    """`ds` whose element `batch` writes `marker` and sleeps first (the test kills
    the process there: the custom loop has no Keras callbacks)."""

    def hold(i):
        if int(i) == batch:
            Path(marker).write_text(f"batch {batch}")
            time.sleep(300)
        return i

    def map_fn(i, element):
        done = tf.py_function(hold, [i], tf.int64)
        with tf.control_dependencies([done]):
            return tf.nest.map_structure(tf.identity, element)

    return ds.enumerate().map(map_fn)


def _train_ctr_loop(strategy, args, task_id, model, df, specs, tasks):
    """Keras 3: the CTR core with keras_attn.cluster.fit_multi_worker."""
    from keras_attn.cluster import fit_multi_worker
    from keras_attn.features import to_dataset
    from keras_attn.models import split_ctr_model

    with strategy.scope():
        preprocessor, core = split_ctr_model(model)
        optimizer = keras.optimizers.Adam(1e-2)
    # Every row encoded once on the host; the core trains on the encoded rows.
    x, y = to_dataset(
        df, specs, tasks, batch_size=len(df), preprocessor=preprocessor
    ).get_single_element()

    def dataset_fn(epoch, batch_size, context):
        # The order depends on the epoch alone: a resumed job reads what an
        # uninterrupted one read.
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(df), seed=epoch)
        ds = ds.batch(batch_size, drop_remainder=True)
        if args.pause_at and task_id == 1:
            pause_epoch, batch = map(int, args.pause_at.split(":"))
            if epoch == pause_epoch:
                # This worker's batches are every other one (sharded after this).
                ds = _hold_at(ds, 2 * batch + 1, Path(args.out) / "paused")
        return ds

    def loss_fn(y_true, y_pred):
        return tf.add_n(
            [
                keras.losses.binary_crossentropy(y_true[t.name], y_pred[t.name])
                for t in tasks
            ]
        )

    losses = fit_multi_worker(
        core,
        loss_fn,
        dataset_fn,
        strategy,
        epochs=args.epochs,
        steps_per_epoch=len(df) // args.batch,
        global_batch_size=args.batch,
        optimizer=optimizer,
        backup_dir=Path(args.backup) / "ctr" if args.backup else None,
    )
    return model.get_weights(), {"loss": losses}


def _train_bert(strategy, args, task_id):
    from keras_attn.models import build_bert, build_bert_pretrainer
    from keras_attn.models.bert_pretraining import fit_bert_pretrainer

    rng = np.random.default_rng(0)
    n, length, vocab, predictions = 64, 8, 40, 2
    x = {
        "token_ids": rng.integers(1, vocab, (n, length)).astype("int32"),
        "segment_ids": (np.arange(length) >= length // 2)
        .astype("int32")[None]
        .repeat(n, 0),
        "masked_positions": rng.integers(1, length, (n, predictions)).astype("int32"),
    }
    y = {
        "mlm": rng.integers(1, vocab, (n, predictions)).astype("int32"),
        "nsp": rng.integers(0, 2, (n,)).astype("int32"),
    }
    with strategy.scope():
        bert = build_bert(
            vocab,
            sequence_length=length,
            hidden_dim=8,
            num_layers=1,
            num_heads=2,
            intermediate_dim=16,
        )
        model = build_bert_pretrainer(bert)

    def data(batch_size, context):
        # Endless: each epoch is `steps_per_epoch` batches of one stream.
        ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
        return ds.batch(batch_size, drop_remainder=True)

    history = fit_bert_pretrainer(
        model,
        data,
        epochs=args.epochs,
        batch_size=16,
        steps_per_epoch=n // 16,
        learning_rate=1e-2,
        strategy=strategy,
        **_fault_options(args, task_id, "bert"),
    )
    return model.get_weights(), history.history


def _mwms(args):
    _deterministic()
    resolver = _resolver()
    # A bound on every collective: a peer that stops answering fails the step
    # instead of hanging it.
    # `--pack`: packs of 64 MiB, all the gradients in one all-reduce (0 lets
    # TensorFlow choose).
    options = tf.distribute.experimental.CommunicationOptions(
        timeout_seconds=60, bytes_per_pack=(64 << 20) if args.pack else 0
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        cluster_resolver=resolver, communication_options=options
    )
    out = Path(args.out)
    for name in args.models.split(","):
        train = {"ctr": _train_ctr, "bert": _train_bert}[name]
        start = time.perf_counter()
        weights, history = train(strategy, args, resolver.task_id)
        info = {
            "history": {k: [float(v) for v in vs] for k, vs in history.items()},
            "replicas": strategy.num_replicas_in_sync,
            "seconds": time.perf_counter() - start,
        }
        _write(out, f"{name}_worker{resolver.task_id}", weights, info)
    print("done", flush=True)


def _server(args):
    resolver = _resolver()
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=resolver.task_type,
        task_index=resolver.task_id,
        protocol="grpc",
        start=True,
    )
    print(f"serving {resolver.task_type}:{resolver.task_id}", flush=True)
    server.join()


def _wait_for(path: Path, timeout: float):
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path.name} did not appear within {timeout} s")
        time.sleep(0.1)


def _ps_coordinator(args):
    """Phases, each reported in `DIR/ps.json` and a marker file:
    1. train `--steps` steps, check the sharding, predict, export (`trained`);
    2. after the test kills worker 1 (`worker_killed`), train more steps on the
       worker left (`trained_after_worker`);
    3. after the test kills ps 1 (`ps_killed`), try more steps: they must fail
       within the timeout, and the process exits with status 3 naming the error.
    """
    from keras_attn.cluster import (
        fit_ctr_with_coordinator,
        local_copy,
        shard_variables,
    )
    from keras_attn.models import build_ctr_model
    from keras_attn.serving import export

    _deterministic()
    out = Path(args.out)
    df, specs, tasks = _census(rows=2048)
    from keras_attn.distribute import get_strategy

    # Shards of at least 1 KiB, at most one per server: the 488 x 8 float32 table
    # (15.6 KiB) splits in two, the small weights stay whole.
    strategy = get_strategy("parameter_server", min_shard_bytes=1024)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = build_ctr_model(
            specs,
            tasks,
            shared_table=True,
            num_experts=2,
            expert_units=(8,),
            tower_units=(8,),
        )
    table = model.field_embedding.tables[0]
    table = getattr(table, "value", table) if KERAS_3 else table
    shards = shard_variables([model.field_embedding.tables[0]])
    info = {
        "table_class": type(table).__name__,
        "table_shape": list(table.shape),
        "shard_shapes": [list(s.shape) for s in shards],
        "shard_devices": [s.device for s in shards],
    }
    from keras_attn.features import to_dataset

    rows = next(iter(to_dataset(df.iloc[:64], specs, batch_size=64)))
    before = model(rows)
    losses = fit_ctr_with_coordinator(
        model,
        specs,
        tasks,
        df,
        coordinator,
        steps=args.steps,
        batch_size=128,
        learning_rate=0.1,
        seed=0,
        timeout=120,
    )
    after = model(rows)
    copy = local_copy(model)
    np.testing.assert_allclose(copy(rows)["income"], after["income"], atol=1e-6)
    path = export(copy, out / "export", version=1, features=specs)
    info.update(
        losses=losses,
        changed=float(np.max(np.abs(after["income"] - before["income"]))),
        export=str(path),
    )
    np.savez(
        out / "coordinator_predictions.npz",
        **{k: np.asarray(v) for k, v in after.items()},
    )
    (out / "ps.json").write_text(json.dumps(info))
    (out / "trained").write_text("1")

    _wait_for(out / "worker_killed", timeout=60)
    start = time.monotonic()
    more = fit_ctr_with_coordinator(
        model,
        specs,
        tasks,
        df,
        coordinator,
        steps=8,
        batch_size=128,
        learning_rate=0.1,
        seed=1,
        timeout=60,
    )
    info.update(losses_after_worker=more, seconds_after_worker=time.monotonic() - start)
    (out / "ps.json").write_text(json.dumps(info))
    (out / "trained_after_worker").write_text("1")

    _wait_for(out / "ps_killed", timeout=60)
    start = time.monotonic()
    try:
        fit_ctr_with_coordinator(
            model,
            specs,
            tasks,
            df,
            coordinator,
            steps=8,
            batch_size=128,
            learning_rate=0.1,
            seed=2,
            timeout=args.fault_timeout,
        )
    except Exception as error:  # the error the user would see
        info.update(
            ps_error=f"{type(error).__name__}: {str(error)[:300]}",
            seconds_to_error=time.monotonic() - start,
        )
        (out / "ps.json").write_text(json.dumps(info))
        print(f"parameter server failure reported: {type(error).__name__}", flush=True)
        sys.stdout.flush()
        os._exit(3)  # the coordinator's threads would keep a normal exit waiting
    info.update(ps_error=None)
    (out / "ps.json").write_text(json.dumps(info))
    os._exit(0)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["server", "mwms", "ps_coordinator"])
    parser.add_argument("--out")
    parser.add_argument("--models", default="ctr")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=CTR_ROWS)
    parser.add_argument("--batch", type=int, default=CTR_BATCH)
    parser.add_argument("--pack", action="store_true")
    parser.add_argument("--backup")
    parser.add_argument("--pause-at")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--fault-timeout", type=float, default=60)
    args = parser.parse_args(argv)
    {"server": _server, "mwms": _mwms, "ps_coordinator": _ps_coordinator}[args.command](
        args
    )


if __name__ == "__main__":
    main()
