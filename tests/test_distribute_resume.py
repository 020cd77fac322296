"""A training process killed with SIGKILL mid-epoch and started again with the
same arguments (`backup_dir=`) ends with the uninterrupted run's weights.

The worker (`distribute_resume_worker.py`) is seeded, runs with op determinism and
reads the rows in an order that depends on the epoch only (a DataFrame's by
`keras_attn.training.epoch_batches`, a CSV file's by its chunks shuffled with
`(seed, epoch, chunk)`), so the two runs end with the same weights, bit for bit
(under Keras 3 and Keras 2, 2026-12-05; before the CSV order was a function of
the epoch, a resumed CSV fit ended 0.0101 away)
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
WORKER = HERE / "distribute_resume_worker.py"
TIMEOUT = 300


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return env


def _run(*args):
    proc = subprocess.run(
        [sys.executable, str(WORKER), *map(str, args)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def _weights(path):
    with np.load(path) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


@pytest.mark.slow
@pytest.mark.parametrize("source", ["frame", "csv"])
def test_killed_run_resumes_to_the_uninterrupted_weights(tmp_path, source):
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    whole.mkdir()
    broken.mkdir()
    _run(whole, whole / "out.npz", source)

    marker = broken / "killed_here"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(WORKER),
            str(broken),
            str(broken / "out.npz"),
            source,
            marker,
        ],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        while not marker.exists():
            assert proc.poll() is None, f"the worker ended first: {proc.stderr.read()}"
            assert time.monotonic() < deadline, "no kill marker within the timeout"
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (broken / "out.npz").exists()
    # Epoch 0 was backed up; epoch 1 was not finished.
    assert (broken / "backup").is_dir()
    assert sorted(p.name for p in (broken / "checkpoints").iterdir()) == [
        "epoch_001.weights.h5"
    ]

    _run(broken, broken / "out.npz", source)  # the same arguments, without the kill
    resumed, expected = _weights(broken / "out.npz"), _weights(whole / "out.npz")
    assert len(resumed) == len(expected)
    for a, b in zip(resumed, expected):
        np.testing.assert_array_equal(a, b)
    # The second process resumed at epoch 1 (it did not start over), and training
    # ended at the planned epoch count with the backup cleaned up.
    runs = {}
    for line in (broken / "epochs.txt").read_text().split("\n"):
        if line:
            pid, epoch = line.split()
            runs.setdefault(pid, []).append(int(epoch))
    assert list(runs.values()) == [[0, 1], [1, 2]]
    names = sorted(p.name for p in (broken / "checkpoints").iterdir())
    assert names == [f"epoch_00{i}.weights.h5" for i in (1, 2, 3)]
    assert not (broken / "backup" / "keras_attn_epochs.json").exists()
