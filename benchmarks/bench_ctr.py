"""Census-income MMoE: keras_attn (softmax and attention gates) vs DeepCTR's MMOE.

Same data (the census dev file, a fixed 80/20 split with seed 0), same configuration
(8 experts of 64 units, towers of 32, embeddings of 8, Adam 1e-3, batch 512) and the
same number of epochs. Validation AUC per task is computed with scikit-learn on the
predictions of each model; training throughput is examples/s over the epochs after
the first (the first pays for tracing). DeepCTR needs Keras 2, so it runs in a
subprocess with TF_USE_LEGACY_KERAS=1; the runs alternate between the two libraries.

    python -m benchmarks.bench_ctr [--epochs 3] [--rows 70000] [--no-write]

DeepCTR (`pip install deepctr --no-deps`) is a benchmark-only dependency: without it
the DeepCTR column is left out. Reads ../shared/data/census_income/ (see DATA.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "census_income" / "census_income_dev.csv.gz"
CONFIG = dict(
    num_experts=8, expert_units=64, tower_units=32, embedding_dim=8, lr=1e-3, batch=512
)


def _split(rows: int, seed: int = 0):
    import pandas as pd

    df = pd.read_csv(DATA, keep_default_na=False, na_values=[""]).iloc[:rows]
    order = np.random.default_rng(seed).permutation(len(df))
    cut = int(0.8 * len(df))
    return df.iloc[order[:cut]], df.iloc[order[cut:]]


def _labels(df):
    return {
        "income": (df["income_50k"].str.strip() == "50000+.").to_numpy("float32"),
        "marital": (df["marital_stat"].str.strip() == "Never married").to_numpy(
            "float32"
        ),
    }


class _EpochTimer:
    def __init__(self):
        self.times = []

    def start(self):
        self._t = time.perf_counter()

    def stop(self):
        self.times.append(time.perf_counter() - self._t)


def run_keras_attn(gate: str, epochs: int, rows: int) -> dict:
    from sklearn.metrics import roc_auc_score

    from keras_attn.backend import keras
    from keras_attn.datasets import census_features, census_tasks
    from keras_attn.features import to_dataset
    from keras_attn.models import build_ctr_model, compile_ctr_model

    keras.utils.set_random_seed(0)
    train, val = _split(rows)
    specs = census_features(train)
    tasks = census_tasks()
    model = build_ctr_model(
        specs,
        tasks,
        embedding_dim=CONFIG["embedding_dim"],
        num_experts=CONFIG["num_experts"],
        expert_units=(CONFIG["expert_units"],),
        tower_units=(CONFIG["tower_units"],),
        gate=gate,
    )
    compile_ctr_model(model, tasks, learning_rate=CONFIG["lr"], steps_per_execution=16)
    ds = to_dataset(
        train, specs, tasks, batch_size=CONFIG["batch"], shuffle=True, seed=0
    )
    timer = _EpochTimer()

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            timer.start()

        def on_epoch_end(self, epoch, logs=None):
            timer.stop()

    model.fit(ds, epochs=epochs, verbose=0, callbacks=[Timer()])
    preds = model.predict(to_dataset(val, specs, batch_size=4096), verbose=0)
    y = _labels(val)
    return {
        "auc": {t: float(roc_auc_score(y[t], np.ravel(preds[t]))) for t in y},
        "examples_per_s": _throughput(len(train), timer.times),
    }


def _throughput(n, times):
    later = times[1:] or times
    return n * len(later) / sum(later)


_DEEPCTR = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from benchmarks.bench_ctr import CONFIG, _labels, _split, _throughput
import tensorflow as tf
from deepctr.feature_column import DenseFeat, SparseFeat
from deepctr.models import MMOE
from sklearn.metrics import roc_auc_score
epochs, rows = int(sys.argv[2]), int(sys.argv[3])
tf.keras.utils.set_random_seed(0)
train, val = _split(rows)
numeric = ["age", "wage_per_hour", "capital_gains", "capital_losses",
           "stock_dividends", "num_emp", "weeks_worked"]
drop = {"income_50k", "marital_stat", "instance_weight"}
sparse = [c for c in train.columns if c not in drop and c not in numeric]
def encode(df, vocab):
    out = {}
    for c in sparse:
        out[c] = df[c].astype(str).map(vocab[c]).fillna(0).to_numpy("int64")
    for c in numeric:
        x = df[c].to_numpy("float32")
        out[c] = (x - stats[c][0]) / stats[c][1]
    return out
vocab = {c: {v: i + 1 for i, v in enumerate(sorted(train[c].astype(str).unique()))}
         for c in sparse}
stats = {c: (train[c].mean(), train[c].std() or 1.0) for c in numeric}
columns = [SparseFeat(c, len(vocab[c]) + 1, embedding_dim=CONFIG["embedding_dim"])
           for c in sparse] + [DenseFeat(c, 1) for c in numeric]
model = MMOE(columns, num_experts=CONFIG["num_experts"],
             expert_dnn_hidden_units=(CONFIG["expert_units"],),
             tower_dnn_hidden_units=(CONFIG["tower_units"],),
             task_types=["binary", "binary"], task_names=["income", "marital"])
model.compile(tf.keras.optimizers.Adam(CONFIG["lr"]),
              loss=["binary_crossentropy", "binary_crossentropy"])
x, y = encode(train, vocab), _labels(train)
times = []
class Timer(tf.keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.t = time.perf_counter()
    def on_epoch_end(self, epoch, logs=None):
        times.append(time.perf_counter() - self.t)
model.fit(x, [y["income"], y["marital"]], batch_size=CONFIG["batch"], epochs=epochs,
          verbose=0, shuffle=True, callbacks=[Timer()])
preds = model.predict(encode(val, vocab), batch_size=4096, verbose=0)
yv = _labels(val)
print(json.dumps({
    "auc": {t: float(roc_auc_score(yv[t], np.ravel(p)))
            for t, p in zip(["income", "marital"], preds)},
    "examples_per_s": _throughput(len(train), times),
}))
"""


