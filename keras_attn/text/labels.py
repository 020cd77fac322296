"""Class labels of documents, read once and checked: `text_labels`, and the
early-stopping part carved from the training documents: `early_stopping_split`.

A label is a class name: text stripped, a number by its value ("3" for 3, 3.0 and
"3.0"), a boolean "True" / "False" (`keras_attn._cells.category_text`, the rule of
the CTR labels too). A missing label (None, NaN, empty) is an error naming the rows,
or the row is dropped when asked; so is a missing document (an empty string is an
empty document, kept).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from keras_attn._cells import category_text, is_missing
from keras_attn.text.datasets import stratified_split

__all__ = ["early_stopping_split", "text_labels"]


def _rows(indices) -> str:
    shown = ", ".join(str(i) for i in indices[:5])
    more = f" and {len(indices) - 5} more" if len(indices) > 5 else ""
    return f"{shown}{more}"


def text_labels(
    texts, labels, drop_missing: bool = False, names=("texts", "labels")
) -> tuple[list[str], list[str]]:
    """Documents and their class names, checked.

    Args:
        texts: documents (str; bytes are read as UTF-8).
        labels: their labels (str, numbers, booleans).
        drop_missing: bool. Drop the rows whose label or document is missing,
            instead of raising. Defaults to False.
        names: the arguments' names, for the messages.

    Returns:
        `(texts, labels)`: two lists of str, without the dropped rows.

    Raises:
        ValueError: a label or a document is missing (naming the rows), or a
            document is neither text nor missing.

    Example:

    >>> text_labels(["a", "b", "c"], [3, "3.0", " pos "])
    (['a', 'b', 'c'], ['3', '3', 'pos'])
    >>> text_labels(["a", None, "c"], [1, 0, None], drop_missing=True)
    (['a'], ['1'])
    """
    texts, labels = list(texts), list(labels)
    if len(texts) != len(labels):
        raise ValueError(
            f"`{names[0]}` and `{names[1]}` must have the same length. Received: "
            f"{len(texts)} {names[0]} and {len(labels)} {names[1]}"
        )
    classes = [category_text(v) for v in labels]
    documents = []
    for i, text in enumerate(texts):
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if text is not None and not isinstance(text, str) and not is_missing(text):
            raise ValueError(
                f"`{names[0]}` must hold strings. Received: {text!r} "
                f"({type(text).__name__}) in row {i}"
            )
        documents.append(None if is_missing(text) and text != "" else text)
    no_label = [i for i, c in enumerate(classes) if c is None]
    no_text = [i for i, t in enumerate(documents) if t is None]
    if (no_label or no_text) and not drop_missing:
        parts = []
        if no_label:
            parts.append(f"no label in rows {_rows(no_label)}")
        if no_text:
            parts.append(f"no document in rows {_rows(no_text)}")
        raise ValueError(
            f"`{names[1]}` and `{names[0]}` must have a value in every row: "
            f"{'; '.join(parts)}. Fill them in, or leave those rows out "
            "(`drop_missing=True`; on the command line --drop-missing)"
        )
    keep = [
        i
        for i in range(len(classes))
        if classes[i] is not None and documents[i] is not None
    ]
    return [documents[i] for i in keep], [classes[i] for i in keep]


def early_stopping_split(labels, fraction: float, seed: int = 0):
    """Indices `(train, validation)`: a stratified `fraction` of the documents for
    early stopping, which must hold some documents and leave every class some
    for training.

    Raises:
        ValueError: the part would be empty (every class too small for
            `fraction`), or would take a class's every document.

    Example:

    >>> train, validation = early_stopping_split(["a"] * 10 + ["b"] * 10, 0.1)
    >>> len(train), len(validation)
    (18, 2)
    """
    train, validation = stratified_split(labels, fraction, seed=seed)
    counts = Counter(np.asarray(labels).tolist())
    fix = (
        "pass a larger `validation_fraction`, your own `validation_texts`, or "
        "`patience=0` for no early stopping (on the command line "
        "--validation-split, or --patience 0)"
    )
    if not len(validation):
        raise ValueError(
            f"`validation_fraction`={fraction} of {len(labels)} documents carves "
            "none for early stopping (each class's share rounds to 0; the largest "
            f"class has {max(counts.values())}): {fix}"
        )
    trained = Counter(np.asarray(labels)[train].tolist())
    lost = sorted(str(c) for c in counts if not trained[c])
    if lost:
        raise ValueError(
            f"`validation_fraction`={fraction} puts every document of the class(es) "
            f"{lost} in the early-stopping part, leaving none to train on: {fix}"
        )
    return train, validation
