"""Listwise ranking on MovieLens-100K: one scoring model trained with a pointwise
loss, with keras_attn's pairwise and listwise losses, and with keras-rs' losses.

Data: ../shared/data/movielens_100k (755 users). Each user's rated movies form a
list graded by the rating (1-5). Split by time within each user: the user's last
30% of ratings (at least 5) are the test list, used for the figures below and
nothing else; the earlier ones are for training, cut into lists of 20 movies,
reshuffled each epoch (a user's last, shorter list padded with relevance -1).

The model, the same for every loss: a user embedding and an item vector (the
movie's id embedding and its 19 genre flags through a Dense layer, then a Dense
layer), 32 wide; an item's score is their dot product plus an item bias and a
user bias (the biases let the pointwise regression fit the rating scale; a list's
order ignores the user bias). Embedding 32, batches of 32 lists (fixed
beforehand), Adam or AdamW. Each loss's learning rate (3e-4, 1e-3 or 3e-3) and number of
epochs (5, 10, 20, 40 or 80; a fit stops once its validation NDCG@10 has fallen
at 2 checkpoints in a row) are chosen on a validation part, never on the test
lists (`--validate`: of each user's ratings before the test part, the last 30%,
at least 5, are the validation list; RESULTS.md, bench_ranking_validation), then
at that rate its AdamW weight decay (0, i.e. Adam, 0.1, 1, 3 or 10; the grid
widened while a loss chose its edge) and epochs the same way (`--validate
--decay`; bench_ranking_validation_decay, _decay_3, _decay_10): one
regularization lever, the same grid and rule for every loss, the pointwise one
included. The same loss from keras-rs or under Keras 2 takes the same choice.
With Adam alone the test NDCG@10 was 0.7806 pointwise, 0.7774 ListMLE (paired
-0.0032, -0.0092 to +0.0027), 0.7715 softmax, 0.7800 pairwise (2026-12-05,
AMD EPYC, load 6.5-8.8): the model had no regularization and the listwise
losses overfitted first. Before any validation, with Adam at 1e-3 and 20
epochs for all, it was 0.7750 pointwise, 0.7414 softmax, 0.7660 ListMLE
(keras-rs' the same), 0.7750 pairwise (load 6.4-7.8). The losses:
pointwise: the mean squared error of the rating over a list's real movies;
keras_attn's `ListwiseSoftmaxLoss` (on the ratings, and on the gains `2^rating -
1` as its targets), `ListMLELoss` and `PairwiseLogisticLoss`; keras-rs'
`ListMLELoss` and `PairwiseLogisticLoss` (Keras 3 only).

Score: NDCG@10 of each user's test list ranked by the model's scores, gains
`2^rating - 1` (TF-Ranking's and keras-rs' default), the mean over users with its
95% interval (2.5% and 97.5% quantiles over 1,000 resamplings of the users), and
the paired difference to the pointwise model's on the same users. Every row is a
fresh process (Keras 2 rows under TF_USE_LEGACY_KERAS=1), one seed.

    python -m benchmarks.bench_ranking [--seed 0] [--epochs N] [--no-write]
    python -m benchmarks.bench_ranking --validate [--seed 0] [--no-write]
    python -m benchmarks.bench_ranking --validate --decay [--decays D ...]
        [--section NAME] [--seed 0] [--no-write]

keras-rs (`pip install keras-rs`, Keras 3 only) is a benchmark-only dependency:
without it its rows are left out. Reads ../shared/data/movielens_100k (see DATA.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

from benchmarks._ctr_runs import SHARED_DATA, run_process
from benchmarks._results import machine
from benchmarks._stats import bootstrap_mean

DATA = SHARED_DATA / "movielens_100k"
CONFIG = dict(
    test_share=0.3,
    min_test=5,
    list_size=20,
    embedding_dim=32,
    batch_lists=32,
)
#: Each row: (label, library of the loss, loss name, Keras 2).
RUNS = {
    "pointwise": ("pointwise: squared error of the rating", "bench", "mse", False),
    "softmax": ("keras_attn ListwiseSoftmaxLoss", "keras_attn", "softmax", False),
    "list_mle": ("keras_attn ListMLELoss", "keras_attn", "list_mle", False),
    "softmax_gain": (
        "keras_attn ListwiseSoftmaxLoss, targets 2^rating - 1",
        "keras_attn",
        "softmax_gain",
        False,
    ),
    "pairwise": ("keras_attn PairwiseLogisticLoss", "keras_attn", "pairwise", False),
    "rs_list_mle": ("keras-rs ListMLELoss", "keras_rs", "list_mle", False),
    "rs_pairwise": ("keras-rs PairwiseLogisticLoss", "keras_rs", "pairwise", False),
    "softmax_k2": (
        "keras_attn ListwiseSoftmaxLoss, Keras 2 (tf_keras)",
        "keras_attn",
        "softmax",
        True,
    ),
    "list_mle_k2": (
        "keras_attn ListMLELoss, Keras 2 (tf_keras)",
        "keras_attn",
        "list_mle",
        True,
    ),
}


def _cut(length: int) -> int:
    """Where a user's ratings (in time order) split: the last share, at least
    `min_test`, after it."""
    return length - max(CONFIG["min_test"], round(CONFIG["test_share"] * length))


#: The settings compared on the validation part (`--validate`), for every loss.
LEARNING_RATES = (3e-4, 1e-3, 3e-3)
EPOCH_CHECKPOINTS = (5, 10, 20, 40, 80)
#: A validation fit stops once its NDCG@10 has fallen at this many checkpoints in
#: a row (the later cells are left blank): the same rule for every loss.
PATIENCE = 2
#: AdamW's decoupled weight decay (each step, every trainable weight shrinks by
#: learning rate x decay; 0 is plain Adam), tried at each loss's chosen learning
#: rate (`--validate --decay`): the one regularization lever, the same for every loss.
WEIGHT_DECAYS = (0.0, 0.1, 1.0, 3.0, 10.0)
#: Rows whose loss `--validate` tunes (the others share their loss's choice).
VALIDATED = ("pointwise", "softmax", "softmax_gain", "list_mle", "pairwise")
#: Each loss's (learning rate, epochs, weight decay) of best validation NDCG@10
#: (RESULTS.md: bench_ranking_validation for the rate, then at that rate
#: bench_ranking_validation_decay, _decay_3 and _decay_10 for the decay and the
#: epochs); the same loss in keras-rs and under Keras 2 shares it.
CHOSEN = {
    "mse": (1e-3, 40, 0.0),
    "softmax": (1e-3, 40, 3.0),
    "softmax_gain": (3e-4, 20, 3.0),
    "list_mle": (3e-4, 80, 3.0),
    "pairwise": (3e-4, 40, 1.0),
}


def load(validation: bool = False):
    """(train, test): per user, `(item indices, ratings)` in time order; the item
    genre table `(num_items + 1, 19)` and the numbers of users and items. With
    `validation`, the training part split again the same way (its last 30%, at
    least 5, as the lists to score) and the test part left unread."""
    import pandas as pd

    from keras_attn.datasets import load_movielens_sequences

    items = load_movielens_sequences(DATA, history_length=1)
    index = {raw: i + 1 for i, raw in enumerate(items.items["item_id"])}
    ratings = pd.read_csv(
        DATA / "ratings_dev.tsv.gz",
        sep="\t",
        names=["user", "item", "rating", "time"],
    ).sort_values(["user", "time", "item"], kind="stable")
    users = {u: i for i, u in enumerate(sorted(ratings["user"].unique()))}
    train, test = [], []
    for user, rows in ratings.groupby("user", sort=True):
        item = np.array([index[i] for i in rows["item"]], "int32")
        rating = rows["rating"].to_numpy("float32")
        cut = _cut(len(item))
        if validation:  # the test part is dropped unread, the rest split again
            item, rating = item[:cut], rating[:cut]
            cut = _cut(len(item))
        train.append((users[user], item[:cut], rating[:cut]))
        test.append((users[user], item[cut:], rating[cut:]))
    return train, test, items.item_genres, len(users), items.num_items


def training_lists(train, rng):
    """One epoch's lists: each user's training movies shuffled and cut into lists
    of `list_size` (the last one padded: item 0, relevance -1)."""
    size = CONFIG["list_size"]
    users, items, labels = [], [], []
    for user, item, rating in train:
        order = rng.permutation(len(item))
        for start in range(0, len(order), size):
            chunk = order[start : start + size]
            pad = size - len(chunk)
            users.append(user)
            items.append(np.pad(item[chunk], (0, pad)))
            labels.append(np.pad(rating[chunk], (0, pad), constant_values=-1.0))
    perm = rng.permutation(len(users))
    return (
        {
            "user": np.asarray(users, "int32")[perm],
            "items": np.stack(items)[perm],
        },
        np.stack(labels).astype("float32")[perm],
    )


def test_lists(test):
    """Every user's test list, padded to the longest: inputs and relevance."""
    width = max(len(item) for _, item, _ in test)
    items = np.stack([np.pad(item, (0, width - len(item))) for _, item, _ in test])
    labels = np.stack(
        [np.pad(r, (0, width - len(r)), constant_values=-1.0) for _, _, r in test]
    )
    users = np.array([u for u, _, _ in test], "int32")
    return {"user": users, "items": items.astype("int32")}, labels.astype("float32")


