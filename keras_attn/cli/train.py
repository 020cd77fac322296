"""`keras-attn quickstart` and `keras-attn train ctr`: the CTR commands.

Registered in `keras_attn.cli.COMMANDS` by `add_quickstart` and `add_train`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

__all__ = ["add_quickstart", "add_train", "quickstart", "train_ctr"]


def _print_predictions(export_dir, rows, specs, tasks, show):
    """Reloads the export with TensorFlow alone and prints its predictions."""
    from keras_attn.features import to_dataset
    from keras_attn.serving import load_serving_fn

    serve = load_serving_fn(export_dir)
    feeds = next(iter(to_dataset(rows, specs, batch_size=len(rows))))
    outputs = serve(**feeds)
    print(f"\nPredictions of the SavedModel {export_dir} for {len(rows)} raw rows:")
    for i in range(len(rows)):
        values = {c: rows.iloc[i][c] for c in show if c in rows}
        raw = ", ".join(
            f"{c}={getattr(v, 'item', lambda v=v: v)()!r}" for c, v in values.items()
        )
        probs = "  ".join(
            f"{t.name}={float(outputs[t.name].numpy()[i, 0]):.3f}" for t in tasks
        )
        print(f"  [{raw}] -> {probs}")
    return outputs


def quickstart(args: argparse.Namespace) -> int:
    """Trains an MMoE (attention gate) on the shipped census sample, exports it,
    reloads the export and predicts three raw rows."""
    from keras_attn.datasets import census_features, census_tasks, load_census_sample
    from keras_attn.features import to_dataset
    from keras_attn.models import build_ctr_model
    from keras_attn.models.ctr import fit_ctr_model
    from keras_attn.serving import export

    start = time.time()
    df = load_census_sample()
    train, test = df.iloc[:4000], df.iloc[4000:]
    specs = census_features(train)
    tasks = census_tasks()
    print(
        f"Census-income sample (UCI, CC BY 4.0): {len(train)} training rows, "
        f"{len(test)} test rows, {len(specs)} features; tasks: "
        + ", ".join(f"{t.name} ({t.label} = {t.positive!r})" for t in tasks)
    )
    model = build_ctr_model(
        specs,
        tasks,
        embedding_dim=8,
        num_experts=4,
        expert_units=(32,),
        tower_units=(16,),
        gate="attention",
        name="census_mmoe",
    )
    # The raw rows are encoded once by the model's own preprocessing layers and the
    # rest of the model trains on the ids; `model` still takes raw values. (XLA
    # would compile longer than these few thousand rows take to train.)
    fit_ctr_model(
        model,
        specs,
        tasks,
        train,
        epochs=args.epochs,
        batch_size=256,
        seed=0,
        learning_rate=args.learning_rate,
        jit_compile=False,
        verbose=0 if args.quiet else 1,
    )
    test_ds = to_dataset(test, specs, tasks, batch_size=1000)
    logs = model.evaluate(test_ds, return_dict=True, verbose=0)
    print(
        "\nTest AUC: "
        + ", ".join(f"{t.name} {logs[f'{t.name}_auc']:.4f}" for t in tasks)
    )
    path = export(
        model,
        Path(args.output) / "census_mmoe",
        version=1,
        features=specs,
        overwrite=True,
    )
    print(f"Exported for TF Serving to {path}")
    rows = test.iloc[:3]
    _print_predictions(
        path,
        rows,
        specs,
        tasks,
        ["age", "education", "sex", "income_50k", "marital_stat"],
    )
    if args.text:
        from keras_attn.quickstart_text import run_text_quickstart

        run_text_quickstart(args.output, epochs=args.text_epochs, quiet=args.quiet)
    print(f"\nDone in {time.time() - start:.0f} s.")
    return 0


def add_quickstart(subparsers) -> None:
    parser = subparsers.add_parser(
        "quickstart",
        help="train an MMoE on the shipped census sample and a HAN on shipped movie "
        "reviews, export and serve them",
        description="Trains a multi-task MMoE with the attention gate on the census-"
        "income sample shipped in the package (tasks: income > 50K, never married), "
        "prints each task's test AUC, exports to OUTPUT/census_mmoe/1 for TF Serving, "
        "reloads that export with TensorFlow alone and prints its predictions for "
        "three raw rows; then does the same with a HAN on the movie reviews shipped "
        "in the package (OUTPUT/review_han/1, raw sentences in; skip with --no-text).",
    )
    parser.add_argument(
        "--epochs", type=int, default=8, help="CTR training epochs (default: 8)"
    )
    parser.add_argument(
        "--learning-rate", type=float, default=3e-3, help="Adam's (default: 0.003)"
    )
    parser.add_argument(
        "--output",
        default="saved_models",
        help="folder of the export (default: saved_models)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--text",
        dest="text",
        action="store_true",
        default=True,
        help="then also train a HAN on the movie-review sample shipped in the "
        "package, print its test accuracy, export it to OUTPUT/review_han/1 and "
        "classify raw sentences with the export (the default)",
    )
    parser.add_argument(
        "--no-text", dest="text", action="store_false", help="skip the text part"
    )
    parser.add_argument(
        "--text-epochs",
        type=int,
        default=4,
        help="training epochs of the text part (default: 4)",
    )
    parser.set_defaults(func=quickstart)


#: `keras_attn.distribute.KINDS`, spelled out: `--help` loads no TensorFlow.
STRATEGIES = ("auto", "tpu", "multi_worker", "parameter_server", "mirrored", "default")


def add_distribute_arguments(parser) -> None:
    """`--strategy`, `--tpu`, `--backup-dir` and `--checkpoint-dir` (train ctr|text)."""
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="default",
        help="tf.distribute strategy (keras_attn.distribute.get_strategy); 'auto' "
        "reads TPU variables, TF_CONFIG and the local GPUs",
    )
    parser.add_argument("--tpu", help="TPU name or address for --strategy tpu")
    parser.add_argument(
        "--backup-dir",
        help="BackupAndRestore directory: a killed run started again resumes",
    )
    parser.add_argument(
        "--checkpoint-dir", help="write the weights after each epoch here"
    )


def _split(text):
    return [s.strip() for s in (text or "").split(",") if s.strip()]


def train_ctr(args: argparse.Namespace) -> int:
    """Infers feature specs from a CSV, trains a CTR model, exports it."""
    import pandas as pd

    from keras_attn.distribute import get_strategy
    from keras_attn.features import CategoricalFeature, infer_features
    from keras_attn.models import Task, build_ctr_model
    from keras_attn.models.ctr import fit_ctr_model
    from keras_attn.serving import export

    labels = _split(args.labels)
    if not labels:
        raise SystemExit("--labels: give at least one label column, e.g. click,buy")
    positives = {}
    for item in args.positive or []:
        column, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--positive takes COLUMN=VALUE. Received: {item!r}")
        positives.setdefault(column.strip(), []).append(value.strip())
    head = pd.read_csv(
        args.data, nrows=args.infer_rows, keep_default_na=False, na_values=[""]
    )
    missing = [c for c in labels if c not in head.columns]
    if missing:
        raise SystemExit(
            f"--labels: {missing} not in {args.data}. Columns: {list(head.columns)}"
        )
    overrides = {
        c: CategoricalFeature(c, hash_buckets=args.hash_buckets)
        for c in _split(args.hash)
    }
    specs = infer_features(
        head,
        labels=labels,
        exclude=_split(args.exclude),
        categorical=_split(args.categorical),
        numeric=_split(args.numeric),
        overrides=overrides,
    )
    tasks = [
        Task(
            "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in c),
            label=c,
            positive=positives.get(c),
        )
        for c in labels
    ]
    kwargs = dict(
        embedding_dim=args.embedding_dim,
        num_experts=args.num_experts,
        gate=args.gate,
        dropout=args.dropout,
    )
    if args.model == "autoint":
        kwargs.update(multitask="shared_bottom", interacting_layers=args.interacting)
    else:
        kwargs.update(multitask=args.model)
    strategy = get_strategy(args.strategy, tpu=args.tpu)
    with strategy.scope():  # the variables are replicated when they are made
        model = build_ctr_model(specs, tasks, **kwargs)
    # The CSV streams through the model's preprocessing layers in tf.data; the rest
    # of the model trains on the ids, on full batches. The export takes raw rows.
    history = fit_ctr_model(
        model,
        specs,
        tasks,
        args.data,
        epochs=args.epochs,
        batch_size=args.batch_size,
        validation_data=args.validation,
        seed=0,
        learning_rate=args.learning_rate,
        jit_compile=args.xla,
        verbose=1,
        strategy=strategy,
        backup_dir=args.backup_dir,
        checkpoint_dir=args.checkpoint_dir,
    )
    if args.validation:
        # The last epoch's evaluation of the core on the encoded rows (under a
        # strategy, Keras 3 cannot evaluate the raw-string model itself).
        logs = {k: v[-1] for k, v in history.history.items()}
        for t in tasks:
            # Keras names a single output's metrics without its name.
            key = f"val_{t.name}_auc" if len(tasks) > 1 else "val_auc"
            if key in logs:
                print(f"validation AUC {t.name}: {logs[key]:.4f}")
    if args.export:
        path = export(model, args.export, version=args.version, features=specs)
        print(f"Exported for TF Serving to {path}")
    return 0


def add_train(subparsers) -> None:
    train = subparsers.add_parser("train", help="train a model on your own data")
    kinds = train.add_subparsers(dest="kind", metavar="KIND")
    p = kinds.add_parser(
        "ctr",
        help="a (multi-task) CTR model from a CSV file",
        description="Trains a CTR model on a CSV file with a header row. Feature "
        "specs are inferred from the first --infer-rows rows (text, booleans and "
        "integers with few values become categorical by vocabulary; other numbers "
        "are standardized, with NaN imputed); the file is then streamed, so it need "
        "not fit in memory. The export takes raw rows and returns one probability "
        "per label.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--data", required=True, help="training CSV file (header row)")
    p.add_argument(
        "--labels",
        required=True,
        help="comma-separated label columns, one task each (0/1 numbers, or text "
        "with --positive)",
    )
    p.add_argument(
        "--positive",
        action="append",
        metavar="COLUMN=VALUE",
        help="the value of a text label column that means 1 (repeatable)",
    )
    p.add_argument(
        "--model",
        choices=["mmoe", "ple", "shared_bottom", "autoint"],
        default="mmoe",
        help="mmoe: shared experts with a gate per task; ple: progressive layered "
        "extraction; shared_bottom: one shared MLP; autoint: self-attention over "
        "fields, then a shared MLP",
    )
    p.add_argument(
        "--gate",
        choices=["softmax", "attention"],
        default="attention",
        help="MMoE/PLE gate: softmax over a linear map of the input (the paper), or "
        "a per-task context vector attending over the experts",
    )
    p.add_argument("--num-experts", type=int, default=8, help="MMoE experts")
    p.add_argument("--embedding-dim", type=int, default=8, help="size of field vectors")
    p.add_argument(
        "--interacting", type=int, default=2, help="AutoInt interacting layers"
    )
    p.add_argument("--dropout", type=float, default=0.0, help="dropout rate")
    p.add_argument("--epochs", type=int, default=5, help="training epochs")
    p.add_argument("--batch-size", type=int, default=512, help="batch size")
    p.add_argument("--learning-rate", type=float, default=1e-3, help="Adam's rate")
    p.add_argument(
        "--xla",
        action="store_true",
        help="compile the training step with XLA (after the preprocessing): faster "
        "epochs for a fixed compile time of some seconds, worth it on large data",
    )
    p.add_argument("--validation", help="optional validation CSV (same columns)")
    p.add_argument("--exclude", help="comma-separated columns to leave out")
    p.add_argument("--categorical", help="comma-separated columns forced categorical")
    p.add_argument("--numeric", help="comma-separated columns forced numeric")
    p.add_argument("--hash", help="comma-separated columns hashed, not by vocabulary")
    p.add_argument(
        "--hash-buckets", type=int, default=100_000, help="buckets of --hash columns"
    )
    p.add_argument(
        "--infer-rows",
        type=int,
        default=200_000,
        help="rows read to infer the feature specs and their statistics",
    )
    p.add_argument(
        "--export",
        metavar="DIR",
        help="export for TF Serving to DIR/<version> (e.g. saved_models/my_ctr)",
    )
    p.add_argument(
        "--version", type=int, help="export version (default: one above the highest)"
    )
    add_distribute_arguments(p)

    def dispatch(args):
        if getattr(args, "kind", None) != "ctr":
            train.print_help()
            return 2
        return train_ctr(args)

    train.set_defaults(func=dispatch)
