"""The review sample shipped with keras_attn.text, and a loader for review_polarity."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

__all__ = ["REVIEW_SAMPLE", "load_review_polarity", "load_review_sample"]

#: 400 movie reviews (Pang & Lee polarity v2.0, research use): see data/ATTRIBUTION.md.
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


def load_review_sample() -> tuple[list[str], list[str]]:
    """The 400 reviews shipped with the package: `(texts, labels)`.

    Example:

    >>> texts, labels = load_review_sample()
    >>> len(texts), sorted(set(labels))
    (400, ['neg', 'pos'])
    """
    return load_review_polarity(REVIEW_SAMPLE)