def ndcg_at_10(labels, scores) -> np.ndarray:
    """Per list: NDCG@10 with gains 2^y - 1 over the real items (y >= 0), written
    out here (the library's metric is checked against it in the tests)."""
    values = []
    discounts = 1.0 / np.log2(np.arange(2, 12))
    for y, s in zip(labels, scores):
        real = y >= 0
        y, s = y[real], s[real]
        ranked = y[np.argsort(-s, kind="stable")][:10]
        ideal = np.sort(y)[::-1][:10]
        idcg = ((2.0**ideal - 1) * discounts[: len(ideal)]).sum()
        dcg = ((2.0**ranked - 1) * discounts[: len(ranked)]).sum()
        values.append(dcg / idcg if idcg > 0 else 0.0)
    return np.array(values)


def build_model(num_users, num_items, genres):
    from keras_attn.backend import keras

    dim = CONFIG["embedding_dim"]
    user = keras.Input((), dtype="int32", name="user")
    items = keras.Input((None,), dtype="int32", name="items")
    genre_table = keras.layers.Embedding(
        num_items + 1, genres.shape[1], trainable=False, name="genres"
    )
    item_vector = keras.layers.Dense(dim, name="item_vector")(
        keras.layers.Concatenate()(
            [
                keras.layers.Embedding(num_items + 1, dim, name="item_id")(items),
                keras.layers.Dense(dim, activation="relu")(genre_table(items)),
            ]
        )
    )  # (batch, list, dim)
    user_vector = keras.layers.Embedding(num_users, dim, name="user_id")(user)
    dot = keras.layers.Dot(axes=(1, 2))([user_vector, item_vector])  # (batch, list)
    item_bias = keras.layers.Reshape((-1,))(
        keras.layers.Embedding(num_items + 1, 1, name="item_bias")(items)
    )
    user_bias = keras.layers.Embedding(num_users, 1, name="user_bias")(user)
    scores = keras.layers.Add()([dot, item_bias, user_bias])
    model = keras.Model({"user": user, "items": items}, scores)
    genre_table.set_weights([genres])  # the 19 genre flags of each movie, frozen
    return model


