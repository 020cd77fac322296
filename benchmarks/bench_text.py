"""Text classifiers from scratch: keras_attn's HAN and Transformer vs TF-IDF + LR.

Three real data sets from ../shared/data (see DATA.md): review_polarity (English movie
reviews, 2 classes), ag_news (English news, 4 topics) and chnsenticorp_htl (Chinese
hotel reviews, 2 classes). Each dev file gets the same fixed 80/20 split stratified by
label (seed 0, `keras_attn.text.train.stratified_split`); every model is trained on
the 80 % and scored by accuracy on the 20 %.

- TF-IDF + logistic regression (scikit-learn): word 1-2-grams for English, character
  1-3-grams for Chinese, sublinear tf, C = 10.
- HAN and the Transformer classifier through `fit_text_classifier`, with early
  stopping on validation accuracy (patience 5, best weights restored). Chinese is
  tokenized by the word tokenizer, which makes every CJK character a token.

Early stopping looks at the same 20 % that is scored, as the reference figures in
../shared/FINDINGS.md were measured: read the neural figures as "best epoch", which
is slightly optimistic. Seconds per epoch are wall time on the machine that ran it.
The default of 6 epochs fits the 2-core machine's budget (AG News overfits within 1-3
epochs, ../shared/FINDINGS.md); HAN on review_polarity may want more (`--epochs`).

    python -m benchmarks.bench_text [--datasets review_polarity,ag_news,...]
        [--models han,transformer,tfidf] [--epochs 6] [--quick] [--no-write]

`--quick` trains on at most 400 documents for at most 2 epochs (a smoke run; it does
not write RESULTS.md).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
FILES = {
    "review_polarity": "review_polarity/review_polarity_dev.jsonl.gz",
    "ag_news": "ag_news/ag_news_dev.csv.gz",
    "chnsenticorp_htl": "chnsenticorp_htl/chnsenticorp_htl_dev.csv.gz",
}
CHINESE = {"chnsenticorp_htl"}
MODELS = ("tfidf", "han", "transformer")

# Settings per data set: the regularization ../shared/FINDINGS.md found best for HAN
# (dropout 0.5, embedding dropout 0.25, min count 3 on the small review set, lr 1e-3),
# with models small enough for a 2-core CPU.
COMMON = dict(batch_size=32, learning_rate=1e-3, patience=5)
HAN = {
    "review_polarity": dict(
        min_count=3,
        max_sentences=24,
        max_words=30,
        embedding_dim=64,
        units=25,
        attention_units=50,
        dropout=0.5,
        embedding_dropout=0.25,
    ),
    "ag_news": dict(
        min_count=2,
        max_sentences=4,
        max_words=40,
        embedding_dim=64,
        units=25,
        attention_units=50,
        dropout=0.5,
        embedding_dropout=0.25,
    ),
    "chnsenticorp_htl": dict(
        min_count=2,
        max_sentences=8,
        max_words=32,
        embedding_dim=64,
        units=25,
        attention_units=50,
        dropout=0.5,
        embedding_dropout=0.25,
    ),
}
TRANSFORMER = {
    "review_polarity": dict(
        min_count=3,
        sequence_length=256,
        hidden_dim=64,
        num_layers=1,
        num_heads=2,
        dropout=0.3,
        pooling="attention",
    ),
    "ag_news": dict(
        min_count=2,
        sequence_length=96,
        hidden_dim=64,
        num_layers=1,
        num_heads=2,
        dropout=0.3,
        pooling="attention",
    ),
    "chnsenticorp_htl": dict(
        min_count=2,
        sequence_length=256,
        hidden_dim=64,
        num_layers=1,
        num_heads=2,
        dropout=0.3,
        pooling="attention",
    ),
}


def load(name: str):
    """`(texts, labels)` of one dev file."""
    from keras_attn.text import datasets

    path = DATA / FILES[name]
    if not path.exists():
        raise SystemExit(f"{path} is absent: this benchmark reads ../shared/data")
    loader = {
        "review_polarity": datasets.load_review_polarity,
        "ag_news": datasets.load_ag_news,
        "chnsenticorp_htl": datasets.load_chnsenticorp_htl,
    }[name]
    return loader(path)


def split(name: str, limit: int | None = None):
    """The fixed 80/20 stratified split (seed 0): `(xtr, ytr, xva, yva)`."""
    from keras_attn.text.train import stratified_split

    texts, labels = load(name)
    train, val = stratified_split(labels, 0.2, seed=0)
    if limit:
        train, val = train[:limit], val[: max(limit // 4, 50)]
    pick = lambda idx, xs: [xs[i] for i in idx]  # noqa: E731
    return pick(train, texts), pick(train, labels), pick(val, texts), pick(val, labels)


def tfidf_lr(name, xtr, ytr, xva, yva) -> dict:
    """TF-IDF + logistic regression: `{"accuracy", "seconds"}`."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    if name in CHINESE:
        vec = TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True)
    else:
        vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    start = time.perf_counter()
    clf = LogisticRegression(C=10.0, max_iter=2000)
    clf.fit(vec.fit_transform(xtr), ytr)
    accuracy = float(np.mean(clf.predict(vec.transform(xva)) == np.asarray(yva)))
    return {"accuracy": accuracy, "seconds": time.perf_counter() - start}


