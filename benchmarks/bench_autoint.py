"""AutoInt on Criteo: keras_attn (`build_ctr_model(interacting_layers=3)`,
`fit_ctr_model`) vs DeepCTR's `AutoInt`, on the same examples.

Data: ../shared/data/criteo/criteo_8k.tsv.gz (8,000 raw Kaggle rows) read by
`keras_attn.datasets.load_criteo`: the 13 integer features bucketed as the AutoInt
paper does (`floor(ln(x)^2)` for x > 2), so all 39 features are categorical fields;
values seen fewer than twice in training share the OOV bucket with missing and unseen
values (fixed beforehand, not tuned). A fixed split: a permutation with seed 0, 6,400
rows to train and 1,600 to test; the test rows are used for the AUCs below and
nothing else. Both models as the paper: embeddings of 16, three interacting layers
of 2 heads of 8 dimensions with residual connections, no DNN, one logit from the
flattened fields (DeepCTR adds its linear part, as its `AutoInt` always does);
DeepCTR's embedding initialization (normal, std 1e-4) and L2 1e-5 on the tables for
both (keras_attn keeps the fields' rows in one table, `shared_table=True`, as
bench_ctr does); Adam 1e-3, batch 256, 3 epochs (fixed beforehand, not tuned). The two
libraries see the same ids: DeepCTR's inputs are encoded with keras_attn's
vocabularies (outside its timing).

Test AUC per initialization seed with its DeLong 95% interval, and the paired DeLong
interval of keras_attn's AUC minus DeepCTR's on the same seed; training examples/s
over the epochs after the first; the wall time of the fit call (keras_attn's
includes encoding the raw DataFrame and compiling). Every run is a fresh process
(DeepCTR needs Keras 2: TF_USE_LEGACY_KERAS=1), the libraries alternate.

    python -m benchmarks.bench_autoint [--epochs 3] [--seeds 3] [--xla both|on|off]
        [--no-write]

DeepCTR (`pip install deepctr --no-deps`) is a benchmark-only dependency: without it
the DeepCTR row is left out. Reads ../shared/data/criteo (see DATA.md).
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile

import numpy as np

from benchmarks._ctr_runs import (
    SHARED_DATA,
    alternating_runs,
    results_table,
    timed_fit_ctr,
    timed_fit_deepctr,
    wall_ratios,
)
from benchmarks._results import machine

DATA = SHARED_DATA / "criteo" / "criteo_8k.tsv.gz"
CONFIG = dict(
    train_rows=6400,
    min_frequency=2,
    embedding_dim=16,
    layers=3,
    heads=2,
    att_dim=8,
    lr=1e-3,
    batch=256,
    init_std=1e-4,
    l2_embedding=1e-5,
)
DEEPCTR = "DeepCTR AutoInt (tf_keras)"
KERAS_ATTN = {
    True: "keras_attn AutoInt, fit_ctr_model (XLA)",
    False: "keras_attn AutoInt, fit_ctr_model (no XLA)",
}


def load():
    """(train, test) DataFrames of the fixed split and the specs fitted on train."""
    from keras_attn.datasets import criteo_features, load_criteo

    df = load_criteo(DATA)
    order = np.random.default_rng(0).permutation(len(df))
    cut = CONFIG["train_rows"]
    train = df.iloc[order[:cut]].reset_index(drop=True)
    test = df.iloc[order[cut:]].reset_index(drop=True)
    return train, test, criteo_features(train, min_frequency=CONFIG["min_frequency"])


def run_keras_attn(out_dir: str, seed: int, epochs: int, jit: bool = True) -> dict:
    from keras_attn.backend import keras
    from keras_attn.models import Task, build_ctr_model

    keras.utils.set_random_seed(seed)
    train, test, specs = load()
    tasks = [Task("click", label="label", metrics=[])]  # no metrics while training
    model = build_ctr_model(
        specs,
        tasks,
        embedding_dim=CONFIG["embedding_dim"],
        interacting_layers=CONFIG["layers"],
        num_heads=CONFIG["heads"],
        key_dim=CONFIG["att_dim"],
        bottom_units=(),
        tower_units=(),
        # The 39 fields' rows in one table (each field keeps its own rows: the same
        # parameters as a table per field, one lookup and one optimizer update
        # instead of 39; tracing the first step took 2-3x longer without it here).
        shared_table=True,
        embeddings_initializer=keras.initializers.RandomNormal(
            stddev=CONFIG["init_std"]
        ),
        embeddings_regularizer=keras.regularizers.L2(CONFIG["l2_embedding"]),
    )
    return timed_fit_ctr(out_dir, model, train, test, CONFIG, seed, epochs, jit)


def _encode(df, specs) -> dict:
    """DeepCTR's inputs: keras_attn's ids (0 is the OOV bucket)."""
    out = {}
    for f in specs:
        index = {v: i + f.num_oov_buckets for i, v in enumerate(f.vocabulary)}
        out[f.name] = np.asarray([index.get(v, 0) for v in df[f.name]], "int64")
    return out


def run_deepctr(out_dir: str, seed: int, epochs: int) -> dict:
    import tensorflow as tf
    from deepctr.feature_column import SparseFeat
    from deepctr.models import AutoInt

    tf.keras.utils.set_random_seed(seed)
    train, test, specs = load()
    columns = [
        SparseFeat(f.name, f.vocabulary_size, embedding_dim=CONFIG["embedding_dim"])
        for f in specs
    ]
    model = AutoInt(
        columns,
        columns,
        att_layer_num=CONFIG["layers"],
        att_embedding_size=CONFIG["att_dim"],
        att_head_num=CONFIG["heads"],
        att_res=True,
        dnn_hidden_units=(),
        l2_reg_embedding=CONFIG["l2_embedding"],
        seed=seed,
    )
    encode = functools.partial(_encode, specs=specs)
    return timed_fit_deepctr(out_dir, seed, model, train, test, encode, CONFIG, epochs)


# One run in a fresh process: `python -c` with out_dir, which, seed, epochs.
_SCRIPT = r"""
import json, sys
from benchmarks.{module} import run_deepctr, run_keras_attn
out_dir, which, seed, epochs = sys.argv[1:5]
if which == "deepctr":
    r = run_deepctr(out_dir, int(seed), int(epochs))
