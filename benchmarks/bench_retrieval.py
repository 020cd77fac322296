"""Sequential retrieval on MovieLens-100K: keras_attn's two-tower model trained with
its own retrieval task under Keras 3 and under Keras 2, and with TensorFlow
Recommenders' task under Keras 2, against the most-popular baseline.

Examples from `keras_attn.datasets.load_movielens_sequences`: one per rating of the
755 users of ../shared/data/movielens_100k (every rating is an interaction), the
target the rated item, the history the user's 50 most recent items rated strictly
earlier; a user's first rating (no history) is left out. Split by time within each
user as `load_movielens_din`'s: each user's last 10 ratings are the test part, used
for the figures below and nothing else.

The model (`SequentialRetrieval`): a query tower of item and position embeddings
and causal pre-LN `TransformerEncoderBlock`s (SASRec style), the last position's
state as the query; a candidate tower of the item's id embedding and its genres;
an in-batch softmax with the logQ correction and accidental hits removed. Three
paths train the same towers from the same seed, each in a fresh process: the
TFRS path (`tfrs.tasks.Retrieval`, Keras 2, which sums the batch's losses),
keras_attn's `RetrievalTask` under Keras 2, and under Keras 3 (a mean over the
batch; Adam makes the two scales nearly the same step). Its settings are fixed in
CONFIG; the choices among the variants of `--select` were made on a validation
part (each user's last 10 training ratings, held out of training) with the TFRS
path, never on the test part.

Scores: every one of the 1,682 items is ranked for each test example; the items
the user rated before the target (all of them, not only the 50 of the history)
are excluded from the ranking for both the model and the baseline (a second table
ranks without excluding anything). Most popular: items by their count among the
training targets, ties to the lower index. Recall@k: the share of test examples
whose target is in the top k; NDCG@10 with the one relevant item. 95% intervals:
2.5% and 97.5% quantiles over 1,000 resamplings of the users (all ten test
examples of a drawn user together), also for the paired difference to the
baseline and for the paired difference of each keras_attn path to the TFRS path
on the same test examples.

    python -m benchmarks.bench_retrieval [--epochs N] [--seed 0] [--no-write]
    TF_USE_LEGACY_KERAS=1 python -m benchmarks.bench_retrieval --select

The three paths run one after the other in fresh processes (Keras 2 for the first
two). Reads ../shared/data/movielens_100k (see DATA.md); skips without it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._ctr_runs import run_process
from benchmarks._results import machine
from benchmarks._stats import bootstrap_interval

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "movielens_100k"
CONFIG = dict(
    history_length=20,
    test_ratings=10,
    embedding_dim=64,
    num_layers=2,
    num_heads=2,
    dropout=0.2,
    pooling="last",
    temperature=None,
    remove_accidental_hits=True,
    sampling_correction=True,
    batch_size=256,
    learning_rate=1e-3,
    epochs=8,
)
# --select: each variant changes CONFIG in one place.
VARIANTS = {
    "CONFIG": {},
    "no logQ sampling correction": {"sampling_correction": False},
    "accidental hits kept as negatives": {"remove_accidental_hits": False},
    "history of 50": {"history_length": 50},
    "attention pooling": {"pooling": "attention"},
}
KS = (10, 50)


def _paired_difference(ranks_a, ranks_b, users, k, num_bootstrap=1000, seed=0):
    """Mean of hit@k(a) - hit@k(b) with its per-user bootstrap 95% interval."""
    diff = (np.asarray(ranks_a) < k).astype(float) - (np.asarray(ranks_b) < k)
    unique, user_of = np.unique(users, return_inverse=True)
    sums = np.bincount(user_of, weights=diff, minlength=len(unique))
    counts = np.bincount(user_of, minlength=len(unique))
    low, high = bootstrap_interval(
        lambda pick: sums[pick].sum() / counts[pick].sum(),
        len(unique),
        num_bootstrap,
        seed,
    )
    return float(diff.mean()), low, high


#: The trained paths: (row label, TFRS task, Keras 2).
PATHS = {
    "tfrs": ("TFRS path: tfrs.tasks.Retrieval, Keras 2 (tf_keras)", True, True),
    "native_keras2": ("keras_attn RetrievalTask, Keras 2 (tf_keras)", False, True),
    "native_keras3": ("keras_attn RetrievalTask, Keras 3", False, False),
}


def run(
    config: dict, seed: int, validation: bool, epoch_log=None, tfrs_task=False
) -> dict:
    """Trains one model; its scores on the test (or validation) part, with the
    baseline's, excluding and not excluding the seen items."""
    from keras_attn.backend import keras
    from keras_attn.datasets import load_movielens_sequences
    from keras_attn.models.retrieval import (
        SequentialRetrieval,
        build_sequential_retrieval,
        fit_retrieval_model,
        most_popular_scores,
        top_k_metrics,
    )
    from keras_attn.training import EpochTimer

    data = load_movielens_sequences(
        DATA,
        history_length=config["history_length"],
        test_ratings=config["test_ratings"],
        validation_ratings=config["test_ratings"] if validation else 0,
    )
    part = data.validation if validation else data.test
    keras.utils.set_random_seed(seed)
    model = build_sequential_retrieval(
        data.num_items,
        item_genres=data.item_genres,
        **{
            k: config[k]
            for k in (
                "history_length",
                "embedding_dim",
                "num_layers",
                "num_heads",
                "dropout",
                "pooling",
                "temperature",
                "remove_accidental_hits",
            )
        },
    )
    if tfrs_task:
        import tensorflow_recommenders as tfrs

        model = SequentialRetrieval(
            model.query_tower,
            model.candidate_tower,
            task=tfrs.tasks.Retrieval(
                temperature=config["temperature"],
                remove_accidental_hits=config["remove_accidental_hits"],
            ),
        )
    timer = EpochTimer()
    callbacks = [timer]
    if epoch_log:  # after the epoch's timing
        callbacks.append(
            keras.callbacks.LambdaCallback(
                on_epoch_end=lambda epoch, logs: epoch_log(
                    epoch, logs, model, data, part
                )
            )
        )
    start = time.perf_counter()
    fit_retrieval_model(
        model,
        data.train,
        epochs=config["epochs"],
        batch_size=config["batch_size"],
        learning_rate=config["learning_rate"],
        sampling_correction=config["sampling_correction"],
        seed=seed,
        callbacks=callbacks,
        verbose=0,
    )
    wall = time.perf_counter() - start
    scores = model.scores(part.history)
    popular = most_popular_scores(data.train.item, data.num_items)
    seen = data.seen_mask(part)
    out = {"wall_s": wall, "epoch_s": timer.times, "n_train": len(data.train)}
    out["users"] = part.user
    out["n_eval"], out["n_users"] = len(part), len(np.unique(part.user))
    for exclusion, mask in (("excluded", seen), ("kept", None)):
        for name, s in (("model", scores), ("popular", popular)):
            out[(exclusion, name)] = top_k_metrics(
                s, part.item, part.user, exclude=mask, ks=KS, seed=seed
            )
        out[(exclusion, "difference")] = {
            f"recall@{k}": _paired_difference(
                out[(exclusion, "model")]["ranks"],
                out[(exclusion, "popular")]["ranks"],
                part.user,
                k,
            )
            for k in KS
        }
    return out


