"""The text part of `keras-attn quickstart`: a HAN on the shipped movie reviews."""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["SENTENCES", "SETTINGS", "run_text_quickstart"]

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

    from keras_attn.serving import load_serving_fn
    from keras_attn.text.datasets import load_review_sample
    from keras_attn.text.train import fit_text_classifier, stratified_split

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
    path = clf.export(Path(output) / "review_han", version=1, overwrite=True)
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