def _loss(library: str, name: str):
    from keras_attn.backend import tf

    if library == "keras_rs":
        import keras_rs

        return {
            "list_mle": keras_rs.losses.ListMLELoss,
            "pairwise": keras_rs.losses.PairwiseLogisticLoss,
        }[name]()
    if library == "keras_attn":
        from keras_attn import losses

        return {
            "softmax": losses.ListwiseSoftmaxLoss,
            "softmax_gain": losses.ListwiseSoftmaxLoss,  # on gain targets
            "list_mle": losses.ListMLELoss,
            "pairwise": losses.PairwiseLogisticLoss,
        }[name]()

    def pointwise(y_true, y_pred):
        real = tf.cast(y_true >= 0, tf.float32)
        error = tf.square(tf.cast(y_pred, tf.float32) - y_true) * real
        return tf.math.divide_no_nan(
            tf.reduce_sum(error, axis=-1), tf.reduce_sum(real, axis=-1)
        )

    return pointwise


def gain_targets(labels):
    """`2^y - 1` of the real items' grades; padding (-1) stays -1."""
    return np.where(labels >= 0, 2.0**labels - 1.0, -1.0).astype("float32")


def _fallen(values: list) -> bool:
    """Whether the last `PATIENCE` checkpoints each fell below the one before."""
    tail = values[-PATIENCE - 1 :]
    return len(tail) > PATIENCE and all(b < a for a, b in zip(tail, tail[1:]))


