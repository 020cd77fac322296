"""`keras-attn train ctr|text`: one `train` command, a kind for each model family.

`ctr` infers feature specs from a CSV file, trains a (multi-task) CTR model and
exports it; `text` trains a document classifier from a CSV or JSON-lines file and
exports it with raw strings in. Registered in `keras_attn.cli.main.COMMANDS` by
`add_train`. Like every command, the functions import TensorFlow and the models
when they run, after `keras_attn.cli.main` has imported TensorFlow quietly.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from contextlib import contextmanager
from pathlib import Path

from keras_attn.cli.arguments import (
    UsageError,
    argument,
    fraction,
    message,
    non_negative,
    positive,
    positive_float,
    rate,
)

__all__ = [
    "add_distribute_arguments",
    "add_encoding_argument",
    "add_train",
    "read_text_file",
    "train_ctr",
    "train_text",
]


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


def _check_folders(args) -> None:
    """--backup-dir and --checkpoint-dir, written after the first epoch, checked
    before training."""
    from keras_attn._validation import check_folder

    for flag in ("--backup-dir", "--checkpoint-dir"):
        folder = getattr(args, flag[2:].replace("-", "_"))
        if folder is not None:
            check_folder(flag, folder)


def _split(text):
    return [s.strip() for s in (text or "").split(",") if s.strip()]


def add_encoding_argument(parser) -> None:
    """`--encoding` (every command that reads a CSV file)."""
    parser.add_argument(
        "--encoding",
        default="utf-8",
        help="text encoding of the CSV files (e.g. latin-1, cp1252); UTF-8 with or "
        "without a byte-order mark by default",
    )


def _files(args, path):
    """`CSVFiles` of `path` in `--encoding`."""
    from keras_attn.features import CSVFiles

    with argument("--encoding", args.encoding):
        return CSVFiles(path, encoding=args.encoding)


def _wide_argument(args):
    """`fit_text_classifier`'s `wide` from --wide / --no-wide and --wide-min-df."""
    if args.wide_min_df is None:
        return args.wide
    if args.wide is False:
        raise UsageError(
            f"--wide-min-df {args.wide_min_df} sets the wide part's n-grams: it "
            "cannot go with --no-wide"
        )
    return {"min_df": args.wide_min_df or None}


def _positives(args, labels) -> dict:
    positives = {}
    for item in args.positive or []:
        column, sep, value = item.partition("=")
        column = column.strip()
        if not sep:
            raise UsageError(f"--positive takes COLUMN=VALUE. Received: {item!r}")
        if column not in labels:
            raise UsageError(
                f"--positive {item}: {column!r} is not a label column (--labels "
                f"{','.join(labels)})"
            )
        positives.setdefault(column, []).append(value.strip())
    return positives


def _task_names(labels, taken) -> dict:
    """A task (output) name for each label column, unique among the feature
    names."""
    from keras_attn.models.ctr import task_name

    names, taken = {}, set(taken)
    for column in labels:
        names[column] = task_name(column, taken)
        taken.add(names[column])
    return names