def neural(model, name, xtr, ytr, xva, yva, epochs, **overrides) -> dict:
    """HAN or Transformer through `fit_text_classifier`."""
    from keras_attn.text.train import fit_text_classifier

    settings = {**COMMON, **(HAN if model == "han" else TRANSFORMER)[name]}
    settings.update(overrides)
    start = time.perf_counter()
    clf = fit_text_classifier(
        xtr,
        ytr,
        model=model,
        validation_texts=xva,
        validation_labels=yva,
        epochs=epochs,
        **settings,
    )
    history = clf.history.get(
        "val_probabilities_accuracy", clf.history.get("val_accuracy", [])
    )
    return {
        "accuracy": clf.val_accuracy,
        "seconds_per_epoch": clf.seconds_per_epoch,
        "epochs": len(history),
        "best_epoch": int(np.argmax(history)) + 1 if history else None,
        "seconds": time.perf_counter() - start,
        "settings": settings,
    }


def _row(name, results) -> str:
    cells = [name]
    for model in MODELS:
        r = results.get(model)
        if r is None:
            cells.append("-")
        elif model == "tfidf":
            cells.append(f"{r['accuracy']:.3f}")
        else:
            cells.append(
                f"{r['accuracy']:.3f} ({r['seconds_per_epoch']:.0f} s/epoch, "
                f"best epoch {r['best_epoch']} of {r['epochs']})"
            )
    return "| " + " | ".join(cells) + " |"


def _body(rows, pending) -> str:
    body = (
        "Validation accuracy on a fixed 80/20 stratified split (seed 0) of each dev "
        "file in ../shared/data; training seconds per epoch (wall time, 2 CPU cores "
        "shared with other jobs). Settings: `HAN` and `TRANSFORMER` in the script.\n\n"
        "| data set | TF-IDF + LR | HAN | Transformer |\n|---|---|---|---|\n"
        + "\n".join(rows)
    )
    if pending:
        body += f"\n\nNot run yet in this run: {', '.join(pending)}."
    return body


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(FILES))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--verbose", type=int, default=0, help="Keras verbosity")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for value, known, flag in ((names, FILES, "datasets"), (models, MODELS, "models")):
        bad = [v for v in value if v not in known]
        if bad:
            parser.error(f"--{flag}: unknown {bad}; choose from {list(known)}")
    epochs = min(args.epochs, 2) if args.quick else args.epochs
    limit = 400 if args.quick else None

    command = (
        f"python -m benchmarks.bench_text --datasets {','.join(names)} "
        f"--models {','.join(models)} --epochs {args.epochs}"
    )
    rows = []
    for done, name in enumerate(names, 1):
        data = split(name, limit)
        print(f"{name}: {len(data[0])} training, {len(data[2])} validation documents")
        results = {}
        for model in models:
            if model == "tfidf":
                results[model] = tfidf_lr(name, *data)
            else:
                results[model] = neural(
                    model, name, *data, epochs=epochs, verbose=args.verbose
                )
            print(f"  {model}: {results[model]}", flush=True)
        rows.append(_row(name, results))
        body = _body(rows, names[done:])
        print(body, flush=True)
        # Written after each data set, so an interrupted run keeps what it measured.
        if not args.no_write and not args.quick:
            from benchmarks._results import write_section

            write_section("bench_text", body, command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
