"""What bench_din and bench_autoint share: the timed fit, the per-run processes and
the table of AUCs with their DeLong intervals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._stats import auc_interval, difference_interval

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


class EpochTimes:
    """Seconds of each epoch, filled by the Keras callback of `callback(keras)`."""

    def __init__(self):
        self.times = []

    def callback(self, keras, on_epoch_end=None):
        times = self.times

        class Timer(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                self._start = time.perf_counter()

            def on_epoch_end(self, epoch, logs=None):
                times.append(time.perf_counter() - self._start)
                if on_epoch_end is not None:
                    on_epoch_end(epoch)

        return Timer()

    def examples_per_s(self, n: int) -> float:
        """Training examples per second over the epochs after the first (which pays
        for tracing and compilation); the only epoch when there is one."""
        later = self.times[1:] or self.times
        return n * len(later) / sum(later)


def run_process(script: str, args: list, legacy: bool, out_dir: str) -> dict | None:
    """Runs `script` in a fresh Python process (Keras 2 when `legacy`); it writes its
    JSON result and its test predictions under `out_dir`. None when DeepCTR is
    not installed."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    env.pop("TF_USE_LEGACY_KERAS", None)
    if legacy:
        env["TF_USE_LEGACY_KERAS"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [sys.executable, "-c", script, out_dir, *map(str, args)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            timeout=3600,
        )
    if proc.returncode != 0:
        if "No module named 'deepctr'" in proc.stderr:
            return None
        raise RuntimeError(f"Benchmark run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def save_predictions(out_dir: str, tag: str, scores) -> str:
    path = str(Path(out_dir) / f"{tag}.npy")
    np.save(path, np.asarray(scores, dtype="float64").ravel())
    return path


def results_table(labels, results: dict, baseline: str) -> str:
    """Markdown rows: AUC (mean over seeds, seed min-max, the DeLong 95% interval of
    each seed's AUC averaged), the paired DeLong difference to `baseline` on the
    same seed, examples/s and fit wall time, each averaged over the seeds."""
    rows = []
    base = results.get(baseline)
    for name, runs in results.items():
        aucs, lows, highs, diffs = [], [], [], []
        for seed, r in enumerate(runs):
            scores = np.load(r["predictions"])
            auc, low, high = auc_interval(labels, scores)
            aucs.append(auc)
            lows.append(low)
            highs.append(high)
            if base is not None and name != baseline and seed < len(base):
                diffs.append(
                    difference_interval(
                        labels, scores, np.load(base[seed]["predictions"])
                    )
                )
        diff = ""
        if diffs:
            d = np.mean(diffs, axis=0)
            diff = f"{d[0]:+.4f} ({d[1]:+.4f} to {d[2]:+.4f})"
        rows.append(
            f"| {name} | {np.mean(aucs):.4f} | {min(aucs):.4f}-{max(aucs):.4f} | "
            f"{np.mean(lows):.4f}-{np.mean(highs):.4f} | {diff} | "
            f"{np.mean([r['examples_per_s'] for r in runs]):,.0f} | "
            f"{np.mean([r['wall_s'] for r in runs]):.1f} |"
        )
    return (
        "| model | test AUC (mean) | seed min-max | DeLong 95% interval | "
        f"AUC minus {baseline.split(' (')[0]}'s, paired DeLong 95% | "
        "train examples/s | fit wall s |\n|---|---|---|---|---|---|---|\n"
        + "\n".join(rows)
    )


def wall_ratios(results: dict, baseline: str) -> str:
    """Each model's fit wall time over the baseline's, seed by seed (same round)."""
    base = results.get(baseline)
    if not base:
        return ""
    parts = []
    for name, runs in results.items():
        if name == baseline:
            continue
        ratios = [r["wall_s"] / b["wall_s"] for r, b in zip(runs, base)]
        parts.append(
            f"{name}: "
            + ", ".join(f"{x:.2f}" for x in ratios)
            + f" (mean {np.mean(ratios):.2f})"
        )
    return "Fit wall time over DeepCTR's, seed by seed: " + "; ".join(parts) + "."


def timed_fit_ctr(
    out_dir, tag, model, specs, tasks, train, test, config, seed, epochs, jit
) -> dict:
    """keras_attn's side of a run: `fit_ctr_model` timed (encoding the raw rows and
    compiling included), then the test predictions saved."""
    from keras_attn.backend import keras
    from keras_attn.features import to_dataset
    from keras_attn.models import fit_ctr_model

    timer = EpochTimes()
    start = time.perf_counter()
    fit_ctr_model(
        model,
        specs,
        tasks,
        train,
        epochs=epochs,
        batch_size=config["batch"],
        seed=seed,
        learning_rate=config["lr"],
        jit_compile=jit,
        callbacks=[timer.callback(keras)],
        verbose=0,
    )
    wall = time.perf_counter() - start
    preds = model.predict(to_dataset(test, specs, batch_size=4096), verbose=0)
    trained = len(train) // config["batch"] * config["batch"]  # full batches only
    return {
        "predictions": save_predictions(out_dir, tag, preds[tasks[0].name]),
        "examples_per_s": timer.examples_per_s(trained),
        "wall_s": wall,
    }


def timed_fit_deepctr(out_dir, tag, model, x, y, x_test, config, epochs) -> dict:
    """DeepCTR's side of a run: Adam and binary cross-entropy, `fit` timed on the
    encoded inputs, then the test predictions saved."""
    import tensorflow as tf

    model.compile(tf.keras.optimizers.Adam(config["lr"]), "binary_crossentropy")
    timer = EpochTimes()
    start = time.perf_counter()
    model.fit(
        x,
        y,
        batch_size=config["batch"],
        epochs=epochs,
        shuffle=True,
        verbose=0,
        callbacks=[timer.callback(tf.keras)],
    )
    wall = time.perf_counter() - start
    preds = model.predict(x_test, batch_size=4096, verbose=0)
    return {
        "predictions": save_predictions(out_dir, tag, preds),
        "examples_per_s": timer.examples_per_s(len(y)),
        "wall_s": wall,
    }


def alternating_runs(script, order, seeds, epochs, out_dir):
    """Each `(which, name)` of `order` once per seed, in fresh processes (DeepCTR's,
    `which == "deepctr"`, under Keras 2), the order reversed every other seed so
    that load on the shared machine hits both alike. Returns `({name: [result per
    seed]}, load averages seen)`; a run whose library is missing is left out."""
    results, loads = {}, [os.getloadavg()[0]]
    for seed in range(seeds):
        for which, name in order if seed % 2 == 0 else order[::-1]:
            r = run_process(
                script,
                [which, seed, epochs],
                legacy=which == "deepctr",
                out_dir=out_dir,
            )
            loads.append(os.getloadavg()[0])
            print(name, seed, r, file=sys.stderr, flush=True)
            if r is None:
                print(f"{name}: not installed, left out", file=sys.stderr)
                continue
            results.setdefault(name, []).append(r)
    return results, loads
