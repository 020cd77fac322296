"""DIN on MovieLens-100K: keras_attn (`build_ctr_model` with `SequenceFeature`s,
`fit_ctr_model`) vs DeepCTR's `DIN`, on the same examples.

Examples from `keras_attn.datasets.load_movielens_din`: one per rating of the 755
users of ../shared/data/movielens_100k, label rating >= 4; the candidate item and its
genre set, the user's id, age, gender and occupation, and two behaviour histories
(the 50 most recent items rated strictly earlier), pooled by DIN's attention against
the candidate item (DeepCTR's DIN concatenates all its histories' embeddings into one
key: with one history both models compute the same attention). Split by time within each
user: each user's last 10 ratings are the test part, used for the AUCs below and
nothing else. Both models: embeddings of 8 (DeepCTR's initialization, normal with
std 1e-4, and L2 1e-6 on the tables, its DIN defaults), DIN activation units of
(80, 40) with Dice, an MLP of (200, 80) (the DIN paper's) with ReLU, Adam 1e-3,
batch 256, the same number of epochs (2, fixed beforehand, not tuned). The two
libraries see the same ids: DeepCTR's inputs are encoded with keras_attn's
vocabularies (outside its timing). keras_attn keeps a table per field
(`--shared-table`: its plain fields' rows in one table, the same parameters, as
bench_ctr and bench_autoint do).

Test AUC per initialization seed with its DeLong 95% interval, and the paired DeLong
interval of keras_attn's AUC minus DeepCTR's on the same seed; training examples/s
over the epochs after the first; the wall time of the fit call (keras_attn's
includes encoding the raw DataFrame and compiling). Every run is a fresh process
(DeepCTR needs Keras 2: TF_USE_LEGACY_KERAS=1), the libraries alternate.

    python -m benchmarks.bench_din [--epochs 2] [--seeds 2] [--xla both|on|off]
        [--shared-table] [--no-write]
    python -m benchmarks.bench_din --select-epochs 4 [--seeds 1]
    python -m benchmarks.bench_din --interactions concat_diff_product,outer_product
        [--seeds 2] [--xla off] [--shared-table]

`--interactions A,B` compares keras_attn's DIN activation unit inputs (issue 16's
open question: `LocalActivationUnit(interaction=...)`, the default
`[q, k, q - k, q ⊙ k]` against the paper's outer product `vec(q ⊗ k)` in place of
`q ⊙ k`): keras_attn alone (no DeepCTR row), each interaction on the same seeds
(the order alternating), the paired DeLong interval of each AUC minus the first's;
everything else as above. Section `bench_din_interaction`.

`--select-epochs N` trains both on an inner split (each user's last 10 training
ratings held out; the test part is not read) and prints the held-out AUC after each
of N epochs (a check of the fixed choice; the test part stays unread).

DeepCTR (`pip install deepctr --no-deps`) is a benchmark-only dependency: without it
the DeepCTR row is left out. Reads ../shared/data/movielens_100k (see DATA.md).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile

import numpy as np

from benchmarks._ctr_runs import (
    SHARED_DATA,
    alternating_runs,
    results_table,
    run_process,
    timed_fit_ctr,
    timed_fit_deepctr,
    wall_ratios,
)

DATA = SHARED_DATA / "movielens_100k"
CONFIG = dict(
    history=50,
    test_ratings=10,
    embedding_dim=8,
    att_units=(80, 40),
    dnn_units=(200, 80),
    lr=1e-3,
    batch=256,
    init_std=1e-4,
    l2_embedding=1e-6,
)
DEEPCTR = "DeepCTR DIN (tf_keras)"
KERAS_ATTN = {
    True: "keras_attn DIN, fit_ctr_model (XLA)",
    False: "keras_attn DIN, fit_ctr_model (no XLA)",
}


def load(inner: bool = False):
    """(train, test) DataFrames and the feature specs fitted on train; `inner`:
    (inner train, held-out) both carved from the training part."""
    from keras_attn.datasets import load_movielens_din, movielens_din_features

    data = load_movielens_din(
        DATA,
        history_length=CONFIG["history"],
        test_ratings=CONFIG["test_ratings"],
        validation_ratings=CONFIG["test_ratings"] if inner else 0,
    )
    train, test = (data.train, data.validation) if inner else (data.train, data.test)
    return (
        train,
        test,
        movielens_din_features(train, CONFIG["history"], genre_history=False),
    )


def run_keras_attn(
    out_dir: str,
    seed: int,
    epochs: int,
    inner: bool = False,
    jit: bool = True,
    shared_table: bool = False,
    interaction: str = "concat_diff_product",
) -> dict:
    from keras_attn.backend import keras
    from keras_attn.features import to_dataset
    from keras_attn.models import Task, build_ctr_model

    keras.utils.set_random_seed(seed)
    train, test, specs = load(inner)
    tasks = [Task("click", label="label", metrics=[])]  # no metrics while training
    model = build_ctr_model(
        specs,
        tasks,
        embedding_dim=CONFIG["embedding_dim"],
        bottom_units=CONFIG["dnn_units"],
        tower_units=(),
        shared_table=shared_table,
        din_hidden_units=CONFIG["att_units"],
        din_activation="dice",
        din_interaction=interaction,
        embeddings_initializer=keras.initializers.RandomNormal(
            stddev=CONFIG["init_std"]
        ),
        embeddings_regularizer=keras.regularizers.L2(CONFIG["l2_embedding"]),
    )
    test_ds = to_dataset(test, specs, batch_size=4096)
    epoch_aucs = []

    def held_out_auc(epoch, logs=None):
        from sklearn.metrics import roc_auc_score

        preds = model.predict(test_ds, verbose=0)["click"]
        epoch_aucs.append(float(roc_auc_score(test["label"], np.ravel(preds))))

    r = timed_fit_ctr(
        out_dir,
        model,
        train,
        test,
        CONFIG,
        seed,
        epochs,
        jit,
        callbacks=[keras.callbacks.LambdaCallback(on_epoch_end=held_out_auc)]
        if inner
        else [],
    )
    return {**r, "epoch_auc": epoch_aucs}


def _encode(df, specs) -> dict:
    """DeepCTR's inputs: keras_attn's ids + 1 (0 pads a history), age
    standardized."""
    by_name = {f.name: f for f in specs}
    out = {}
    for f in specs:
        if f.kind == "categorical":
            index = {v: i + f.num_oov_buckets + 1 for i, v in enumerate(f.vocabulary)}
            out[f.name] = np.asarray(
                [index.get(v, 1) for v in df[f.name]], dtype="int64"
            )
        elif f.kind == "numeric":
            out[f.name] = ((df[f.name].to_numpy("float64") - f.mean) / f.std).astype(
                "float32"
            )
        else:
            shared = by_name[f.shares]
            cast = int if shared.dtype == "int64" else str
            index = {
                v: i + shared.num_oov_buckets + 1
                for i, v in enumerate(shared.vocabulary)
            }
            ids = np.zeros((len(df), f.max_len), dtype="int64")
            for row, text in enumerate(df[f.name]):
                tokens = [index.get(cast(t), 1) for t in text.split(f.separator) if t]
                tokens = tokens[-f.max_len :]
                ids[row, : len(tokens)] = tokens
            out[f.name] = ids
    return out


def run_deepctr(out_dir: str, seed: int, epochs: int, inner: bool = False) -> dict:
    import tensorflow as tf
    from deepctr.feature_column import DenseFeat, SparseFeat, VarLenSparseFeat
    from deepctr.models import DIN
    from sklearn.metrics import roc_auc_score

    tf.keras.utils.set_random_seed(seed)
    train, test, specs = load(inner)
    by_name = {f.name: f for f in specs}
    columns = []
    for f in specs:
        if f.kind == "categorical":
            columns.append(
                SparseFeat(
                    f.name, f.vocabulary_size + 1, embedding_dim=CONFIG["embedding_dim"]
                )
            )
        elif f.kind == "numeric":
            columns.append(DenseFeat(f.name, 1))
        else:
            shared = by_name[f.shares]
            columns.append(
                VarLenSparseFeat(
                    SparseFeat(
                        f.name,
                        shared.vocabulary_size + 1,
                        embedding_dim=CONFIG["embedding_dim"],
                        embedding_name=f.shares,
                    ),
                    maxlen=f.max_len,
                )
            )
    model = DIN(
        columns,
        ["item_id"],
        dnn_hidden_units=CONFIG["dnn_units"],
        att_hidden_size=CONFIG["att_units"],
        att_activation="dice",
        l2_reg_embedding=CONFIG["l2_embedding"],
        seed=seed,
    )
    x_test = _encode(test, specs) if inner else None
    epoch_aucs = []

    def held_out_auc(epoch, logs=None):
        preds = model.predict(x_test, batch_size=4096, verbose=0)
        epoch_aucs.append(float(roc_auc_score(test["label"], np.ravel(preds))))

    encode = functools.partial(_encode, specs=specs)
    r = timed_fit_deepctr(
        out_dir,
        seed,
        model,
        train,
        test,
        encode,
        CONFIG,
        epochs,
        callbacks=[tf.keras.callbacks.LambdaCallback(on_epoch_end=held_out_auc)]
        if inner
        else [],
    )
    return {**r, "epoch_auc": epoch_aucs}


_SCRIPT = r"""
import json, sys
from benchmarks.bench_din import run_deepctr, run_keras_attn
out_dir, which, seed, epochs, inner, shared, interaction = sys.argv[1:8]
if which == "deepctr":
    r = run_deepctr(out_dir, int(seed), int(epochs), inner == "1")
