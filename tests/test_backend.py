"""keras_attn.backend: Keras resolution, import side effects, the masked softmax."""

import logging
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_attn.backend import KERAS_3, keras, mask_fill_value, masked_softmax, tf

_IMPORT_PROBE = r"""
import os, socket, sys
def _no_network(*args, **kwargs):
    raise AssertionError("keras_attn touched the network on import")
class _GuardedSocket(socket.socket):
    connect = connect_ex = sendto = _no_network
socket.socket = _GuardedSocket
socket.getaddrinfo = socket.create_connection = _no_network
# TensorFlow sets a few variables of its own on import (TF2_BEHAVIOR, KMP_*, ...):
# import it first, so the comparison sees what keras_attn does.
import tensorflow
before = dict(os.environ)
import keras_attn, keras_attn.layers
from keras_attn.backend import KERAS_3, keras
import tensorflow as tf
after = dict(os.environ)
changed = sorted(k for k in {*before, *after} if before.get(k) != after.get(k))
assert not changed, f"importing keras_attn changed the environment: {changed}"
print("KERAS_3" if KERAS_3 else "LEGACY", keras.__name__, tf.keras.__name__, sep="|")
"""


@pytest.mark.slow
@pytest.mark.parametrize("legacy", [False, True])
def test_import_follows_tf_keras_rule_silently(legacy):
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    if legacy:
        env["TF_USE_LEGACY_KERAS"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # Nothing printed but the probe's own line.
    assert proc.stdout.count("\n") == 1, proc.stdout
    flag, ours, theirs = proc.stdout.strip().split("|")
    if legacy:
        assert flag == "LEGACY" and ours == "tf_keras"
        assert theirs.startswith("tf_keras")
    else:
        assert flag == "KERAS_3" and ours == "keras"
        assert theirs.startswith("keras")


def test_this_process_uses_the_expected_generation():
    legacy = os.environ.get("TF_USE_LEGACY_KERAS") in ("1", "true", "True")
    assert KERAS_3 is (not legacy)
    assert keras.__version__.startswith("2." if legacy else "3.")


def _np_masked_softmax(x, mask):
    x = np.where(mask, x, -np.inf)
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.where(mask, np.exp(x - m), 0.0)
    s = e.sum(-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    lengths=st.lists(st.integers(0, 6), min_size=1, max_size=4),
)
def test_masked_softmax_matches_numpy(seed, lengths):
    rng = np.random.default_rng(seed)
    scores = rng.normal(scale=5.0, size=(len(lengths), 6)).astype("float32")
    mask = np.arange(6)[None, :] < np.asarray(lengths)[:, None]
    got = masked_softmax(tf.constant(scores), tf.constant(mask)).numpy()
    np.testing.assert_allclose(got, _np_masked_softmax(scores, mask), atol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_masked_softmax_fully_masked_row_is_zero_in_every_dtype(dtype):
    # Large scores: a -1e9 fill or a float16 exp() would overflow here.
    scores = tf.constant([[3e4, -3e4, 100.0], [1.0, 2.0, 3.0]], dtype)
    mask = tf.constant([[False, False, False], [True, False, True]])
    got = tf.cast(masked_softmax(scores, mask), "float32").numpy()
    assert got.dtype == np.float32 and np.all(np.isfinite(got))
    np.testing.assert_array_equal(got[0], [0.0, 0.0, 0.0])
    assert got[1, 1] == 0.0
    np.testing.assert_allclose(got[1].sum(), 1.0, atol=1e-2)
    assert masked_softmax(scores, mask).dtype == tf.as_dtype(dtype)


def test_masked_softmax_gradient_is_finite_for_fully_masked_rows():
    scores = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
    mask = tf.constant([[False, False], [True, False]])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(masked_softmax(scores, mask) * [[1.0, 2.0], [3.0, 4.0]])
    grad = tape.gradient(loss, scores).numpy()
    assert np.all(np.isfinite(grad))
    np.testing.assert_array_equal(grad[0], [0.0, 0.0])


def test_masked_softmax_reads_integer_masks_as_nonzero():
    scores = tf.constant([[1.0, 2.0, 3.0]])
    got = masked_softmax(scores, tf.constant([[1, 0, 1]])).numpy()
    np.testing.assert_allclose(got, _np_masked_softmax(scores.numpy(), [[1, 0, 1]]))


def test_mask_fill_value_is_finite_for_half_precision():
    assert mask_fill_value("float16") == np.finfo(np.float16).min
    assert np.isfinite(np.float16(mask_fill_value("float16")))


@pytest.mark.parametrize("writer", ["write_saved_model", "export_saved_model"])
def test_a_saved_model_write_says_nothing(writer, tmp_path, capsys, caplog):
    # Where TensorFlow's INFO lines show (a notebook), a save logged "Assets written
    # to: <temporary folder>" and tf_keras printed the endpoints: the export's caller
    # reports the final path itself.
    from keras_attn import backend

    x = keras.Input(shape=(2,), name="x")
    model = keras.Model({"x": x}, keras.layers.Dense(1)(x))
    spec = {"x": tf.TensorSpec([None, 2], tf.float32, name="x")}
    capsys.readouterr()
    with caplog.at_level(logging.INFO, logger="tensorflow"):
        if writer == "write_saved_model":
            serve = {"serve": lambda d: model(d["x"])}
            backend.write_saved_model(model, str(tmp_path / "m"), serve, [spec])
        else:
            backend.export_saved_model(model, str(tmp_path / "m"))
        # The logger's level is restored after the write.
        assert tf.get_logger().level == logging.INFO
    assert (tmp_path / "m" / "saved_model.pb").exists()
    assert capsys.readouterr().out == ""
    assert [r.getMessage() for r in caplog.records] == []