def run_deepctr(epochs: int, rows: int) -> dict | None:
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3")
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [sys.executable, "-c", _DEEPCTR, str(ROOT), str(epochs), str(rows)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            timeout=1800,
        )
    if proc.returncode != 0:
        if "No module named 'deepctr'" in proc.stderr:
            print("DeepCTR is not installed: its column is left out", file=sys.stderr)
            return None
        raise RuntimeError(f"DeepCTR run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=70_000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"{DATA} is absent: this benchmark reads ../shared/data", file=sys.stderr)
        return 0
    results = {}
    # Alternate the libraries so that load on the shared machine hits both alike.
    results["DeepCTR MMOE (tf_keras)"] = run_deepctr(args.epochs, args.rows)
    results["keras_attn MMoE, softmax gate"] = run_keras_attn(
        "softmax", args.epochs, args.rows
    )
    deep2 = run_deepctr(args.epochs, args.rows)
    results["keras_attn MMoE, attention gate"] = run_keras_attn(
        "attention", args.epochs, args.rows
    )
    deep = results["DeepCTR MMOE (tf_keras)"]
    if deep is not None and deep2 is not None:
        deep["examples_per_s"] = (deep["examples_per_s"] + deep2["examples_per_s"]) / 2
    rows = []
    for name, r in results.items():
        if r is None:
            continue
        ratio = ""
        if deep is not None:
            ratio = f"{r['examples_per_s'] / deep['examples_per_s']:.2f}x"
        rows.append(
            f"| {name} | {r['auc']['income']:.4f} | {r['auc']['marital']:.4f} | "
            f"{r['examples_per_s']:,.0f} | {ratio} |"
        )
    n_train = int(0.8 * min(args.rows, 70_000))
    body = (
        f"Census-income dev data, {n_train:,} training / "
        f"{min(args.rows, 70_000) - n_train:,} validation rows (fixed 80/20 split, "
        f"seed 0), {args.epochs} epochs, 8 experts of 64 units, towers of 32, "
        "embedding 8, Adam 1e-3, batch 512. AUC from scikit-learn on the "
        "validation predictions; examples/s over the epochs after the first "
        "(DeepCTR: the mean of its two alternated runs). keras_attn trains from raw "
        "strings (lookups inside the model) with `steps_per_execution=16`; DeepCTR "
        "from pre-encoded integer arrays.\n\n"
        "| model | income AUC | marital AUC | train examples/s | vs DeepCTR |\n"
        "|---|---|---|---|---|\n" + "\n".join(rows)
    )
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        write_section(
            "bench_ctr",
            body,
            f"python -m benchmarks.bench_ctr --epochs {args.epochs} --rows {args.rows}",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
