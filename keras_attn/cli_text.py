"""`keras-attn train text`: a document classifier from a CSV or JSON-lines file.

Registered in `keras_attn.cli.COMMANDS` by `add_train_text`, which adds the `text`
kind to the `train` command (creating `train` when no other module did).
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from keras_attn.cli_ctr import add_distribute_arguments

__all__ = ["add_train_text", "read_text_file", "train_text"]


def read_text_file(path, text_column: str, label_column: str):
    """Texts and labels from a CSV (header row) or JSON-lines file, gzip or plain.

    A JSON-lines row may hold the text as a list of sentences (joined by spaces),
    as review_polarity does.
    """
    path = Path(path)
    name = path.name.removesuffix(".gz")
    if name.endswith((".jsonl", ".json")):
        opener = gzip.open if path.suffix == ".gz" else open
        texts, labels = [], []
        with opener(path, "rt", encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                row = json.loads(line)
                for column in (text_column, label_column):
                    if column not in row:
                        raise SystemExit(
                            f"column {column!r} not in {path}. Keys: {sorted(row)}"
                        )
                text = row[text_column]
                texts.append(" ".join(text) if isinstance(text, list) else str(text))
                labels.append(str(row[label_column]))
        return texts, labels
    import pandas as pd

    df = pd.read_csv(path, keep_default_na=False)
    for column in (text_column, label_column):
        if column not in df.columns:
            raise SystemExit(
                f"column {column!r} not in {path}. Columns: {list(df.columns)}"
            )
    return df[text_column].astype(str).tolist(), df[label_column].astype(str).tolist()


def train_text(args: argparse.Namespace) -> int:
    """Trains a HAN / Transformer / BERT-style classifier; exports it."""
    from keras_attn.text.train import fit_text_classifier

    texts, labels = read_text_file(args.data, args.text_column, args.label_column)
    print(
        f"{args.data}: {len(texts)} documents ({args.validation_split:.0%} of them, "
        f"stratified, for early stopping), classes {sorted(set(labels))}; "
        f"model {args.model}"
    )
    # Widths not given fall back to fit_text_classifier's MODEL_DEFAULTS.
    if args.model == "han":
        kwargs = dict(embedding_dim=args.embedding_dim, units=args.units)
    else:
        kwargs = dict(
            hidden_dim=args.embedding_dim,
            num_layers=args.num_layers,
            num_heads=args.num_heads,
        )
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    clf = fit_text_classifier(
        texts,
        labels,
        model=args.model,
        validation_fraction=args.validation_split,
        wide=args.wide,
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        vocabulary=args.vocab,
        min_count=args.min_count,
        max_sentences=args.max_sentences,
        max_words=args.max_words,
        sequence_length=args.sequence_length,
        patience=args.patience or None,
        verbose=2,
        seed=args.seed,
        strategy=args.strategy,
        tpu=args.tpu,
        backup_dir=args.backup_dir,
        checkpoint_dir=args.checkpoint_dir,
        **kwargs,
    )
    print(f"settings: {clf.settings}")
    if clf.val_accuracy is not None:
        print(f"validation accuracy: {clf.val_accuracy:.4f}")
    if args.export:
        path = clf.export(args.export, version=args.version)
        print(f"Exported for TF Serving (raw strings in) to {path}")
    return 0


def _find_subparsers(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def add_train_text(subparsers) -> None:
    train = subparsers.choices.get("train")
    if train is None:
        train = subparsers.add_parser("train", help="train a model on your own data")
        train.set_defaults(func=lambda args: (train.print_help(), 2)[1])
    kinds = _find_subparsers(train) or train.add_subparsers(dest="kind", metavar="KIND")
    p = kinds.add_parser(
        "text",
        help="a document classifier (HAN, Transformer, BERT-style) from raw text",
        description="Trains a document classifier on a CSV (header row) or JSON-lines "
        "file, with a stratified validation split and early stopping on its "
        "accuracy. Tokenization (tensorflow-text) runs in tf.data and inside the "
        "export, whose serving_default takes raw strings (`text`) and returns "
        "`probabilities` and `label`. Needs TF Serving 2.20 or newer.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--data", required=True, help="CSV or JSON-lines file (.gz too)")
    p.add_argument("--text-column", required=True, help="column of the documents")
    p.add_argument("--label-column", required=True, help="column of the labels")
    p.add_argument(
        "--model",
        choices=["han", "transformer", "bert"],
        default="han",
        help="han: hierarchical attention (bi-GRU); transformer: encoder over words; "
        "bert: BERT-style encoder over WordPiece, trained from scratch",
    )
    p.add_argument(
        "--vocab",
        help="vocabulary: bert-base-uncased, bert-base-chinese or a vocab.txt "
        "(WordPiece); default: words of the training data (bert: "
        "bert-base-uncased)",
    )
    from_data = " (default: from the training documents)"
    p.add_argument("--min-count", type=int, help="min word count" + from_data)
    p.add_argument("--max-sentences", type=int, help="HAN sentences" + from_data)
    p.add_argument("--max-words", type=int, help="HAN words a sentence" + from_data)
    p.add_argument("--sequence-length", type=int, help="Transformer tokens" + from_data)
    p.add_argument(
        "--wide",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="add the wide part (hashed word uni- and bigrams; default: on for han "
        "and transformer, off for bert)",
    )
    widths = " (default: keras_attn.text.train.MODEL_DEFAULTS)"
    p.add_argument(
        "--embedding-dim", type=int, help="embedding (HAN) or model width" + widths
    )
    p.add_argument("--units", type=int, help="HAN GRU units" + widths)
    p.add_argument("--num-layers", type=int, help="Transformer layers" + widths)
    p.add_argument("--num-heads", type=int, help="Transformer heads" + widths)
    p.add_argument("--epochs", type=int, default=20, help="most training epochs")
    p.add_argument("--batch-size", type=int, default=32, help="batch size")
    p.add_argument("--learning-rate", type=float, default=1e-3, help="Adam's rate")
    p.add_argument(
        "--validation-split",
        type=float,
        default=0.1,
        help="fraction of the documents carved off for early stopping",
    )
    p.add_argument(
        "--patience", type=int, default=5, help="early-stopping epochs (0: none)"
    )
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--export", metavar="DIR", help="export to DIR/<version>")
    p.add_argument("--version", type=int, help="export version")
    add_distribute_arguments(p)
    p.set_defaults(func=train_text)
