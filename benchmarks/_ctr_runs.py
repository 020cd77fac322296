"""What the benchmarks share: a run in a fresh interpreter (`run_python`,
`run_json`, `run_process`), training throughput from keras_attn's `EpochTimer`
(`examples_per_s`), fit wall-time ratios seed by seed (`seed_ratios`); and for
bench_ctr, bench_din, bench_autoint and bench_dcn the timed fits, the alternating
runs and the table of AUCs with their DeLong intervals."""

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


def examples_per_s(times: list, n: int) -> float:
    """Training examples per second from an `EpochTimer`'s `times` (`n` examples an
    epoch), over the epochs after the first (which pays for tracing and
    compilation); the only epoch when there is one."""
    later = times[1:] or times
    return n * len(later) / sum(later)


def run_python(
    args: list,
    legacy: bool | None = False,
    timeout: float = 3600,
    cwd=None,
    pythonpath: bool = True,
) -> subprocess.CompletedProcess:
    """`python ARGS` in a fresh interpreter, so that no run inherits another's
    graphs, threads or memory: Keras 2 when `legacy` (`TF_USE_LEGACY_KERAS=1`),
    Keras 3 when False, this process' setting when None; TensorFlow's C++ log
    quiet; this repository on `PYTHONPATH` (none without `pythonpath`: e.g. an export
    loaded by TensorFlow alone); in `cwd`, a fresh temporary folder when None.
    Raises `subprocess.TimeoutExpired` after `timeout` seconds."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = str(ROOT)
    if legacy is not None:
        env.pop("TF_USE_LEGACY_KERAS", None)
        if legacy:
            env["TF_USE_LEGACY_KERAS"] = "1"
    command = [sys.executable, *map(str, args)]
    with tempfile.TemporaryDirectory() as tmp:
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp if cwd is None else cwd,
            timeout=timeout,
        )


def last_json(proc: subprocess.CompletedProcess):
    """The JSON a run printed as its last line of stdout."""
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_json(args: list, missing: str | None = None, **kwargs):
    """`run_python(args, **kwargs)`'s result: the JSON of its last stdout line. None
    when it failed for want of the module `missing`; any other failure raises a
    `RuntimeError` with the end of its stderr."""
    proc = run_python(args, **kwargs)
    if proc.returncode != 0:
        if missing and f"No module named '{missing}'" in proc.stderr:
            return None
        raise RuntimeError(f"Benchmark run failed:\n{proc.stderr[-3000:]}")
    return last_json(proc)


def run_process(script: str, args: list, legacy: bool, out_dir: str) -> dict | None:
    """Runs `script` in a fresh Python process (Keras 2 when `legacy`) with
    `sys.argv[1:]` = `[out_dir, *args]`; it writes its JSON result and its test
    predictions under `out_dir`. None when DeepCTR is not installed."""
    return run_json(["-c", script, out_dir, *args], legacy=legacy, missing="deepctr")


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


def seed_ratios(runs: list, base: list, key: str = "wall_s") -> list:
    """Each run's `key` (its fit wall time) over the mean of the `base` runs of the
    same seed (each result's "seed"; one round alternates the libraries), in the
    order of `runs`; a run with no base run of its seed is left out."""
    ratios = []
    for r in runs:
        same = [b[key] for b in base if b["seed"] == r["seed"]]
        if same:
            ratios.append(r[key] / np.mean(same))
    return ratios


def wall_ratios(results: dict, baseline: str) -> str:
    """Each model's fit wall time over the baseline's, seed by seed (same round)."""
    base = results.get(baseline)
    if not base:
        return ""
    parts = []
    for name, runs in results.items():
        if name == baseline:
            continue
        ratios = seed_ratios(runs, base)
        parts.append(
            f"{name}: "
            + ", ".join(f"{x:.2f}" for x in ratios)
            + f" (mean {np.mean(ratios):.2f})"
        )
    return "Fit wall time over DeepCTR's, seed by seed: " + "; ".join(parts) + "."


def fit_ctr_timed(model, train, config, seed, epochs, jit, callbacks=(), **kwargs):
    """`fit_ctr_model` on the raw rows `train` (batch `config["batch"]`, Adam at
    `config["lr"]`, no output), timed: `{"examples_per_s", "wall_s"}`, the wall time
    of the whole call (encoding the raw rows and compiling included), examples/s
    over full batches only. `callbacks` run after each epoch's timing; `kwargs` go
    to `fit_ctr_model`."""
    from keras_attn.models import fit_ctr_model
    from keras_attn.training import EpochTimer

    timer = EpochTimer()
    start = time.perf_counter()
    fit_ctr_model(
        model,
        train,
        epochs=epochs,
        batch_size=config["batch"],
        seed=seed,
        learning_rate=config["lr"],
        jit_compile=jit,
        callbacks=[timer, *callbacks],
        verbose=0,
        **kwargs,
    )
    wall = time.perf_counter() - start
    trained = len(train) // config["batch"] * config["batch"]  # full batches only
    return {"examples_per_s": examples_per_s(timer.times, trained), "wall_s": wall}


def timed_fit_ctr(
    out_dir, model, train, test, config, seed, epochs, jit, callbacks=()
) -> dict:
    """keras_attn's side of a run: `fit_ctr_timed`, then the predictions of the
    model's first task on `test` saved (as "keras_attn_{seed}_{jit}")."""
    from keras_attn.features import to_dataset

    r = fit_ctr_timed(model, train, config, seed, epochs, jit, callbacks)
    test_ds = to_dataset(test, model.features, batch_size=4096)
    preds = model.predict(test_ds, verbose=0)[model.tasks[0].name]
    tag = f"keras_attn_{seed}_{jit}"
    return {"predictions": save_predictions(out_dir, tag, preds), **r}


def timed_fit_deepctr(
    out_dir, seed, model, train, test, encode, config, epochs, callbacks=()
) -> dict:
    """DeepCTR's side of a run: Adam and binary cross-entropy, `fit` timed on the
    inputs `encode(train)` (encoded beforehand, outside the timing) and the 0/1
    column "label", then the predictions on `encode(test)` saved. `callbacks` run
    after each epoch's timing."""
    import tensorflow as tf

    from keras_attn.training import EpochTimer  # a tf_keras callback under Keras 2

    model.compile(tf.keras.optimizers.Adam(config["lr"]), "binary_crossentropy")
    x, y = encode(train), train["label"].to_numpy("float32")
    timer = EpochTimer()
    start = time.perf_counter()
    model.fit(
        x,
        y,
        batch_size=config["batch"],
        epochs=epochs,
        shuffle=True,
        verbose=0,
        callbacks=[timer, *callbacks],
    )
    wall = time.perf_counter() - start
    preds = model.predict(encode(test), batch_size=4096, verbose=0)
    return {
        "predictions": save_predictions(out_dir, f"deepctr_{seed}", preds),
        "examples_per_s": examples_per_s(timer.times, len(y)),
        "wall_s": wall,
    }


def alternating_runs(script, order, seeds, epochs, out_dir, extra=()):
    """Each `(which, name)` of `order` once per seed, in fresh processes (DeepCTR's,
    `which == "deepctr"`, under Keras 2) given `[which, seed, epochs, *extra]`, the
    order reversed every other seed so that load on the shared machine hits both
    alike. Returns `({name: [result per seed, its "seed" set]}, load averages
    seen)`; a run whose library is missing is left out."""
    results, loads = {}, [os.getloadavg()[0]]
    for seed in range(seeds):
        for which, name in order if seed % 2 == 0 else order[::-1]:
            r = run_process(
                script,
                [which, seed, epochs, *extra],
                legacy=which == "deepctr",
                out_dir=out_dir,
            )
            loads.append(os.getloadavg()[0])
            print(name, seed, r, file=sys.stderr, flush=True)
            if r is None:
                print(f"{name}: not installed, left out", file=sys.stderr)
                continue
            r["seed"] = seed
            results.setdefault(name, []).append(r)
    return results, loads