def train_ctr(args: argparse.Namespace) -> int:
    """Infers feature specs from a CSV, trains a CTR model, exports it.

    Everything that can fail is checked before training: the arguments, the
    file's header, encoding and every record (labels, values, enough rows for one
    batch), the column names (renamed for serving where needed) and the export
    target.
    """
    from keras_attn.distribute import get_strategy
    from keras_attn.features import (
        CategoricalFeature,
        count_rows,
        infer_features,
        read_csv_head,
        read_header,
    )
    from keras_attn.models import Task, build_ctr_model, fit_ctr_model
    from keras_attn.serving import check_export_target, export

    labels = _split(args.labels)
    if not labels:
        raise UsageError("--labels: give at least one label column, e.g. click,buy")
    twice = sorted({c for c in labels if labels.count(c) > 1})
    if twice:
        raise UsageError(f"--labels {args.labels}: names {twice} more than once")
    _check_folders(args)
    positives = _positives(args, labels)
    files = _files(args, args.data)
    with argument("--data", args.data):
        header = read_header(files)
        missing = [c for c in labels if c not in header]
        if missing:
            raise ValueError(f"--labels {missing} are not columns. Columns: {header}")
        head = read_csv_head(files, args.infer_rows)
    overrides = {
        c: CategoricalFeature(c, hash_buckets=args.hash_buckets)
        for c in _split(args.hash)
    }
    with argument("--exclude/--categorical/--numeric/--hash"):
        specs = infer_features(
            head,
            labels=labels,
            exclude=_split(args.exclude),
            categorical=_split(args.categorical),
            numeric=_split(args.numeric),
            overrides=overrides,
        )
    renamed = {f.column: f.name for f in specs if f.column}
    names = _task_names(labels, [f.name for f in specs])
    tasks = [Task(names[c], label=c, positive=positives.get(c)) for c in labels]
    if args.export:
        with argument("--export", args.export):
            check_export_target(args.export, args.version, args.overwrite)
    with argument("--data", args.data):
        rows = count_rows(files, tasks, specs)  # every record read and checked
    if rows < args.batch_size:
        raise UsageError(
            f"--data {args.data}: {rows} rows, fewer than one batch of --batch-size "
            f"{args.batch_size}: give a smaller --batch-size or more rows"
        )
    validation = None
    if args.validation:
        validation = _files(args, args.validation)
        with argument("--validation", args.validation):
            if not count_rows(validation, tasks, specs):
                raise ValueError("a header and no records: nothing to validate on")
    if renamed:
        print(f"Serving input names for columns: {renamed}")
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
        files,
        epochs=args.epochs,
        batch_size=args.batch_size,
        validation_data=validation,
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
        with _keep_the_fit(model, args.export):
            path = export(
                model,
                args.export,
                version=args.version,
                features=specs,
                overwrite=args.overwrite,
                warmup=_ctr_warmup(args, specs, validation),
            )
        print(f"Exported for TF Serving to {path}")
    return 0


#: The text export's warm-up requests: documents the fit did not train on (an
#: empty one and a short one; the graph's first run does not depend on the words).
TEXT_WARMUP = ["", "A short document to warm the model up."]
#: Rows of `--validation` written as TF Serving's warm-up requests.
WARMUP_ROWS = 8


def _ctr_warmup(args, specs, validation):
    """The CTR export's warm-up rows: the first rows of `--validation`, which the
    fit did not train on, else one row of missing values (every input imputed or
    out of vocabulary); None with `--no-warmup`."""
    from keras_attn.features import read_csv_head

    if not args.warmup:
        return None
    if validation is not None:
        return read_csv_head(validation, WARMUP_ROWS)
    return [{spec.column or spec.name: None for spec in specs}]


@contextmanager
def _keep_the_fit(model, export_dir):
    """A failed export (a disk full, a folder made read-only while training) does
    not lose the fit: the trained model is saved as a `.keras` file, named in the
    error."""
    try:
        yield
    except Exception as error:
        import time

        stamp = time.strftime("%Y%m%d-%H%M%S")
        name = f"{Path(export_dir).name or 'model'}-unexported-{stamp}.keras"
        kept = None
        for folder in (
            Path(export_dir).parent,
            Path.cwd(),
            Path(tempfile.gettempdir()),
        ):
            try:
                model.save(str(folder / name))
                kept = folder / name
                break
            except Exception:  # noqa: BLE001  (the next folder)
                continue
        saved = f"; the trained model is saved in {str(kept)!r}" if kept else ""
        raise UsageError(f"--export {export_dir}: {message(error)}{saved}") from error


