"""Training on local tf.distribute clusters: processes on 127.0.0.1 (tests/cluster.py).

- MultiWorkerMirroredStrategy, two workers: the CTR model (`fit_ctr_model`) and the
  BERT pretrainer (`fit_bert_pretrainer`) train, both workers end with the same
  weights; a worker killed with SIGKILL mid-epoch makes the other fail (never
  hang), both started again resume from `backup_dir` and end with the
  uninterrupted run's weights.
- ParameterServerStrategy, a coordinator, two workers and two servers: the CTR
  model's embedding table is split over both servers and trains with
  `ClusterCoordinator` (keras_attn.cluster); its export predicts as the model
  does; a killed worker's steps run on the other; a killed server is reported as
  an error within a bound.

Each test starts its processes itself and stops them all in a `finally`; every
wait is bounded.
"""

import json
import signal
import time

import numpy as np
import pytest

from keras_attn.backend import KERAS_3, keras, tf
from keras_attn.cluster import (
    ShardedAdagrad,
    fit_multi_worker,
    local_copy,
    shard_variables,
)
from tests.cluster import LocalCluster

#: Bound on one cluster phase (start-up included) on this busy 2-core machine.
PHASE_TIMEOUT = 240

# Keras 3.15's `fit` cannot train under MultiWorkerMirroredStrategy with two
# workers: `_maybe_symbolic_build` calls `strategy.reduce` on the whole nested first
# batch, which MWMS rejects ("Attempt to convert a value ({...: PerReplica...}) with
# an unsupported type (<class 'dict'>) to a Tensor"; fit_ctr_model and
# fit_bert_pretrainer alike). tf_keras' `fit` trains.


def _result(out, name):
    with np.load(out / f"{name}.npz") as f:
        weights = [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]
    return weights, json.loads((out / f"{name}.json").read_text())


def _mwms(cluster, out, *extra):
    for i in range(2):
        cluster.start("worker", i, ["mwms", "--out", out, *extra])


def _assert_same(a, b, atol):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=0, atol=atol)


@pytest.mark.slow
def test_multi_worker_trains_and_resumes_after_sigkill(tmp_path):
    epochs = ["--epochs", "2"]
    # Under Keras 3 the CTR core trains with keras_attn.cluster.fit_multi_worker
    # (the note on Keras 3.15 above); fit_bert_pretrainer is `fit`: tf_keras only.
    models = ("ctr",) if KERAS_3 else ("ctr", "bert")
    # 1. Uninterrupted: the CTR model, then the BERT pretrainer, in one job, with
    # the arguments of the interrupted job below.
    plain = tmp_path / "plain"
    plain.mkdir()
    with LocalCluster({"worker": 2}, plain / "logs") as cluster:
        _mwms(
            cluster,
            plain,
            "--models",
            ",".join(models),
            "--backup",
            plain / "backup",
            *epochs,
        )
        cluster.wait_all(PHASE_TIMEOUT)
    for model in models:
        w0, info0 = _result(plain, f"{model}_worker0")
        w1, info1 = _result(plain, f"{model}_worker1")
        assert info0["replicas"] == 2
        assert len(info0["history"]["loss"]) == 2
        assert info0["history"]["loss"][-1] < info0["history"]["loss"][0]
        _assert_same(w0, w1, atol=0)  # all-reduced updates: the same weights

    # 2. The same CTR job; worker 1 stops at epoch 1, batch 1 and
    # is killed there with SIGKILL.
    fault = tmp_path / "fault"
    fault.mkdir()
    backup = ["--backup", fault / "backup", *epochs]
    with LocalCluster({"worker": 2}, fault / "logs") as cluster:
        _mwms(cluster, fault, "--pause-at", "1:1", *backup)
        cluster.wait_for_file(fault / "paused", PHASE_TIMEOUT)
        cluster.kill("worker:1", signal.SIGKILL)
        # The survivor's next all-reduce has no peer: it must fail, not hang.
        start = time.monotonic()
        code = cluster.wait("worker:0", timeout=90, expect_ok=False)
        survivor = time.monotonic() - start
        print(f"survivor exited {code} {survivor:.1f} s after its peer was killed")
        assert code != 0, cluster.logs()
        # TensorFlow's coordination service saw the peer stop sending heartbeats
        # and aborted the collectives.
        assert "UnavailableError" in cluster.tasks["worker:0"].output(), cluster.logs()
        assert not (fault / "ctr_worker0.npz").exists()
        # 3. The scheduler starts the whole job again, same arguments.
        _mwms(cluster, fault, *backup)
        cluster.wait_all(PHASE_TIMEOUT, names=["worker:0", "worker:1"])
    resumed, info = _result(fault, "ctr_worker0")
    # Epoch 0 was backed up; the restarted job ran epoch 1 only.
    assert len(info["history"]["loss"]) == 1
    expected, _ = _result(plain, "ctr_worker0")
    # Same batches, same order, same all-reduce: only the reloaded float32
    # optimizer state could differ, and it is saved exactly.
    _assert_same(resumed, expected, atol=1e-6)