def run_one(
    out_dir: str,
    which: str,
    seed: int,
    epochs: int | None = None,
    learning_rate: float | None = None,
    validation: bool = False,
    weight_decay: float | None = None,
) -> dict:
    """One row: trains and scores the test lists; with `validation`, trains on the
    fit part and scores the validation lists at each of `EPOCH_CHECKPOINTS`
    (`epochs` is then the last of them)."""
    from keras_attn.backend import keras
    from keras_attn.metrics import NDCG

    _, library, loss_name, _ = RUNS[which]
    chosen_lr, chosen_epochs, chosen_decay = CHOSEN[loss_name]
    learning_rate = learning_rate or chosen_lr
    weight_decay = chosen_decay if weight_decay is None else weight_decay
    epochs = max(EPOCH_CHECKPOINTS) if validation else (epochs or chosen_epochs)
    keras.utils.set_random_seed(seed)
    train, test, genres, num_users, num_items = load(validation)
    model = build_model(num_users, num_items, genres)
    optimizer = (
        keras.optimizers.AdamW(learning_rate, weight_decay=weight_decay)
        if weight_decay
        else keras.optimizers.Adam(learning_rate)
    )
    model.compile(optimizer, loss=_loss(library, loss_name))
    x_test, labels = test_lists(test)
    rng = np.random.default_rng(seed)
    checkpoints = {}
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        x, y = training_lists(train, rng)
        if loss_name.endswith("_gain"):
            y = gain_targets(y)
        model.fit(x, y, batch_size=CONFIG["batch_lists"], epochs=1, verbose=0)
        if validation and epoch in EPOCH_CHECKPOINTS:
            scores = model.predict(x_test, batch_size=64, verbose=0)
            checkpoints[epoch] = float(ndcg_at_10(labels, scores).mean())
            if _fallen(list(checkpoints.values())):
                break
    wall = time.perf_counter() - start
    if validation:
        return {
            "validation": checkpoints,
            "learning_rate": learning_rate,
            "weight_decay": weight_decay,
        }
    scores = model.predict(x_test, batch_size=64, verbose=0)
    per_user = ndcg_at_10(labels, scores)
    metric = NDCG(k=10)
    metric.update_state(labels, scores)
    path = os.path.join(out_dir, f"{which}.npy")
    np.save(path, per_user)
    return {
        "ndcg": path,
        "library_ndcg": float(metric.result()),
        "wall_s": wall,
        "epochs": epochs,
        "learning_rate": learning_rate,
        "weight_decay": weight_decay,
        "train_lists": len(y),
        "test_users": len(labels),
        "test_items": int((labels >= 0).sum()),
    }


_SCRIPT = r"""
import json, sys
from benchmarks.bench_ranking import run_one
out_dir, which, seed, epochs, learning_rate, validation, decay = sys.argv[1:8]
try:
    import keras_rs  # noqa: F401
except ImportError:
    if which.startswith("rs_"):
        print(json.dumps(None)); sys.exit(0)
print(json.dumps(run_one(
    out_dir, which, int(seed), int(epochs) or None, float(learning_rate) or None,
    validation == "1", None if decay == "chosen" else float(decay),
)))
"""