def read_text_file(
    path, text_column: str, label_column: str, encoding: str = "utf-8"
) -> tuple[list, list]:
    """Texts and labels from a CSV (header row) or JSON-lines file, gzip or plain.

    A CSV file is read by `keras_attn.features.reader` (a missing label, "" or
    one of pandas' "NA"-like spellings, and an empty text come out as None); a
    JSON-lines row may hold the
    text as a list of sentences (joined by spaces), as review_polarity does, and
    `null` for a missing value. Labels come as in the file: check them with
    `keras_attn.text.text_labels`.

    Raises:
        ValueError: a column is missing, or a line is not JSON (naming the file
            and the line).
    """
    from keras_attn.features import CSVFiles, iter_csv_frames, read_header
    from keras_attn.features.reader import decode_error, open_text

    path = Path(path)
    name = path.name.removesuffix(".gz")
    if name.endswith((".jsonl", ".json")):
        texts, labels = [], []
        number = 0
        handle, raw = open_text(path, encoding)  # gzip, a byte-order mark
        try:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ValueError(
                        f"JSON-lines file {str(path)!r}, line {number}: {error}"
                    ) from None
                if not isinstance(row, dict):
                    raise ValueError(
                        f"JSON-lines file {str(path)!r}, line {number}: each line "
                        "must be an object with the text and the label. Received: "
                        f"{type(row).__name__} {line.strip()[:80]!r}"
                    )
                for column in (text_column, label_column):
                    if column not in row:
                        raise ValueError(
                            f"JSON-lines file {str(path)!r}, line {number}: no "
                            f"column {column!r}. Keys: {sorted(row)}"
                        )
                text = row[text_column]
                if isinstance(text, list):
                    if not all(isinstance(t, (str, int, float)) for t in text):
                        # str(None) would put the word "None" in the document.
                        raise ValueError(
                            f"JSON-lines file {str(path)!r}, line {number}: "
                            f"{text_column!r} must be a text or a list of "
                            f"sentences (strings). Received: {text!r:.200}"
                        )
                    text = " ".join(str(t) for t in text)
                texts.append(text)
                labels.append(row[label_column])
        except UnicodeDecodeError as error:
            raise decode_error(path, encoding, number + 1, error) from None
        finally:
            handle.close()
            raw.close()
        return texts, labels
    files = CSVFiles(path, encoding=encoding)
    header = read_header(files)
    for column in (text_column, label_column):
        if column not in header:
            raise ValueError(
                f"column {column!r} not in {str(path)!r}. Columns: {header}"
            )
    texts, labels = [], []
    columns = [text_column, label_column]
    for frame in iter_csv_frames(files, columns, text_columns=[text_column]):
        frame = frame.astype(object).where(frame.notna(), None)
        texts += frame[text_column].tolist()
        labels += frame[label_column].tolist()
    return texts, labels


def train_text(args: argparse.Namespace) -> int:
    """Trains a HAN / Transformer / BERT-style classifier; exports it."""
    from keras_attn.models import fit_text_classifier
    from keras_attn.serving import check_export_target, export
    from keras_attn.text import text_labels

    if args.checkpoint is not None:
        if args.model not in (None, "bert"):
            raise UsageError(
                f"--checkpoint needs --model bert (received --model {args.model})"
            )
        args.model = "bert"
        given = [
            flag
            for flag, value in (
                ("--vocab", args.vocab),
                ("--embedding-dim", args.embedding_dim),
                ("--num-layers", args.num_layers),
                ("--num-heads", args.num_heads),
                ("--pretrain-epochs", args.pretrain_epochs),
            )
            if value
        ]
        if given:
            raise UsageError(
                f"{', '.join(given)} cannot be used with --checkpoint (the "
                "checkpoint's config.json and vocab.txt set them)"
            )
    elif args.truncate is not None:
        raise UsageError(
            f"--truncate needs --checkpoint (received --truncate {args.truncate})"
        )
    args.model = args.model or "han"
    if args.pretrain_epochs and args.model != "bert":
        raise UsageError(
            f"--pretrain-epochs needs --model bert (received --model {args.model})"
        )
    if args.pretrain_steps is not None and not args.pretrain_epochs:
        raise UsageError("--pretrain-steps needs --pretrain-epochs")
    if args.text_column == args.label_column:
        raise UsageError(
            f"--text-column and --label-column name one column: {args.text_column!r}"
        )
    _check_folders(args)
    _files(args, args.data)  # the --encoding name, for a JSON-lines file too
    with argument("--data", args.data):
        texts, labels = read_text_file(
            args.data, args.text_column, args.label_column, encoding=args.encoding
        )
        read = len(texts)
        texts, labels = text_labels(texts, labels, drop_missing=args.drop_missing)
    if args.export:
        with argument("--export", args.export):
            check_export_target(args.export, args.version, args.overwrite)
    dropped = (
        f", {read - len(texts)} without a label or text left out"
        if (read > len(texts))
        else ""
    )
    print(
        f"{args.data}: {len(texts)} documents{dropped} ({args.validation_split:.0%} "
        f"of them, stratified, for early stopping), classes {sorted(set(labels))}; "
        f"model {args.model}"
        + (f", fine-tuning {args.checkpoint}" if args.checkpoint else "")
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
        wide=_wide_argument(args),
        wide_training=args.wide_training,
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
        pretrain_epochs=args.pretrain_epochs,
        pretrain_steps=args.pretrain_steps,
        checkpoint=args.checkpoint,
        truncate=args.truncate,
        **kwargs,
    )
    print(f"settings: {clf.settings}")
    if clf.val_accuracy is not None:
        print(f"validation accuracy: {clf.val_accuracy:.4f}")
    if args.export:
        with _keep_the_fit(clf.model, args.export):
            path = export(
                clf,
                args.export,
                version=args.version,
                overwrite=args.overwrite,
                warmup=TEXT_WARMUP if args.warmup else None,
            )
        print(f"Exported for TF Serving (raw strings in) to {path}")
    return 0