@pytest.mark.slow
def test_parameter_servers_shard_train_export_and_report_failures(tmp_path):
    from keras_attn.datasets import load_census_sample
    from keras_attn.features import features_from_json, to_dataset
    from keras_attn.serving import load_serving_fn, read_features_json

    out = tmp_path
    with LocalCluster({"chief": 1, "worker": 2, "ps": 2}, out / "logs") as cluster:
        for job in ("ps", "worker"):
            for i in range(2):
                cluster.start(job, i, ["server"])
        cluster.start(
            "chief",
            0,
            ["ps_coordinator", "--out", out, "--steps", "16", "--fault-timeout", "60"],
        )
        cluster.wait_for_file(out / "trained", PHASE_TIMEOUT, watch=["chief:0"])
        # A worker dies: TensorFlow's coordinator runs its steps on the other.
        cluster.kill("worker:1")
        (out / "worker_killed").write_text("1")
        cluster.wait_for_file(out / "trained_after_worker", 120, watch=["chief:0"])
        # A parameter server dies: the coordinator's next steps fail, in time.
        cluster.kill("ps:1")
        (out / "ps_killed").write_text("1")
        start = time.monotonic()
        code = cluster.wait("chief:0", timeout=90, expect_ok=False)
        seconds = time.monotonic() - start
        log = cluster.tasks["chief:0"].output()
    info = json.loads((out / "ps.json").read_text())

    # The table (more rows than one shard holds) is split over both servers.
    assert info["table_class"] == "ShardedVariable"
    assert len(info["shard_shapes"]) == 2
    rows = [shape[0] for shape in info["shard_shapes"]]
    assert sum(rows) == info["table_shape"][0] and max(rows) < info["table_shape"][0]
    assert sorted(info["shard_devices"]) == [
        "/job:ps/replica:0/task:0/device:CPU:0",
        "/job:ps/replica:0/task:1/device:CPU:0",
    ]
    # It trained: the loss fell and the predictions moved.
    losses = info["losses"]
    assert len(losses) == 16 and np.all(np.isfinite(losses))
    assert np.mean(losses[-4:]) < np.mean(losses[:4])
    assert info["changed"] > 1e-3
    # With one worker left, the 8 more steps ran (and kept training).
    assert len(info["losses_after_worker"]) == 8
    assert np.mean(info["losses_after_worker"]) < np.mean(losses[:4])
    # The dead server is an error the coordinator reports, not a hang.
    assert code == 3, log
    assert info["ps_error"].startswith("UnavailableError"), info["ps_error"]
    assert seconds < 90
    print(f"parameter server failure reported after {info['seconds_to_error']:.1f} s")

    # The export, served by TensorFlow alone, predicts on raw rows what the
    # coordinator's model predicted.
    specs = features_from_json(read_features_json(info["export"]))
    df = load_census_sample().iloc[:64]
    raw = next(iter(to_dataset(df, specs, batch_size=64)))
    served = load_serving_fn(info["export"])(**raw)
    with np.load(out / "coordinator_predictions.npz") as expected:
        for task in ("income", "marital"):
            np.testing.assert_allclose(
                served[task].numpy(), expected[task], rtol=0, atol=1e-5
            )


# ----- The loops' parts, in one process (fast) -----


def _adagrad_numpy(value, grads, lr, init, eps):
    acc = np.full_like(value, init)
    for g in grads:
        acc = acc + g * g
        value = value - lr * g / np.sqrt(acc + eps)
    return value


