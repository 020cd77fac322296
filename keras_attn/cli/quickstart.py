"""`keras-attn quickstart`: an MMoE on the shipped census sample, then a HAN on the
shipped movie reviews; each trained, tested, exported for TF Serving, reloaded with
TensorFlow alone and asked about raw rows.

Registered in `keras_attn.cli.main.COMMANDS` by `add_quickstart`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

__all__ = [
    "CTR_SETTINGS",
    "SENTENCES",
    "SETTINGS",
    "add_quickstart",
    "build_census_model",
    "quickstart",
    "run_ctr_quickstart",
    "run_text_quickstart",
]


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


#: The census MMoE's widths and gate; every other setting is `build_ctr_model`'s
#: default.
CTR_SETTINGS = dict(
    embedding_dim=8,
    num_experts=4,
    expert_units=(32,),
    tower_units=(16,),
    gate="attention",
    # The categorical fields' rows in one table: the same parameters, one lookup
    # per step and per request instead of one per field (the export's request
    # graph 438 -> 314 nodes).
    shared_table=True,
)


def build_census_model(specs, tasks):
    """The quickstart's census model, untrained: an MMoE with the attention gate
    (`CTR_SETTINGS`) named "census_mmoe", on `specs` and `tasks`. The one place it
    is built (`benchmarks/bench_serving.py` times its export)."""
    from keras_attn.models import build_ctr_model

    return build_ctr_model(specs, tasks, name="census_mmoe", **CTR_SETTINGS)


def run_ctr_quickstart(
    output: str | Path = "saved_models",
    epochs: int = 8,
    learning_rate: float = 3e-3,
    quiet: bool = False,
) -> dict:
    """Trains an MMoE (attention gate) on the shipped census sample, exports it,
    reloads the export and predicts three raw rows.

    The first 4,000 rows train, the other 1,000 test; the export is
    `OUTPUT/census_mmoe/1`, reloaded with TensorFlow alone.

    Returns:
        `{"auc": {task: test AUC}, "export", "predictions": {task: (3, 1)},
        "seconds"}`.
    """
    from keras_attn.datasets import census_features, census_tasks, load_census_sample
    from keras_attn.features import to_dataset
    from keras_attn.models import fit_ctr_model
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
    model = build_census_model(specs, tasks)
    # The raw rows are encoded once by the model's own preprocessing layers and the
    # rest of the model trains on the ids; `model` still takes raw values. (XLA
    # would compile longer than these few thousand rows take to train.)
    fit_ctr_model(
        model,
        train,
        epochs=epochs,
        batch_size=256,
        seed=0,
        learning_rate=learning_rate,
        jit_compile=False,
        verbose=0 if quiet else 1,
    )
    test_ds = to_dataset(test, specs, tasks, batch_size=1000)
    logs = model.evaluate(test_ds, return_dict=True, verbose=0)
    auc = {t.name: float(logs[f"{t.name}_auc"]) for t in tasks}
    print("\nTest AUC: " + ", ".join(f"{n} {v:.4f}" for n, v in auc.items()))
    path = export(
        model,
        Path(output) / "census_mmoe",
        version=1,
        features=specs,
        overwrite=True,
        # TF Serving replays these before the version answers: test rows.
        warmup=test.iloc[:8],
    )
    print(f"Exported for TF Serving to {path}")
    outputs = _print_predictions(
        path,
        test.iloc[:3],
        specs,
        tasks,
        ["age", "education", "sex", "income_50k", "marital_stat"],
    )
    return {
        "auc": auc,
        "export": path,
        "predictions": {t.name: outputs[t.name].numpy() for t in tasks},
        "seconds": time.time() - start,
    }


#: Raw sentences the export is asked about (a positive one first, then a negative one).
SENTENCES = (
    "An excellent, funny and touching film.",
    "A dull, boring and pointless film.",
)
SENTENCE = SENTENCES[0]

#: The HAN's widths: small enough for a few seconds an epoch on 2 CPU cores. Every
#: other setting is `fit_text_classifier`'s default: limits read off the training
#: reviews, the vocabulary limits, the wide part (hashed uni- and bigrams), the
#: learning-rate schedule, early stopping on reviews carved from the training ones.
SETTINGS = dict(embedding_dim=32, units=16, attention_units=32)


def run_text_quickstart(
    output: str | Path = "saved_models", epochs: int = 4, quiet: bool = False
) -> dict:
    """Trains a HAN on 768 shipped reviews, tests it on 192, exports and predicts.

    The split is the fixed 80/20 stratified split (seed 0) of the 960 reviews of
    `load_review_sample()`; the test reviews are never used for training or for
    choosing an epoch: `fit_text_classifier` (its defaults, with the small widths of
    `SETTINGS`) runs at most `epochs` epochs and stops early on 10 % of the
    *training* reviews, restoring the best epoch's weights. The export
    (`OUTPUT/review_han/1`) takes raw strings; it is reloaded with TensorFlow alone
    and asked for the labels of two raw sentences (`SENTENCES`).

    Returns:
        `{"accuracy", "export", "sentence", "label", "probabilities", "sentences",
        "labels", "seconds"}`: `sentence`, `label` and `probabilities` are those of
        the first sentence.
    """
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the tokenizer ops of the export)

    from keras_attn.models import fit_text_classifier
    from keras_attn.serving import export, load_serving_fn
    from keras_attn.text import load_review_sample, stratified_split

    start = time.time()
    texts, labels = load_review_sample()
    train, test = stratified_split(labels, 0.2, seed=0)
    print(
        f"\nMovie reviews (Pang & Lee polarity v2.0, research use): {len(train)} "
        f"training and {len(test)} test reviews; a HAN with word and sentence "
        f"attention and a wide part, at most {epochs} epochs."
    )
    clf = fit_text_classifier(
        [texts[i] for i in train],
        [labels[i] for i in train],
        model="han",
        epochs=epochs,
        verbose=0 if quiet else 2,
        **SETTINGS,
    )
    test_labels = [labels[i] for i in test]
    predicted = clf.predict([texts[i] for i in test])
    accuracy = sum(p == y for p, y in zip(predicted, test_labels)) / len(test)
    print(f"Test accuracy on {len(test)} held-out reviews: {accuracy:.3f}")
    path = export(
        clf,
        Path(output) / "review_han",
        version=1,
        overwrite=True,
        warmup=[texts[i] for i in test[:8]],
    )
    print(f"Exported for TF Serving (raw strings in) to {path}")
    # The signature alone would let the loaded object (and its tables) be freed.
    serve = load_serving_fn(path)
    out = serve(text=tf.constant(list(SENTENCES)))
    labels_out = [v.decode() for v in out["label"].numpy()]
    probs_out = out["probabilities"].numpy().tolist()
    print("The SavedModel on raw sentences:")
    for sentence, label, probs in zip(SENTENCES, labels_out, probs_out):
        shown = ", ".join(f"{n} {p:.3f}" for n, p in zip(clf.class_names, probs))
        print(f"  {sentence!r} -> {label} ({shown})")
    seconds = time.time() - start
    print(f"Text part done in {seconds:.0f} s.")
    return {
        "accuracy": accuracy,
        "export": path,
        "sentence": SENTENCES[0],
        "label": labels_out[0],
        "probabilities": probs_out[0],
        "sentences": list(SENTENCES),
        "labels": labels_out,
        "seconds": seconds,
    }


def quickstart(args: argparse.Namespace) -> int:
    """Runs both parts (the text part unless `--no-text`)."""
    start = time.time()
    run_ctr_quickstart(
        args.output,
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        quiet=args.quiet,
    )
    if args.text:
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
