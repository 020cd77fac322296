"""DCN-v2 on Criteo: keras_attn (`CTRModel` with a `FeatureCross`, `fit_ctr_model`)
vs DeepCTR's `DCNMix`, on the same examples.

Data and split as bench_autoint: ../shared/data/criteo/criteo_8k.tsv.gz read by
`keras_attn.datasets.load_criteo` (the 13 integer features bucketed, all 39 fields
categorical; values seen fewer than twice in training share the OOV bucket); a
fixed permutation with seed 0, 6,400 rows to train and 1,600 to test, the test rows
used for the AUCs below and nothing else.

Both models as DeepCTR's `DCNMix` defaults where they meet: embeddings of 16 per
field (L2 1e-5), cross layers on the flat field embeddings (L2 1e-5 on the cross
kernels), one logit; Adam 1e-3, batch 256, 3 epochs (all fixed beforehand).
DeepCTR's `DCNMix` runs a mixture of 4 low-rank (32) experts per cross layer and
adds its linear part; keras_attn's model is `FeatureCross` (DCN-v2's formula, one
cross per layer) in `CTRModel`'s `interaction` list, then the logit (the fields'
rows in one table, `shared_table=True`, as bench_autoint). The structure of each
was chosen on a validation part (`--validate` below; RESULTS.md,
bench_dcn_validation and bench_dcn_validation_2), from the same candidates for
both where they apply: two or three cross layers, with or without DeepCTR's
default DNN of 256-128-64 ReLU units (on top of the crosses in keras_attn, beside
them in DeepCTR), embeddings initialized with a normal of deviation 1e-4
(DeepCTR's default) or 1e-2, and for keras_attn full-rank crosses or rank 32.
Chosen: DCNMix with three crosses, no DNN, deviation 1e-4; keras_attn with three
full-rank crosses, no DNN, deviation 1e-2, and DCNMix's linear part
(bench_dcn_validation_linear) (the DNN lowered both libraries'
validation AUC by 0.03-0.04). Before that study the test run with DeepCTR's
defaults (two crosses of rank 32 and the DNN, deviation 1e-4, for both) gave
keras_attn's test AUC 0.6734 against DCNMix's 0.6845, paired difference -0.0110
(-0.0211 to -0.0010); after the first round (three rank-32 crosses, no DNN, for
both) 0.7089 against 0.7186, -0.0097 (-0.0186 to -0.0008); fit wall time 0.18x and
0.14x (2026-12-05, AMD EPYC, load 4.6-6.7). DCNMix's own cross, the mixture of 4
low-rank experts (`FeatureCross(num_experts=4)`, tanh), was then validated for
keras_attn too (bench_dcn_validation_mixture and _2, all with the linear part:
deviations 1e-4 and 1e-2, 2-4 layers, 4 or 8 experts, tanh or ReLU): 0.7335-0.7384,
below the full-rank crosses' 0.7393 on the same seeds, so the choice stays.
DeepCTR's inputs are encoded with keras_attn's vocabularies (outside its timing).

Test AUC per initialization seed with its DeLong 95% interval, and the paired
DeLong interval of keras_attn's AUC minus DeepCTR's on the same seed; training
examples/s over the epochs after the first; the wall time of the fit call
(keras_attn's includes encoding the raw DataFrame and compiling) and its ratio to
DeepCTR's, seed by seed. Every run is a fresh process (DeepCTR needs Keras 2:
TF_USE_LEGACY_KERAS=1), the libraries alternate.

    python -m benchmarks.bench_dcn [--epochs 3] [--seeds 3] [--xla both|on|off]
        [--no-write]
    python -m benchmarks.bench_dcn --validate [--epochs 3] [--seeds 2] [--no-write]

`--validate` chooses each library's structure (`VARIANTS`, or those named by
`--variants`) on a validation part and never reads the test rows: the 6,400
training rows split again (a permutation with seed 1), 5,120 to fit (the
vocabularies fitted on them alone) and 1,280 to score; each variant of each
library with the same seeds; the variant with the highest mean validation AUC is
the library's `CHOSEN` one, which the test run above uses.

DeepCTR (`pip install deepctr --no-deps`, in the Python that runs this script) is a
benchmark-only dependency: without it the DeepCTR row is left out. Reads
../shared/data/criteo (see DATA.md).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile

import numpy as np

from benchmarks._ctr_runs import timed_fit_ctr, timed_fit_deepctr
from benchmarks.bench_autoint import _encode, criteo_main, load

CONFIG = dict(
    embedding_dim=16,
    cross_layers=2,
    rank=32,
    num_experts=4,  # DCNMix's mixture; keras_attn's in the variants with `mixture`
    dnn=(256, 128, 64),
    lr=1e-3,
    batch=256,
    init_std=1e-4,
    l2_embedding=1e-5,
    l2_cross=1e-5,
)
#: The structures compared on the validation part (`--validate`), for both libraries
#: (full rank: keras_attn's only; DCNMix's experts are low rank).
VARIANTS = {
    "2 crosses + DNN": dict(cross_layers=2, dnn=(256, 128, 64)),
    "2 crosses": dict(cross_layers=2, dnn=()),
    "3 crosses + DNN": dict(cross_layers=3, dnn=(256, 128, 64)),
    "3 crosses": dict(cross_layers=3, dnn=()),
    "3 crosses, init 1e-2": dict(cross_layers=3, dnn=(), init_std=1e-2),
    "3 full-rank crosses": dict(cross_layers=3, dnn=(), rank=None),
    "3 full-rank crosses, init 1e-2": dict(
        cross_layers=3, dnn=(), rank=None, init_std=1e-2
    ),
    # DCNMix's linear part (keras_attn only: DCNMix always has one).
    "3 full-rank crosses, init 1e-2, linear": dict(
        cross_layers=3, dnn=(), rank=None, init_std=1e-2, linear=True
    ),
    # DCNMix's own cross in keras_attn: each layer a mixture of `num_experts`
    # rank-32 experts with tanh (`FeatureCross(num_experts=4)`), and the linear part.
    "3 crosses, mixture, linear": dict(
        cross_layers=3, dnn=(), mixture=True, linear=True
    ),
    "3 crosses, mixture, init 1e-2, linear": dict(
        cross_layers=3, dnn=(), mixture=True, init_std=1e-2, linear=True
    ),
    "2 crosses, mixture, init 1e-2, linear": dict(
        cross_layers=2, dnn=(), mixture=True, init_std=1e-2, linear=True
    ),
    "3 crosses, mixture of 8, linear": dict(
        cross_layers=3, dnn=(), mixture=True, num_experts=8, linear=True
    ),
    "4 crosses, mixture, linear": dict(
        cross_layers=4, dnn=(), mixture=True, linear=True
    ),
    "3 crosses, mixture, ReLU, linear": dict(
        cross_layers=3, dnn=(), mixture=True, activation="relu", linear=True
    ),
}
#: keras_attn-only parts: full rank (DCNMix's experts are low rank), the linear part
#: (DCNMix always has one), the mixture switch (DCNMix is always a mixture).
KERAS_ATTN_ONLY = {"rank": None, "linear": True, "mixture": True}
#: Each library's variant of best validation AUC (RESULTS.md: bench_dcn_validation).
CHOSEN = {
    "keras_attn": "3 full-rank crosses, init 1e-2, linear",
    "deepctr": "3 crosses",
}
VALIDATION_FIT_ROWS = 5120
DEEPCTR = f"DeepCTR DCNMix, {CHOSEN['deepctr']} (tf_keras)"
KERAS_ATTN = {
    True: f"keras_attn DCN-v2, {CHOSEN['keras_attn']}, fit_ctr_model (XLA)",
    False: f"keras_attn DCN-v2, {CHOSEN['keras_attn']}, fit_ctr_model (no XLA)",
}


def load_validation():
    """(fit, validation, specs): the training rows split again, seed 1; the specs
    fitted on the fit part alone. The test rows are not read."""
    from keras_attn.datasets import criteo_features

    train, _, _ = load()
    order = np.random.default_rng(1).permutation(len(train))
    cut = VALIDATION_FIT_ROWS
    fit = train.iloc[order[:cut]].reset_index(drop=True)
    validation = train.iloc[order[cut:]].reset_index(drop=True)
    return fit, validation, criteo_features(fit, min_frequency=2)


def _data(validation: bool):
    return load_validation() if validation else load()


def _config(library: str, variant: str | None) -> dict:
    return {**CONFIG, **VARIANTS[variant or CHOSEN[library]]}


def run_keras_attn(
    out_dir: str,
    seed: int,
    epochs: int,
    jit: bool,
    variant: str | None = None,
    validation: bool = False,
) -> dict:
    from keras_attn.backend import keras
    from keras_attn.layers import FeatureCross
    from keras_attn.models import CTRModel, Task

    config = _config("keras_attn", variant)
    keras.utils.set_random_seed(seed)
    train, test, specs = _data(validation)
    tasks = [Task("click", label="label", metrics=[])]  # no metrics while training
    model = CTRModel(
        specs,
        tasks,
        embedding_dim=config["embedding_dim"],
        shared_table=True,
        interaction=[
            FeatureCross(
                num_layers=config["cross_layers"],
                projection_dim=config["rank"],
                num_experts=config["num_experts"] if config.get("mixture") else 1,
                activation=config.get("activation", "tanh"),
                kernel_regularizer=keras.regularizers.L2(config["l2_cross"]),
            )
        ],
        multitask=keras.Sequential(
            [keras.layers.Dense(units, activation="relu") for units in config["dnn"]],
            name="dnn",
        )
        if config["dnn"]
        else None,
        embeddings_initializer=keras.initializers.RandomNormal(
            stddev=config["init_std"]
        ),
        embeddings_regularizer=keras.regularizers.L2(config["l2_embedding"]),
        linear=config.get("linear", False),
    )
    return timed_fit_ctr(out_dir, model, train, test, config, seed, epochs, jit)


def run_deepctr(
    out_dir: str,
    seed: int,
    epochs: int,
    variant: str | None = None,
    validation: bool = False,
) -> dict:
    import tensorflow as tf
    from deepctr.feature_column import SparseFeat
    from deepctr.models import DCNMix

    config = _config("deepctr", variant)
    tf.keras.utils.set_random_seed(seed)
    train, test, specs = _data(validation)
    columns = [
        SparseFeat(
            f.name,
            f.vocabulary_size,
            embedding_dim=config["embedding_dim"],
            # DeepCTR's own default initializer, with the variant's deviation.
            embeddings_initializer=tf.keras.initializers.RandomNormal(
                stddev=config["init_std"], seed=2020
            ),
        )
        for f in specs
    ]
    model = DCNMix(
        columns,
        columns,
        cross_num=config["cross_layers"],
        dnn_hidden_units=config["dnn"],
        low_rank=config["rank"],
        num_experts=config["num_experts"],
        l2_reg_embedding=config["l2_embedding"],
        l2_reg_cross=config["l2_cross"],
        seed=seed,
    )
    encode = functools.partial(_encode, specs=specs)
    return timed_fit_deepctr(out_dir, seed, model, train, test, encode, config, epochs)


# One validation run in a fresh process: out_dir, library, seed, epochs, variant.
_VALIDATION_SCRIPT = r"""
import json, sys
from benchmarks.bench_dcn import run_deepctr, run_keras_attn
out_dir, library, seed, epochs, variant = sys.argv[1:6]
if library == "deepctr":
    r = run_deepctr(out_dir, int(seed), int(epochs), variant, validation=True)