def test_sharded_adagrad_matches_the_formula_dense_and_sparse():
    rng = np.random.default_rng(0)
    start = rng.normal(size=(5, 3)).astype("float32")
    dense = tf.Variable(start)
    sparse = tf.Variable(start)
    opt_dense = ShardedAdagrad([dense], learning_rate=0.1)
    opt_sparse = ShardedAdagrad([sparse], learning_rate=0.1)
    ids = tf.constant([1, 3, 1])  # a repeated id: its rows' gradients add up
    grads = []
    for _ in range(3):
        rows = rng.normal(size=(3, 3)).astype("float32")
        full = np.zeros_like(start)
        np.add.at(full, ids.numpy(), rows)
        grads.append(full)
        opt_dense.apply([tf.constant(full)])
        opt_sparse.apply([tf.IndexedSlices(tf.constant(rows), ids, (5, 3))])
    expected = _adagrad_numpy(start, grads, 0.1, 0.1, 1e-7)
    np.testing.assert_allclose(dense.numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sparse.numpy(), expected, rtol=1e-5, atol=1e-6)
    # Rows no gradient touched stay as they were.
    np.testing.assert_array_equal(sparse.numpy()[[0, 2, 4]], start[[0, 2, 4]])


def test_cluster_arguments_are_checked():
    with pytest.raises(ValueError, match="`learning_rate` must be positive"):
        ShardedAdagrad([tf.Variable([1.0])], learning_rate=0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    strategy = tf.distribute.get_strategy()
    with pytest.raises(ValueError, match="`epochs` must be a positive integer"):
        fit_multi_worker(model, None, None, strategy, 0, 1, 4, None)
    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():
        with pytest.raises(ValueError, match="outside a strategy's scope"):
            local_copy(model)


def test_local_copy_keeps_the_weights_and_shard_variables_unwraps():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3)])
    copy = local_copy(model)
    x = np.ones((4, 2), "float32")
    np.testing.assert_allclose(copy(x), model(x), atol=1e-7)
    variables = shard_variables(model.trainable_variables)
    assert all(isinstance(v, tf.Variable) for v in variables)
    assert [tuple(v.shape) for v in variables] == [(2, 3), (3,)]


def _loop_job(backup_dir, epochs, fail_at_epoch=None, on_epoch=None):
    """A tiny model trained by fit_multi_worker on one device; the dataset raises
    in `fail_at_epoch` (a crash mid-epoch); `on_epoch(epoch)` runs as an epoch's
    dataset is made."""
    keras.utils.set_random_seed(0)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype("float32")
    y = (x.sum(1) > 0).astype("float32")[:, None]
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        optimizer = keras.optimizers.Adam(0.05)

    def dataset_fn(epoch, batch_size, context):
        if on_epoch is not None:
            on_epoch(epoch)
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(32, seed=epoch)
        ds = ds.batch(batch_size, drop_remainder=True)
        if epoch == fail_at_epoch:

            def crash(i, batch):
                tf.debugging.assert_less(i, tf.constant(2, tf.int64), "a crash")
                return batch

            ds = ds.enumerate().map(crash)
        return ds

    def loss_fn(y_true, y_pred):
        return keras.losses.mean_squared_error(y_true, y_pred)

    history = fit_multi_worker(
        model, loss_fn, dataset_fn, strategy, epochs, 4, 8, optimizer, backup_dir
    )
    return model, history


@pytest.mark.slow
def test_fit_multi_worker_resumes_from_its_backup(tmp_path):
    plain, history = _loop_job(tmp_path / "plain", epochs=3)
    assert len(history) == 3 and history[-1] < history[0]
    assert not (tmp_path / "plain").exists()  # removed when training ends
    with pytest.raises(tf.errors.InvalidArgumentError):
        _loop_job(tmp_path / "backup", epochs=3, fail_at_epoch=2)
    assert (tmp_path / "backup").exists()  # epochs 0 and 1 were backed up
    resumed, history = _loop_job(tmp_path / "backup", epochs=3)
    assert len(history) == 1  # epoch 2 only
    for a, b in zip(resumed.get_weights(), plain.get_weights()):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_a_resumed_worker_saves_after_the_chief_removed_the_save_it_read(tmp_path):
    # A non-chief worker restores the chief's last save, and the chief's next
    # save removes it (max_to_keep=1) while the worker trains: the worker's own
    # save must not go back to the removed files (it did: NotFound, in CI).
    backup = tmp_path / "backup"
    with pytest.raises(tf.errors.InvalidArgumentError):
        _loop_job(backup, epochs=3, fail_at_epoch=2)
    read = set(backup.iterdir())

    def chief_saves_again(epoch):
        for path in read - {backup / "checkpoint"}:
            path.unlink()  # the restored save's data and index files

    resumed, history = _loop_job(backup, epochs=3, on_epoch=chief_saves_again)
    assert len(history) == 1 and np.isfinite(history).all()
    plain, _ = _loop_job(tmp_path / "plain", epochs=3)
    for a, b in zip(resumed.get_weights(), plain.get_weights()):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
