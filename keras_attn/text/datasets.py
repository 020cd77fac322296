"""The review sample shipped with keras_attn.text, loaders for the text data sets
of ../shared/data (review_polarity, ag_news, chnsenticorp_htl; see its DATA.md), and
the stratified split the text benchmarks and notebooks use."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import numpy as np

__all__ = [
    "REVIEW_SAMPLE",
    "load_ag_news",
    "load_chnsenticorp_htl",
    "load_review_polarity",
    "load_review_sample",
    "stratified_split",
]

#: 960 movie reviews (Pang & Lee polarity v2.0, research use): see data/ATTRIBUTION.md.
REVIEW_SAMPLE = (
    Path(__file__).resolve().parent / "data" / "review_polarity_sample.jsonl.gz"
)


def load_review_polarity(path: str | Path) -> tuple[list[str], list[str]]:
    """Documents and labels of a review_polarity JSON-lines file (gzip or plain).

    Each line is `{"label": "pos" | "neg", "sentences": [...]}`; a document is its
    sentences joined by spaces.

    Returns:
        `(texts, labels)`, two lists of str.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    texts, labels = [], []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            texts.append(" ".join(row["sentences"]))
            labels.append(row["label"])
    return texts, labels


def _open_text(path: Path):
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _read_csv(path, columns: tuple[str, ...]) -> list[dict]:
    path = Path(path)
    with _open_text(path) as f:
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(
                f"`path` must be a CSV file with columns {list(columns)}. "
                f"Received: {str(path)!r} with columns {reader.fieldnames}"
            )
        return list(reader)


def load_ag_news(path: str | Path) -> tuple[list[str], list[str]]:
    """Documents and labels of an AG News CSV file (gzip or plain).

    The file has a header row `label,title,description`, labels 1-4 (World, Sports,
    Business, Sci/Tech). A document is `title + ". " + description`.

    Returns:
        `(texts, labels)`, two lists of str (labels as in the file, "1" to "4").
    """
    rows = _read_csv(path, ("label", "title", "description"))
    texts = [f"{r['title']}. {r['description']}" for r in rows]
    return texts, [r["label"] for r in rows]


def load_chnsenticorp_htl(path: str | Path) -> tuple[list[str], list[str]]:
    """Reviews and labels of a ChnSentiCorp hotel-review CSV file (gzip or plain).

    The file has a header row `label,review`; 1 is positive, 0 negative.

    Returns:
        `(texts, labels)`, two lists of str (labels "0" and "1").
    """
    rows = _read_csv(path, ("label", "review"))
    return [r["review"] for r in rows], [r["label"] for r in rows]


def load_review_sample() -> tuple[list[str], list[str]]:
    """The 960 reviews shipped with the package (480 per label): `(texts, labels)`.

    Example:

    >>> texts, labels = load_review_sample()
    >>> len(texts), sorted(set(labels))
    (960, ['neg', 'pos'])
    """
    return load_review_polarity(REVIEW_SAMPLE)


def stratified_split(labels, validation_fraction=0.2, seed=0):
    """Indices `(train, validation)` of a split stratified by label.

    Example:

    >>> train, validation = stratified_split(["a", "a", "b", "b", "b"], 0.4)
    >>> len(train), len(validation)
    (3, 2)
    """
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    train, val = [], []
    for value in sorted(set(labels.tolist())):
        idx = np.flatnonzero(labels == value)
        rng.shuffle(idx)
        n_val = int(round(len(idx) * validation_fraction))
        val.extend(idx[:n_val].tolist())
        train.extend(idx[n_val:].tolist())
    return np.array(sorted(train)), np.array(sorted(val))