def validate(args) -> int:
    """Each loss of `VALIDATED` (those in `--runs`) at each learning rate, scored on
    the validation lists at each checkpoint; records the table and each loss's best
    setting. With `args.decay`, each loss at its chosen rate (`CHOSEN`) with each
    of `WEIGHT_DECAYS` instead."""
    loads, rows, best = [os.getloadavg()[0]], [], {}
    with tempfile.TemporaryDirectory() as out_dir:
        for which in [w for w in VALIDATED if w in args.runs]:
            loss = RUNS[which][2]
            grid = (
                [(CHOSEN[loss][0], decay) for decay in args.decays]
                if args.decay
                else [(rate, 0.0) for rate in LEARNING_RATES]
            )
            for learning_rate, decay in grid:
                r = run_process(
                    _SCRIPT,
                    [which, args.seed, 0, learning_rate, 1, decay],
                    legacy=False,
                    out_dir=out_dir,
                )
                loads.append(os.getloadavg()[0])
                values = {int(k): v for k, v in r["validation"].items()}
                print(which, learning_rate, decay, values, file=sys.stderr, flush=True)
                setting = (learning_rate, decay) if args.decay else (learning_rate,)
                for epochs, value in values.items():
                    if value > best.get(loss, (None, -1.0))[1]:
                        best[loss] = ((*setting, epochs), value)
                rows.append(
                    f"| {RUNS[which][0]} | "
                    + "".join(f"{v:g} | " for v in setting)
                    + " | ".join(
                        f"{values[e]:.4f}" if e in values else ""
                        for e in EPOCH_CHECKPOINTS
                    )
                    + " |"
                )
    if args.decay:
        what = (
            "Each loss's AdamW weight decay (0: Adam) and number of epochs chosen on "
            "the validation part, at the learning rate chosen on it with Adam (the "
            "bench_ranking_validation section)"
        )
        head = "| loss | learning rate | weight decay | "
    else:
        what = (
            "Each loss's Adam learning rate and number of epochs chosen on a "
            "validation part"
        )
        head = "| loss | learning rate | "
    body = (
        f"{what}, never on the test lists: of each user's ratings before the test "
        f"part (time order), the last {CONFIG['test_share']:.0%} (at least "
        f"{CONFIG['min_test']}) are the validation list and the earlier ones the "
        f"training lists; seed {args.seed}, the rest as the bench_ranking section. "
        f"{machine(loads)} Mean NDCG@10 over the users' validation lists after "
        f"each number of epochs (a fit stopped once it had fallen at {PATIENCE} "
        "checkpoints in a row: the later cells blank):\n\n"
        + head
        + " | ".join(f"{e} epochs" for e in EPOCH_CHECKPOINTS)
        + " |\n|---|"
        + "---|" * (len(EPOCH_CHECKPOINTS) + len(head.split("|")) - 3)
        + "\n"
        + "\n".join(rows)
        + "\n\nChosen (highest): "
        + "; ".join(
            f"{loss}: "
            + ", ".join(f"{v:g}" for v in setting[:-1])
            + f", {setting[-1]} epochs ({value:.4f})"
            for loss, (setting, value) in best.items()
        )
        + "."
    )
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        runs = [w for w in VALIDATED if w in args.runs]
        default_section = "bench_ranking_validation" + ("_decay" if args.decay else "")
        args.section = args.section or default_section
        flags = " --decay" if args.decay else ""
        if args.decay and tuple(args.decays) != WEIGHT_DECAYS:
            flags += f" --decays {' '.join(f'{d:g}' for d in args.decays)}"
        if args.section != default_section:
            flags += f" --section {args.section}"
        if runs != list(VALIDATED):
            flags += f" --runs {' '.join(runs)}"
        write_section(
            args.section,
            body,
            f"python -m benchmarks.bench_ranking --validate{flags} --seed {args.seed}",
        )
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--epochs", type=int, default=0, help="all rows (default: each loss's CHOSEN)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=RUNS)
    parser.add_argument("--validate", action="store_true")
    parser.add_argument(
        "--decay",
        action="store_true",
        help="with --validate: WEIGHT_DECAYS at each loss's chosen learning rate",
    )
    parser.add_argument(
        "--decays", type=float, nargs="+", default=WEIGHT_DECAYS, help="with --decay"
    )
    parser.add_argument(
        "--section", default=None, help="the RESULTS.md section (another seed, say)"
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"{DATA} is absent: this benchmark reads ../shared/data", file=sys.stderr)
        return 0
    if args.validate:
        return validate(args)
    loads, results = [os.getloadavg()[0]], {}
    with tempfile.TemporaryDirectory() as out_dir:
        for which in args.runs:
            r = run_process(
                _SCRIPT,
                [which, args.seed, args.epochs, 0, 0, "chosen"],
                legacy=RUNS[which][3],
                out_dir=out_dir,
            )
            loads.append(os.getloadavg()[0])
            if r is None:
                print(f"{which}: keras-rs is not installed, left out", file=sys.stderr)
                continue
            r["per_user"] = np.load(r["ndcg"])
            results[which] = r
            print(
                which,
                json.dumps({k: v for k, v in r.items() if k != "per_user"}),
                file=sys.stderr,
                flush=True,
            )
    base = results.get("pointwise")
    rows = []
    for which, r in results.items():
        value = bootstrap_mean(r["per_user"])
        diff = ""
        if base is not None and which != "pointwise":
            d = bootstrap_mean(r["per_user"] - base["per_user"])
            diff = f"{d[0]:+.4f} ({d[1]:+.4f} to {d[2]:+.4f})"
        rows.append(
            f"| {RUNS[which][0]} | {r['learning_rate']:g}, {r['weight_decay']:g}, "
            f"{r['epochs']} | "
            f"{value[0]:.4f} ({value[1]:.4f}-{value[2]:.4f}) | "
            f"{diff} | {r['library_ndcg']:.4f} | {r['wall_s']:.0f} |"
        )
    first = next(iter(results.values()))
    settings = (
        f"{args.epochs} epochs for every row"
        if args.epochs
        else "each loss's learning rate, AdamW weight decay (0: Adam) and epochs as "
        "chosen on a validation part (the bench_ranking_validation sections; the "
        "same loss from keras-rs or under Keras 2 takes its choice)"
    )
    body = (
        f"MovieLens-100K, {first['test_users']} users: each user's last "
        f"{CONFIG['test_share']:.0%} of ratings by time (at least "
        f"{CONFIG['min_test']}) as a test list ({first['test_items']:,} rated movies "
        f"in all), the earlier ones cut into {first['train_lists']:,} training lists "
        f"of {CONFIG['list_size']} each epoch. The model and its settings: the "
        f"module docstring (embedding {CONFIG['embedding_dim']}, batches of "
        f"{CONFIG['batch_lists']} lists), {settings}. One run per row, seed "
        f"{args.seed}, each in a fresh process (Keras 3 unless the row says Keras 2). "
        f"{machine(loads)} NDCG@10 with gains 2^rating - 1; 95% intervals over "
        "1,000 resamplings of the users; the `NDCG(k=10)` column is keras_attn's "
        "metric on the same scores (the same value: a check of the metric).\n\n"
        "| loss | learning rate, weight decay, epochs | test NDCG@10 (95%) | "
        "minus the pointwise model's, paired 95% | "
        "`keras_attn.metrics.NDCG(k=10)` | fit wall s |\n|---|---|---|---|---|---|\n"
        + "\n".join(rows)
    )
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        flags = f" --epochs {args.epochs}" if args.epochs else ""
        if args.runs != list(RUNS):
            flags += f" --runs {' '.join(args.runs)}"
        if args.section:
            flags += f" --section {args.section}"
        write_section(
            args.section or "bench_ranking",
            body,
            f"python -m benchmarks.bench_ranking{flags} --seed {args.seed}",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