def add_warmup_argument(parser) -> None:
    """`--no-warmup` (`train ctr|text`): the export's warm-up records are on by
    default."""
    parser.add_argument(
        "--no-warmup",
        dest="warmup",
        action="store_false",
        help="write no TF Serving warm-up records with --export (default: the "
        "first --validation rows for ctr, else a row of missing values; two "
        "documents for text)",
    )


def _add_ctr(kinds) -> None:
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
    p.add_argument("--num-experts", type=positive, default=8, help="MMoE experts")
    p.add_argument(
        "--embedding-dim", type=positive, default=8, help="size of field vectors"
    )
    p.add_argument(
        "--interacting", type=positive, default=2, help="AutoInt interacting layers"
    )
    p.add_argument("--dropout", type=rate, default=0.0, help="dropout rate")
    p.add_argument("--epochs", type=positive, default=5, help="training epochs")
    p.add_argument("--batch-size", type=positive, default=512, help="batch size")
    p.add_argument(
        "--learning-rate", type=positive_float, default=1e-3, help="Adam's rate"
    )
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
        "--hash-buckets",
        type=positive,
        default=100_000,
        help="buckets of --hash columns",
    )
    p.add_argument(
        "--infer-rows",
        type=positive,
        default=200_000,
        help="rows read to infer the feature specs and their statistics",
    )
    p.add_argument(
        "--export",
        metavar="DIR",
        help="export for TF Serving to DIR/<version> (e.g. saved_models/my_ctr)",
    )
    p.add_argument(
        "--version",
        type=non_negative,
        help="export version (default: one above the highest)",
    )
    p.add_argument(
        "--overwrite", action="store_true", help="replace an existing --version"
    )
    add_warmup_argument(p)
    add_encoding_argument(p)
    add_distribute_arguments(p)
    p.set_defaults(func=train_ctr)