else:
    r = run_keras_attn(out_dir, int(seed), int(epochs), which == "xla")
print(json.dumps(r))
"""


def criteo_main(
    argv, module: str, doc: str, deepctr: str, keras_attn: dict, default_xla: str
) -> int:
    """The command line of a criteo_8k comparison with DeepCTR (`module`'s
    `run_deepctr` and `run_keras_attn`): alternating runs per seed, the AUC table
    and the wall-time ratios, written to RESULTS.md as the section `module`."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--xla",
        choices=["both", "on", "off"],
        default=default_xla,
        help="keras_attn's fit_ctr_model jit_compile setting(s)",
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(
            f"{DATA} is absent: {module} reads ../shared/data/criteo "
            "(see DATA.md); nothing was run",
            file=sys.stderr,
        )
        return 0
    jits = {"both": (True, False), "on": (True,), "off": (False,)}[args.xla]
    order = [("deepctr", deepctr)] + [
        ("xla" if jit else "noxla", keras_attn[jit]) for jit in jits
    ]
    with tempfile.TemporaryDirectory() as out_dir:
        results, loads = alternating_runs(
            _SCRIPT.replace("{module}", module),
            order,
            args.seeds,
            args.epochs,
            out_dir,
        )
        names = (deepctr, keras_attn[True], keras_attn[False])
        results = {n: results[n] for n in names if n in results}
        train, test, _ = load()
        labels = test["label"].to_numpy()
        body = (
            f"criteo_8k: {len(train):,} training and {len(test):,} test rows (fixed "
            f"split, seed 0), {labels.mean():.1%} positive in test; {args.epochs} "
            f"epoch(s), {args.seeds} initialization seed(s), the configuration of "
            "the module docstring. The DeLong intervals (of an AUC, and of the "
            "paired difference on the same seed) are averaged over the seeds. "
            f"{machine(loads)} Wall times are noisy: compare the ratios.\n\n"
            + results_table(labels, results, deepctr)
            + "\n\n"
            + wall_ratios(results, deepctr)
        )
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        write_section(
            module,
            body,
            f"python -m benchmarks.{module} --epochs {args.epochs} --seeds "
            f"{args.seeds} --xla {args.xla}",
        )
    return 0


def main(argv=None) -> int:
    return criteo_main(argv, "bench_autoint", __doc__, DEEPCTR, KERAS_ATTN, "both")


if __name__ == "__main__":
    sys.exit(main())
