"""keras_attn.distribute: choosing a strategy from the environment, its checks,
the fit helpers' `strategy=` argument and the epoch-ordered batches.

No server is started here: the choices are read from fake `TF_CONFIG` values.
"""

import json
from types import SimpleNamespace

import numpy as np
import pytest

from keras_attn import distribute, training
from keras_attn.backend import tf


def tf_config(cluster, task=None):
    config = {"cluster": cluster}
    if task is not None:
        config["task"] = task
    return {"TF_CONFIG": json.dumps(config)}


WORKERS = {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
PS = {
    "chief": ["127.0.0.1:1"],
    "worker": ["127.0.0.1:2", "127.0.0.1:3"],
    "ps": ["127.0.0.1:4", "127.0.0.1:5"],
}


@pytest.mark.parametrize(
    "environ, num_gpus, expected",
    [
        ({}, 0, "default"),
        ({}, 1, "default"),
        ({}, 2, "mirrored"),
        ({"TPU_NAME": "my-tpu"}, 0, "tpu"),
        ({"TPU_ACCELERATOR_TYPE": "v4-8"}, 2, "tpu"),
        (tf_config(WORKERS, {"type": "worker", "index": 1}), 2, "multi_worker"),
        (tf_config(PS, {"type": "chief", "index": 0}), 0, "parameter_server"),
        # One worker is one machine: the local devices decide.
        (tf_config({"worker": ["127.0.0.1:1"]}), 0, "default"),
        ({"TF_CONFIG": "  "}, 0, "default"),
    ],
)
def test_auto_reads_the_environment(environ, num_gpus, expected):
    assert distribute.choose_kind("auto", environ=environ, num_gpus=num_gpus) == (
        expected
    )


def test_tpu_argument_means_tpu():
    assert distribute.choose_kind("auto", tpu="my-tpu", environ={}) == "tpu"
    assert distribute.choose_kind("tpu", tpu="local", environ={}) == "tpu"


def test_auto_env_through_monkeypatch(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": WORKERS, "task": {}}))
    monkeypatch.delenv("TPU_NAME", raising=False)
    monkeypatch.delenv("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", raising=False)
    monkeypatch.delenv("TPU_ACCELERATOR_TYPE", raising=False)
    with pytest.raises(ValueError, match="task must name a task"):
        distribute.choose_kind("auto")
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps({"cluster": WORKERS, "task": {"type": "worker", "index": 0}}),
    )
    assert distribute.choose_kind("auto") == "multi_worker"


@pytest.mark.parametrize(
    "kind, tpu, environ, match",
    [
        ("horovod", None, {}, r"`kind` must be one of .*Received: kind='horovod'"),
        ("tpu", None, {}, r"kind 'tpu' needs `tpu=`.*Received: tpu=None"),
        ("tpu", "", {}, r"`tpu` must be .*Received: tpu=''"),
        ("mirrored", "my-tpu", {}, r"`tpu` is only used.*kind='mirrored'"),
        ("multi_worker", None, {}, r"TF_CONFIG.*unset.*Received: TF_CONFIG=None"),
        (
            "multi_worker",
            None,
            tf_config(PS, {"type": "chief", "index": 0}),
            r"lists 2 'ps' task\(s\).*'parameter_server'",
        ),
        ("parameter_server", None, tf_config(WORKERS), r"needs .*'ps'.*Received"),
        ("parameter_server", None, {}, r"Received: cluster=None"),
        (
            "parameter_server",
            None,
            tf_config(PS, {"type": "worker", "index": 1}),
            r"runs on the coordinator.*Received: task=",
        ),
        ("mirrored", None, tf_config(WORKERS), r"describes a cluster"),
        ("default", None, tf_config(WORKERS), r"describes a cluster"),
        ("auto", None, {"TF_CONFIG": "{not json"}, r"`TF_CONFIG` must be JSON"),
        ("auto", None, tf_config({}), r"non-empty `cluster`"),
        ("auto", None, tf_config({"worker": []}), r"entry 'worker' must be"),
        (
            "auto",
            None,
            tf_config(WORKERS, {"type": "worker", "index": 2}),
            r"task must name a task of the cluster.*'index': 2",
        ),
        ("auto", None, tf_config(WORKERS, {"type": "ps", "index": 0}), r"'ps'"),
    ],
)
def test_inconsistent_choices_raise(kind, tpu, environ, match):
    with pytest.raises(ValueError, match=match):
        distribute.choose_kind(kind, tpu=tpu, environ=environ, num_gpus=0)


def test_get_strategy_checks_and_local_kinds(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="`min_shard_bytes` must be a positive"):
        distribute.get_strategy("default", min_shard_bytes=0)
    with pytest.raises(ValueError, match="`devices` is only used with kind"):
        distribute.get_strategy("default", devices=["/cpu:0"])
    assert distribute.get_strategy("default") is tf.distribute.get_strategy()
    mirrored = distribute.get_strategy("mirrored", devices=["/cpu:0"])
    assert isinstance(mirrored, tf.distribute.MirroredStrategy)
    assert mirrored.num_replicas_in_sync == 1


def test_as_strategy_and_model_strategy(monkeypatch):
    from keras_attn.backend import keras

    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert distribute.as_strategy(None) is None
    default = tf.distribute.get_strategy()
    assert distribute.as_strategy("default") is default
    with pytest.raises(ValueError, match=r"`strategy` must be a tf.distribute"):
        distribute.as_strategy(3)
    with pytest.raises(ValueError, match="`tpu` is only used when"):
        distribute.as_strategy(default, tpu="x")
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    assert distribute.model_strategy(model) is default
    other = tf.distribute.MirroredStrategy(["/cpu:0"])
    with pytest.raises(ValueError, match=r"must be the strategy the model was built"):
        distribute.model_strategy(model, other)
    with other.scope():
        scoped = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    assert distribute.model_strategy(scoped) is other
    assert distribute.model_strategy(scoped, other) is other


def test_epoch_batches_order_is_a_function_of_the_epoch():
    x = tf.range(10, dtype=tf.int64) * 10
    full = [
        b.numpy().tolist() for b in training.epoch_batches(x, 10, 4, seed=3).take(6)
    ]
    # 2 batches per epoch (drop_remainder), each epoch a permutation's first 8.
    assert all(len(b) == 4 for b in full)
    for e in range(3):
        rows = full[2 * e] + full[2 * e + 1]
        assert len(set(rows)) == 8 and set(rows) <= set(range(0, 100, 10))
    assert full[0:2] != full[2:4]  # reshuffled
    resumed = [
        b.numpy().tolist()
        for b in training.epoch_batches(x, 10, 4, seed=3, start_epoch=1).take(4)
    ]
    assert resumed == full[2:6]
    plain = training.epoch_batches(x, 10, 4, shuffle=False, drop_remainder=False).take(
        3
    )
    assert [b.numpy().tolist() for b in plain] == [
        [0, 10, 20, 30],
        [40, 50, 60, 70],
        [80, 90],
    ]


def test_fit_callbacks_and_completed_epochs(tmp_path):
    assert training.completed_epochs(None) == 0
    assert training.completed_epochs(tmp_path) == 0
    callbacks = training.fit_callbacks(
        None, backup_dir=tmp_path / "b", checkpoint_dir=tmp_path / "c"
    )
    names = [type(c).__name__ for c in callbacks]
    assert names == ["ModelCheckpoint", "BackupAndRestore", "_EpochRecord"]
    callbacks[-1].on_epoch_end(1)
    assert training.completed_epochs(tmp_path / "b") == 2
    callbacks[-1].on_train_end()
    assert training.completed_epochs(tmp_path / "b") == 0
    with pytest.raises(ValueError, match=r"`backup_dir` must be a folder path \(str\)"):
        training.fit_callbacks(None, backup_dir=3)


def test_epoch_record_is_written_by_the_chief_only(tmp_path):
    # Every worker of a multi-worker job gets the same backup_dir: a worker that is
    # not the chief neither writes nor removes the record (two writers raced on one
    # temporary file before).
    chief, worker = (
        training.fit_callbacks(None, backup_dir=tmp_path)[-1] for _ in range(2)
    )
    for callback, should_checkpoint in ((chief, True), (worker, False)):
        strategy = SimpleNamespace(
            extended=SimpleNamespace(should_checkpoint=should_checkpoint)
        )
        callback.set_model(SimpleNamespace(distribute_strategy=strategy))
    worker.on_epoch_end(0)
    assert training.completed_epochs(tmp_path) == 0
    chief.on_epoch_end(0)
    worker.on_epoch_end(1)
    assert training.completed_epochs(tmp_path) == 1
    worker.on_train_end()
    assert training.completed_epochs(tmp_path) == 1
    chief.on_train_end()
    chief.on_train_end()  # already removed: no error
    assert training.completed_epochs(tmp_path) == 0
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_distribute_dataset_checks_the_batch():
    strategy = tf.distribute.get_strategy()
    ds = training.distribute_dataset(
        strategy, lambda b, ctx: tf.data.Dataset.range(8).batch(b), 4
    )
    assert [len(b) for b in ds] == [4, 4]
    two = tf.distribute.MirroredStrategy(["/cpu:0"])
    assert np.array_equal(
        next(
            iter(
                training.distribute_dataset(
                    two, lambda b, ctx: tf.data.Dataset.range(8).batch(b), 8
                )
            )
        ).numpy(),
        np.arange(8),
    )


@pytest.mark.parametrize(
    "requested, steps, expected", [(16, 1, 1), (16, 136, 8), (16, 32, 16), (4, None, 4)]
)
def test_steps_per_execution_divides_the_epoch(requested, steps, expected):
    # Keras 3 runs whole executions: a k that does not divide the epoch trains
    # extra steps on an endless dataset.
    strategy = tf.distribute.get_strategy()
    assert training.steps_per_execution(strategy, requested, steps) == expected


def test_cli_strategy_choices_are_the_kinds():
    from keras_attn.cli.train import STRATEGIES

    assert STRATEGIES == distribute.KINDS


def test_cli_rejects_an_unknown_strategy(capsys):
    from keras_attn.cli import main

    with pytest.raises(SystemExit):
        main(["train", "ctr", "--data", "x.csv", "--labels", "y", "--strategy", "x"])
    assert "--strategy: invalid choice: 'x'" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_train_ctr_under_a_strategy_with_checkpoints(tmp_path, capsys, monkeypatch):
    import pandas as pd

    from keras_attn.cli import main

    monkeypatch.delenv("TF_CONFIG", raising=False)
    rng = np.random.default_rng(0)
    n = 128
    city = rng.choice(["a", "b", "c"], size=n)
    df = pd.DataFrame(
        {"city": city, "age": rng.normal(40, 10, n), "click": (city == "a") * 1}
    )
    df.to_csv(tmp_path / "t.csv", index=False)
    args = ["train", "ctr", "--data", str(tmp_path / "t.csv"), "--labels", "click"]
    args += ["--epochs", "2", "--batch-size", "32", "--validation"]
    args += [str(tmp_path / "t.csv"), "--strategy", "mirrored", "--checkpoint-dir"]
    args += [str(tmp_path / "ckpt")]
    assert main(args) == 0
    assert "validation AUC click:" in capsys.readouterr().out
    names = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert names == ["epoch_001.weights.h5", "epoch_002.weights.h5"]