else:
    r = run_keras_attn(out_dir, int(seed), int(epochs), False, variant, True)
print(json.dumps(r))
"""


def validate(argv) -> int:
    """Each library's `VARIANTS` on the validation part; prints (and records) the
    mean validation AUC per variant and the chosen one."""
    parser = argparse.ArgumentParser(description="bench_dcn --validate")
    parser.add_argument("--validate", action="store_true")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--section", default="bench_dcn_validation")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    from benchmarks._ctr_runs import run_process
    from benchmarks._results import machine
    from benchmarks._stats import auc_interval

    _, validation, _ = load_validation()
    labels = validation["label"].to_numpy()
    loads, aucs = [os.getloadavg()[0]], {}
    with tempfile.TemporaryDirectory() as out_dir:
        for seed in range(args.seeds):
            for library in ("deepctr", "keras_attn"):
                for variant in args.variants:
                    if library == "deepctr" and any(
                        key in VARIANTS[variant] and VARIANTS[variant][key] == value
                        for key, value in KERAS_ATTN_ONLY.items()
                    ):
                        continue
                    r = run_process(
                        _VALIDATION_SCRIPT,
                        [library, seed, args.epochs, variant],
                        legacy=library == "deepctr",
                        out_dir=out_dir,
                    )
                    loads.append(os.getloadavg()[0])
                    if r is None:
                        continue
                    auc = auc_interval(labels, np.load(r["predictions"]))[0]
                    print(library, variant, seed, f"{auc:.4f}", file=sys.stderr)
                    aucs.setdefault((library, variant), []).append(auc)
    rows, best = [], {}
    for (library, variant), values in aucs.items():
        mean = float(np.mean(values))
        if mean > best.get(library, ("", -1.0))[1]:
            best[library] = (variant, mean)
        rows.append(
            f"| {library} | {variant} | {mean:.4f} | "
            + ", ".join(f"{v:.4f}" for v in values)
            + " |"
        )
    body = (
        f"The structure of each library's DCN-v2 chosen on a validation part, never "
        f"on the test rows: criteo_8k's 6,400 training rows split again (seed 1), "
        f"{VALIDATION_FIT_ROWS:,} to fit (vocabularies fitted on them) and "
        f"{len(labels):,} to score; {args.epochs} epoch(s), seeds 0-{args.seeds - 1}, "
        f"the rest of the configuration of the module docstring. {machine(loads)}\n\n"
        "| library | variant | validation AUC (mean) | per seed |\n|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n\nChosen (highest mean): "
        + "; ".join(f"{lib}: {v} ({m:.4f})" for lib, (v, m) in best.items())
        + "."
    )
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        variants = (
            ""
            if args.variants == list(VARIANTS)
            else " --variants " + " ".join(f"'{v}'" for v in args.variants)
        )
        section = (
            ""
            if args.section == "bench_dcn_validation"
            else f" --section {args.section}"
        )
        write_section(
            args.section,
            body,
            f"python -m benchmarks.bench_dcn --validate --epochs {args.epochs} "
            f"--seeds {args.seeds}{variants}{section}",
        )
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--validate" in argv:
        return validate(argv)
    return criteo_main(argv, "bench_dcn", __doc__, DEEPCTR, KERAS_ATTN, "off")


if __name__ == "__main__":
    sys.exit(main())