def _interval(value) -> str:
    v, low, high = value
    return f"{v:.4f} ({low:.4f}-{high:.4f})"


def _signed(value) -> str:
    v, low, high = value
    return f"{v:+.4f} ({low:+.4f} to {high:+.4f})"


def _table(results: dict, exclusion: str) -> str:
    """One row per path (and the baseline): recall@10/@50 and NDCG@10 with their
    per-user intervals, and recall@10 minus the TFRS path's, paired."""
    metrics = [f"recall@{k}" for k in KS] + ["ndcg@10"]
    header = "| model | " + " | ".join(metrics)
    header += " | recall@10 minus the TFRS path's, paired | fit wall s |\n"
    header += "|---|" + "---|" * (len(metrics) + 2) + "\n"
    rows = []
    base = results.get("tfrs")
    for path, r in results.items():
        m = r[exclusion]
        diff = ""
        if base is not None and path != "tfrs":
            diff = _signed(
                _paired_difference(
                    np.load(r[f"ranks_{exclusion}"]),
                    np.load(base[f"ranks_{exclusion}"]),
                    np.load(r["users"]),
                    10,
                )
            )
        rows.append(
            f"| {PATHS[path][0]} | "
            + " | ".join(_interval(m[k]) for k in metrics)
            + f" | {diff} | {r['wall_s']:.0f} |"
        )
    popular = next(iter(results.values()))[f"popular_{exclusion}"]
    rows.append(
        "| most popular | "
        + " | ".join(_interval(popular[k]) for k in metrics)
        + " | | |"
    )
    return header + "\n".join(rows)


def worker() -> None:
    """One path in this process (`python -c` with out_dir, path, seed, epochs):
    prints its JSON result; the ranks and users go to `.npy` files."""
    out_dir, path, seed, epochs = sys.argv[1:5]
    config = {**CONFIG, "epochs": int(epochs)}
    r = run(config, int(seed), validation=False, tfrs_task=PATHS[path][1])
    result = {
        "wall_s": r["wall_s"],
        "epoch_s": r["epoch_s"],
        "n_train": r["n_train"],
        "n_eval": r["n_eval"],
        "n_users": r["n_users"],
        "users": str(Path(out_dir) / "users.npy"),
    }
    np.save(result["users"], r["users"])
    for exclusion in ("excluded", "kept"):
        model = r[(exclusion, "model")]
        result[f"ranks_{exclusion}"] = str(Path(out_dir) / f"{path}_{exclusion}.npy")
        np.save(result[f"ranks_{exclusion}"], model.pop("ranks"))
        result[exclusion] = model
        popular = dict(r[(exclusion, "popular")])
        popular.pop("ranks")
        result[f"popular_{exclusion}"] = popular
    print(json.dumps(result))


