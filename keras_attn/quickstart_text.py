"""The text part of `keras-attn quickstart`: a HAN on the shipped movie reviews."""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["run_text_quickstart"]

SENTENCE = "A moving, beautifully acted film: one of the best of the year."


def run_text_quickstart(
    output: str | Path = "saved_models", epochs: int = 5, quiet: bool = False
) -> dict:
    """Trains a HAN on 320 shipped reviews, tests it on 80, exports and predicts.

    The export (`OUTPUT/review_han/1`) takes raw strings; it is reloaded with
    TensorFlow alone and asked for the label of one raw sentence.

    Returns:
        `{"accuracy", "export", "sentence", "label", "probabilities", "seconds"}`.
    """
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the tokenizer ops of the export)

    from keras_attn.text.datasets import load_review_sample
    from keras_attn.text.train import fit_text_classifier, stratified_split

    start = time.time()
    texts, labels = load_review_sample()
    train, test = stratified_split(labels, 0.2, seed=0)
    print(
        f"\nMovie reviews (Pang & Lee polarity v2.0, research use): {len(train)} "
        f"training and {len(test)} test reviews; a HAN with word and sentence "
        "attention."
    )
    clf = fit_text_classifier(
        [texts[i] for i in train],
        [labels[i] for i in train],
        model="han",
        validation_texts=[texts[i] for i in test],
        validation_labels=[labels[i] for i in test],
        epochs=epochs,
        patience=None,
        learning_rate=3e-3,
        max_sentences=12,
        max_words=25,
        embedding_dim=32,
        units=16,
        attention_units=32,
        verbose=0 if quiet else 2,
    )
    print(f"Test accuracy: {clf.val_accuracy:.3f}")
    path = clf.export(Path(output) / "review_han", version=1, overwrite=True)
    print(f"Exported for TF Serving (raw strings in) to {path}")
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    out = serve(text=tf.constant([SENTENCE]))
    label = out["label"].numpy()[0].decode()
    probs = out["probabilities"].numpy()[0].tolist()
    shown = ", ".join(f"{n} {p:.3f}" for n, p in zip(clf.class_names, probs))
    print(f"The SavedModel on {SENTENCE!r}: {label} ({shown})")
    seconds = time.time() - start
    print(f"Text part done in {seconds:.0f} s.")
    return {
        "accuracy": clf.val_accuracy,
        "export": path,
        "sentence": SENTENCE,
        "label": label,
        "probabilities": probs,
        "seconds": seconds,
    }
