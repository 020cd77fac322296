"""A training process for tests/test_distribute_resume.py.

`python distribute_resume_worker.py WORK_DIR OUT SOURCE [KILL_MARKER]` trains a
tiny CTR model with `fit_ctr_model(..., backup_dir=WORK_DIR/backup,
checkpoint_dir=WORK_DIR/checkpoints)` for 3 epochs of 4 steps and writes its final
weights to OUT (.npz). SOURCE is "frame" (the rows as a DataFrame) or "csv" (the
same rows written to WORK_DIR/train.csv and streamed from there). With KILL_MARKER,
it writes that file after epoch 1's third batch and waits (at most 120 s) for the
test to kill it.
"""

import os
import sys
import time

import tensorflow as tf

tf.config.experimental.enable_op_determinism()

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from keras_attn.backend import keras  # noqa: E402
from keras_attn.features import infer_features  # noqa: E402
from keras_attn.models import build_ctr_model, fit_ctr_model  # noqa: E402


class KillPoint(keras.callbacks.Callback):
    """Logs each epoch begun to WORK_DIR/epochs.txt; writes the marker and waits."""

    def __init__(self, work_dir, marker):
        super().__init__()
        self.log = os.path.join(work_dir, "epochs.txt")
        self.marker = marker
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        with open(self.log, "a") as f:
            f.write(f"{os.getpid()} {epoch}\n")

    def on_train_batch_end(self, batch, logs=None):
        if self.marker and self.epoch == 1 and batch == 2:
            with open(self.marker, "w") as f:
                f.write("epoch 1 batch 2")
            time.sleep(120)  # killed here; bounded if nobody does
            sys.exit(3)


def main(work_dir, out, source, marker=None):
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    n = 64
    df = pd.DataFrame(
        {
            "city": rng.choice(list("abcdef"), n),
            "age": rng.normal(40, 10, n),
            "click": rng.integers(0, 2, n),
            "buy": rng.integers(0, 2, n),
        }
    )
    specs = infer_features(df, labels=["click", "buy"])
    data = df
    if source == "csv":
        data = os.path.join(work_dir, "train.csv")
        df.to_csv(data, index=False)
    model = build_ctr_model(
        specs, ["click", "buy"], num_experts=2, expert_units=(8,), tower_units=(4,)
    )
    fit_ctr_model(
        model,
        specs,
        ["click", "buy"],
        data,
        epochs=3,
        batch_size=16,
        seed=7,
        jit_compile=False,
        steps_per_execution=1,
        callbacks=[KillPoint(work_dir, marker)],
        verbose=0,
        backup_dir=os.path.join(work_dir, "backup"),
        checkpoint_dir=os.path.join(work_dir, "checkpoints"),
    )
    np.savez(out, *model.get_weights())


if __name__ == "__main__":
    main(*sys.argv[1:])