def select(args) -> None:
    """Each variant's validation recall (the test part is not read)."""
    from keras_attn.models.retrieval import top_k_metrics

    lines = []
    for name, change in VARIANTS.items():
        config = {**CONFIG, **change, "epochs": args.epochs or CONFIG["epochs"]}
        curve = []

        def epoch_log(epoch, logs, model, data, part, curve=curve):
            recall = top_k_metrics(
                model.scores(part.history),
                part.item,
                part.user,
                exclude=data.seen_mask(part),
                ks=(10,),
                ndcg_k=None,
                num_bootstrap=1,
            )["recall@10"][0]
            curve.append(recall)

        legacy = os.environ.get("TF_USE_LEGACY_KERAS") in ("1", "true", "True")
        r = run(config, seed=0, validation=True, epoch_log=epoch_log, tfrs_task=legacy)
        m, p = r[("excluded", "model")], r[("excluded", "popular")]
        line = (
            f"| {name} | {_interval(m['recall@10'])} | {_interval(m['recall@50'])} "
            f"| {_interval(m['ndcg@10'])} | {', '.join(f'{x:.3f}' for x in curve)} "
            f"| {np.mean(r['epoch_s']):.1f} |"
        )
        print(line, f"(most popular recall@10 {p['recall@10'][0]:.4f})", flush=True)
        lines.append(line)
    body = (
        f"Choices of the retrieval benchmark's settings, on the validation part "
        f"(each user's last {CONFIG['test_ratings']} training ratings, held out of "
        f"training; the test part is not read): {r['n_train']:,} training and "
        f"{r['n_eval']:,} validation examples, seen items excluded, "
        f"{config['epochs']} epochs, seed 0; each row changes CONFIG "
        f"(the module's) in one place. Most popular on the same part: recall@10 "
        f"{_interval(p['recall@10'])}. Load average (1 min) at the end: "
        f"{os.getloadavg()[0]:.1f}.\n\n"
        "| variant | recall@10 | recall@50 | NDCG@10 | recall@10 after each epoch "
        "| s per epoch |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(lines)
    )
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        epochs = f" --epochs {args.epochs}" if args.epochs else ""
        write_section(
            "bench_retrieval_select",
            body,
            "TF_USE_LEGACY_KERAS=1 python -m benchmarks.bench_retrieval --select"
            + epochs,
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    parser.add_argument("--select", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"{DATA} is absent: this benchmark reads ../shared/data", file=sys.stderr)
        return 0
    if args.select:
        select(args)
        return 0
    config = {**CONFIG, "epochs": args.epochs or CONFIG["epochs"]}
    script = "from benchmarks.bench_retrieval import worker; worker()"
    loads, results = [os.getloadavg()[0]], {}
    with tempfile.TemporaryDirectory() as out_dir:
        for path in args.paths:
            r = run_process(
                script,
                [path, args.seed, config["epochs"]],
                legacy=PATHS[path][2],
                out_dir=out_dir,
            )
            loads.append(os.getloadavg()[0])
            results[path] = r
            print(
                f"{path}: recall@10 {_interval(r['excluded']['recall@10'])}, "
                f"fit {r['wall_s']:.0f} s",
                file=sys.stderr,
                flush=True,
            )
        tables = {e: _table(results, e) for e in ("excluded", "kept")}
    first = next(iter(results.values()))
    epoch_s = {
        path: np.mean(r["epoch_s"][1:] or r["epoch_s"]) for path, r in results.items()
    }
    body = (
        f"MovieLens-100K, {first['n_users']} users: {first['n_train']:,} training "
        f"and {first['n_eval']:,} test examples (each user's last "
        f"{config['test_ratings']} ratings, by time; every rating an interaction), "
        f"all {1682:,} items ranked for each. The model: CONFIG of the module "
        f"(embedding {config['embedding_dim']}, {config['num_layers']} causal pre-LN "
        f"Transformer blocks of {config['num_heads']} heads over the last "
        f"{config['history_length']} items, the last position's state as the query, "
        f"item tower of id + genres; in-batch softmax over batches of "
        f"{config['batch_size']}, accidental hits removed: "
        f"{config['remove_accidental_hits']}, logQ correction: "
        f"{config['sampling_correction']}; Adam {config['learning_rate']}, "
        f"{config['epochs']} epochs, chosen beforehand; the variants were compared on "
        f"a validation part only: the bench_retrieval_select section). One run per "
        f"path, initialization seed {args.seed}, each in a fresh process, one after "
        "the other; seconds per epoch after the first: "
        + ", ".join(f"{path} {s:.1f}" for path, s in epoch_s.items())
        + f". {machine(loads)} 95% intervals: per-user bootstrap (1,000 "
        "resamplings of the users), also for the paired differences.\n\n"
        "Items the user rated before the target excluded from the ranking (all "
        "models):\n\n" + tables["excluded"] + "\n\nNothing excluded (all models):"
        "\n\n" + tables["kept"]
    )
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        epochs = f" --epochs {args.epochs}" if args.epochs else ""
        write_section(
            "bench_retrieval",
            body,
            f"python -m benchmarks.bench_retrieval --seed {args.seed}{epochs}",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