else:
    r = run_keras_attn(
        out_dir,
        int(seed),
        int(epochs),
        inner == "1",
        which == "xla",
        shared == "1",
        interaction,
    )
print(json.dumps(r))
"""


def _run(
    which,
    out_dir,
    seed,
    epochs,
    inner=False,
    shared_table=False,
    interaction="concat_diff_product",
):
    return run_process(
        _SCRIPT,
        [which, seed, epochs, int(inner), int(shared_table), interaction],
        legacy=which == "deepctr",
        out_dir=out_dir,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument(
        "--xla",
        choices=["both", "on", "off"],
        default="both",
        help="keras_attn's fit_ctr_model jit_compile setting(s)",
    )
    parser.add_argument("--select-epochs", type=int, default=0, metavar="N")
    parser.add_argument(
        "--shared-table",
        action="store_true",
        help="keras_attn keeps its plain fields' rows in one table",
    )
    parser.add_argument(
        "--interactions",
        default="",
        metavar="A,B",
        help="compare keras_attn's DIN activation unit interactions (no DeepCTR)",
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if not (DATA / "u.item").exists():
        print(
            f"{DATA} is absent: bench_din reads ../shared/data/movielens_100k "
            "(see DATA.md); nothing was run",
            file=sys.stderr,
        )
        return 0
    if args.interactions:
        return compare_interactions(args, parser)
    inner = args.select_epochs > 0
    epochs = args.select_epochs if inner else args.epochs
    jits = {"both": (True, False), "on": (True,), "off": (False,)}[args.xla]
    order = [("deepctr", DEEPCTR)] + [
        ("xla" if jit else "noxla", KERAS_ATTN[jit]) for jit in jits
    ]
    with tempfile.TemporaryDirectory() as out_dir:
        results, loads = alternating_runs(
            _SCRIPT,
            order,
            args.seeds,
            epochs,
            out_dir,
            extra=[int(inner), int(args.shared_table), "concat_diff_product"],
        )
        names = (DEEPCTR, KERAS_ATTN[True], KERAS_ATTN[False])
        results = {n: results[n] for n in names if n in results}
        if inner:
            lines = [
                f"| {name} | "
                + " | ".join(
                    f"{np.mean([r['epoch_auc'][e] for r in rs]):.4f}"
                    for e in range(epochs)
                )
                + " |"
                for name, rs in results.items()
            ]
            body = (
                "A check of bench_din's number of epochs (2, fixed beforehand): both "
                "models trained on the "
                "training part minus each user's last 10 training ratings, scored on "
                f"those held-out ratings after each epoch (mean over {args.seeds} "
                "seed(s)); the test part is not read.\n\n"
                "| model | "
                + " | ".join(f"epoch {e + 1}" for e in range(epochs))
                + " |\n|---|"
                + "---|" * epochs
                + "\n"
                + "\n".join(lines)
            )
            section = "bench_din_epochs"
            command = (
                f"python -m benchmarks.bench_din --select-epochs {epochs} "
                f"--seeds {args.seeds} --xla {args.xla}"
                + (" --shared-table" if args.shared_table else "")
            )
        else:
            train, test, _ = load()
            labels = test["label"].to_numpy()
            body = (
                f"MovieLens-100K (755 users): {len(train):,} training and "
                f"{len(test):,} test examples (each user's last "
                f"{CONFIG['test_ratings']} ratings, by time), {labels.mean():.1%} "
                f"positive; {args.epochs} epoch(s), {args.seeds} initialization "
                "seed(s), the configuration of the module docstring. The DeLong "
                "intervals (of an AUC, and of the paired difference on the same "
                "seed) are averaged over the seeds. Load average (1 min) during the "
                f"run: {min(loads):.1f}-{max(loads):.1f}, on a 2-core machine shared "
                "with other jobs: wall times are noisy, compare the ratios.\n\n"
                + results_table(labels, results, DEEPCTR)
                + "\n\n"
                + wall_ratios(results, DEEPCTR)
            )
            section = "bench_din" + ("_shared_table" if args.shared_table else "")
            command = (
                f"python -m benchmarks.bench_din --epochs {args.epochs} "
                f"--seeds {args.seeds} --xla {args.xla}"
                + (" --shared-table" if args.shared_table else "")
            )
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        write_section(section, body, command)
    return 0


def compare_interactions(args, parser) -> int:
    """keras_attn's DIN with each `--interactions` value on the same seeds."""
    from keras_attn.layers.din import INTERACTIONS

    interactions = [i.strip() for i in args.interactions.split(",") if i.strip()]
    bad = [i for i in interactions if i not in INTERACTIONS]
    if bad or len(interactions) < 2 or args.xla == "both":
        parser.error(
            f"--interactions: two or more of {list(INTERACTIONS)} with --xla on|off. "
            f"Received: --interactions {args.interactions} --xla {args.xla}"
        )
    which = "xla" if args.xla == "on" else "noxla"
    names = {i: f"keras_attn DIN, interaction={i}" for i in interactions}
    results: dict[str, list] = {names[i]: [] for i in interactions}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as out_dir:
        for seed in range(args.seeds):
            order = interactions if seed % 2 == 0 else interactions[::-1]
            for interaction in order:
                # The runs share `out_dir`: the predictions file names the
                # interaction through a sub-folder.
                sub = os.path.join(out_dir, interaction)
                os.makedirs(sub, exist_ok=True)
                r = _run(
                    which,
                    sub,
                    seed,
                    args.epochs,
                    shared_table=args.shared_table,
                    interaction=interaction,
                )
                loads.append(os.getloadavg()[0])
                print(names[interaction], seed, r, file=sys.stderr, flush=True)
                results[names[interaction]].append(r)
        train, test, _ = load()
        labels = test["label"].to_numpy()
        baseline = names[interactions[0]]
        walls = "; ".join(
            f"{name}: {np.mean([r['wall_s'] for r in runs]):.1f} s"
            for name, runs in results.items()
        )
        body = (
            "Issue 16's open question: does DIN's activation unit gain from the "
            "paper's outer product of candidate and behaviour? `LocalActivationUnit("
            'interaction="outer_product")` feeds `[q, k, q - k, vec(q ⊗ k)]` '
            "(3·8 + 8² = 88 inputs at embedding 8) where the default feeds "
            "`[q, k, q - k, q ⊙ k]` (32). "
            f"MovieLens-100K (755 users): {len(train):,} training and "
            f"{len(test):,} test examples (each user's last "
            f"{CONFIG['test_ratings']} ratings, by time), {labels.mean():.1%} "
            f"positive; {args.epochs} epoch(s), {args.seeds} initialization "
            "seed(s) (the same seeds for each interaction), otherwise the "
            "configuration of the module docstring"
            + (", one shared table" if args.shared_table else "")
            + f", XLA {args.xla}. The DeLong intervals (of an AUC, and of the "
            "paired difference on the same seed and test examples) are averaged "
            f"over the seeds. Load average (1 min): {min(loads):.1f}-"
            f"{max(loads):.1f} (2 shared cores).\n\n"
            + results_table(labels, results, baseline)
            + f"\n\nMean fit wall time: {walls}."
        )
        command = (
            f"python -m benchmarks.bench_din --interactions {args.interactions} "
            f"--epochs {args.epochs} --seeds {args.seeds} --xla {args.xla}"
            + (" --shared-table" if args.shared_table else "")
        )
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        write_section("bench_din_interaction", body, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