def _add_text(kinds) -> None:
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
        help="han: hierarchical attention (bi-GRU); transformer: encoder over words; "
        "bert: a BERT encoder over WordPiece, fine-tuned from --checkpoint, or "
        "trained from scratch or, with --pretrain-epochs, pretrained with masked "
        "LM on the training documents first (default: han; bert with --checkpoint)",
    )
    p.add_argument(
        "--checkpoint",
        metavar="DIR",
        help="fine-tune this pretrained Hugging Face model folder (config.json, "
        "model.safetensors, vocab.txt; model type bert, distilbert or albert) "
        "with its own tokenizer; the export keeps the tokenizer inside",
    )
    p.add_argument(
        "--truncate",
        choices=("end", "middle"),
        help="with --checkpoint: what a document longer than the sequence loses, "
        "its end or its middle (its first quarter and last three quarters kept) "
        "(default: FINE_TUNING's)",
    )
    p.add_argument(
        "--vocab",
        help="vocabulary: bert-base-uncased, bert-base-chinese or a vocab.txt "
        "(WordPiece); default: words of the training data (bert: "
        "bert-base-uncased)",
    )
    from_data = " (default: from the training documents)"
    p.add_argument("--min-count", type=positive, help="min word count" + from_data)
    p.add_argument("--max-sentences", type=positive, help="HAN sentences" + from_data)
    p.add_argument(
        "--max-words", type=positive, help="HAN words a sentence" + from_data
    )
    p.add_argument(
        "--sequence-length", type=positive, help="Transformer tokens" + from_data
    )
    p.add_argument(
        "--wide",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="add the wide part (a TF-IDF logistic regression on word uni- "
        "and bigrams; default: on for han, transformer and --checkpoint, off for "
        "bert from scratch)",
    )
    p.add_argument(
        "--wide-min-df",
        type=non_negative,
        help="the wide part's n-grams: those of at least this many training "
        "documents, looked up (0: all n-grams, hashed; default: "
        "keras_attn.models.text_wide.WIDE_DEFAULTS); implies --wide",
    )
    p.add_argument(
        "--wide-training",
        choices=["ensemble", "residual", "joint"],
        default="ensemble",
        help="ensemble: the wide part, then the deep part, each alone, mixed on "
        "the validation part; residual: the deep part on top of the frozen wide "
        "part; joint: both together",
    )
    widths = " (default: keras_attn.models.text_kinds.MODEL_DEFAULTS)"
    p.add_argument(
        "--embedding-dim",
        type=positive,
        help="embedding (HAN) or model width" + widths,
    )
    p.add_argument("--units", type=positive, help="HAN GRU units" + widths)
    p.add_argument(
        "--num-layers", type=positive, help="Transformer/BERT layers" + widths
    )
    p.add_argument("--num-heads", type=positive, help="Transformer/BERT heads" + widths)
    p.add_argument(
        "--epochs",
        type=positive,
        help="most training epochs (default: 20; with --checkpoint, 4)",
    )
    p.add_argument(
        "--pretrain-epochs",
        type=non_negative,
        default=0,
        help="bert: masked-LM pretraining epochs on the training documents (not "
        "the validation split) before fine-tuning",
    )
    p.add_argument(
        "--pretrain-steps",
        type=positive,
        help="batches a pretraining epoch (default: one pass over the training "
        "documents)",
    )
    p.add_argument("--batch-size", type=positive, default=32, help="batch size")
    p.add_argument(
        "--learning-rate",
        type=positive_float,
        help="Adam's rate (default: 1e-3; with --checkpoint, AdamW's peak rate "
        "5e-5, warmed up and decayed linearly)",
    )
    p.add_argument(
        "--validation-split",
        type=fraction,
        default=0.1,
        help="fraction of the documents carved off for early stopping",
    )
    p.add_argument(
        "--patience",
        type=non_negative,
        default=5,
        help="early-stopping epochs (0: none)",
    )
    p.add_argument("--seed", type=non_negative, default=0, help="random seed")
    p.add_argument(
        "--drop-missing",
        action="store_true",
        help="leave out the rows without a label or a text (default: an error "
        "naming them)",
    )
    p.add_argument("--export", metavar="DIR", help="export to DIR/<version>")
    p.add_argument("--version", type=non_negative, help="export version")
    p.add_argument(
        "--overwrite", action="store_true", help="replace an existing --version"
    )
    add_warmup_argument(p)
    add_encoding_argument(p)
    add_distribute_arguments(p)
    p.set_defaults(func=train_text)


def add_train(subparsers) -> None:
    """The `train` command and its kinds, `ctr` and `text`."""
    train = subparsers.add_parser("train", help="train a model on your own data")
    kinds = train.add_subparsers(dest="kind", metavar="KIND")
    _add_ctr(kinds)
    _add_text(kinds)

    def kind_missing(args) -> int:
        train.print_help()
        return 2

    train.set_defaults(func=kind_missing)
