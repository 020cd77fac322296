"""The wide part of `fit_text_classifier`'s classifiers and how it is trained.

Its `NgramLinear` settings (`WIDE_DEFAULTS`, and `WIDE_JOINT` when trained with the
deep part); fitted alone first (`WIDE_FIT`) for the "ensemble" and "residual"
`WIDE_TRAININGS`; for "ensemble", the mix of the two parts' logits of least
validation log loss, folded into their last weights."""

from __future__ import annotations

import numpy as np

from keras_attn.backend import keras, tf
from keras_attn.models.classifier_head import wide_part_model
from keras_attn.models.text import wide_layer
from keras_attn.models.text_deep import _deep_inputs, _predict
from keras_attn.models.text_kinds import TextFit
from keras_attn.text.ngrams import NgramVocabulary

__all__ = ["WIDE_DEFAULTS", "WIDE_FIT", "WIDE_JOINT", "WIDE_TRAININGS"]

#: The wide part's features in `fit_text_classifier` (over `NgramLinear`'s): those
#: of scikit-learn's `TfidfVectorizer(sublinear_tf=True, min_df=2)` over the word
#: uni- and bigrams (1 + log count, smoothed IDF from the training documents, L2
#: norm), the n-grams of at least `min_df` training documents looked up
#: (`NgramVocabulary`; `min_df=None` hashes every n-gram instead), the table
#: scaled by naive-Bayes log-count ratios (NBSVM), and a bias: the wide part is a
#: logistic regression on (NB-scaled) TF-IDF features. Chosen on inner 80/20
#: splits of the three bench_text corpora's fitting parts (`bench_text
#: --select-wide`, benchmarks/RESULTS.md): mean accuracy 0.881 with the vocabulary
#: of min_df 2, the ratios and C = 30 (review_polarity 0.852), 0.870 with hashed
#: n-grams (0.820), 0.868 plain TF-IDF (C = 30).
WIDE_DEFAULTS = {
    "term_weighting": "sublinear",
    "idf": True,
    "combiner": "l2",
    "use_bias": True,
    "nb_ratio": True,
    "min_df": 2,
}


#: How the wide part is fitted alone (`wide_training` "ensemble" and "residual"):
#: Adam at `learning_rate`, `epochs` passes in batches of `batch_size`, an L2
#: penalty `|W|² / (2·C·N)` on the table (N training documents: scikit-learn's
#: `LogisticRegression(C=C)` objective divided by N). Plain TF-IDF fitted so
#: matched scikit-learn's TF-IDF + LR on the same inner splits.
WIDE_FIT = {"epochs": 20, "learning_rate": 0.01, "batch_size": 64, "C": 30.0}


#: Added to `WIDE_DEFAULTS` with `wide_training="joint"` (the wide part trained
#: with the deep one from the start): a 10x step and n-gram dropout 0.5, chosen for
#: joint training on an inner split of review_polarity (benchmarks/RESULTS.md).
WIDE_JOINT = {"scale": 10.0, "dropout": 0.5}


#: `fit_text_classifier`'s ways of training a wide-and-deep classifier.
WIDE_TRAININGS = ("ensemble", "residual", "joint")


#: The mixing grid of `wide_training="ensemble"`: the weight α of the wide logits
#: and the temperature t of `t·(α·wide + (1 - α)·deep)`.
_MIX_WEIGHTS = np.linspace(0.0, 1.0, 21)


_MIX_TEMPERATURES = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _resolve_wide(kind, wide, wide_training, limits, documents):
    """The wide part's `NgramLinear` arguments (or False): `kind.wide` for None,
    over `WIDE_DEFAULTS` (and `WIDE_JOINT`), `max_ngrams` the corpus's, an L2
    penalty of scikit-learn's C for `documents` unless trained jointly; `min_df`
    (popped by `_ngram_stage`) None when `num_buckets` is given (hashed ids)."""
    if wide is None:
        wide = kind.wide
    if wide is True:
        wide = {}
    if isinstance(wide, dict):
        if "num_buckets" in wide:
            # A number of buckets sizes hashed ids: no vocabulary unless asked.
            if wide.get("min_df") is not None:
                raise ValueError(
                    "`wide` takes `num_buckets` (every n-gram hashed into that "
                    "many buckets) or `min_df` (the n-grams of at least that many "
                    "training documents, looked up), not both. Received: "
                    f"num_buckets={wide['num_buckets']!r}, min_df={wide['min_df']!r}"
                )
            wide = {**wide, "min_df": None}
        joint = WIDE_JOINT if wide_training == "joint" else {}
        wide = {"max_ngrams": limits["max_ngrams"], **WIDE_DEFAULTS, **joint, **wide}
        if wide_training != "joint":
            # scikit-learn's C, per document (the loss is a mean over the batch).
            penalty = 1.0 / (2.0 * WIDE_FIT["C"] * documents)
            # As a config (not an object): the classifier's config stays JSON.
            l2 = {"class_name": "L2", "config": {"l2": penalty}}
            wide.setdefault("kernel_regularizer", l2)
    return wide


def _ngram_stage(fit: TextFit, preprocessor):
    """[ngrams]: with `min_df` in the wide part's settings, the n-grams of at
    least that many training documents (`NgramVocabulary`) feed it, and its
    `num_buckets` is their number; else (`min_df` None or absent) hashed ones.

    Returns:
        `(preprocessor, settings)`: the preprocessor with those n-grams (as it was
        otherwise) and `{"wide_min_df": min_df}` (empty when hashed).
    """
    if not isinstance(fit.wide, dict) or "min_df" not in fit.wide:
        return preprocessor, {}
    wide = dict(fit.wide)
    min_df = wide.pop("min_df")
    fit.wide = wide
    if min_df is None:
        return preprocessor, {}
    ngrams = NgramVocabulary.from_texts(
        fit.texts,
        min_df,
        ngram_widths=wide.get("ngram_widths", (1, 2)),
        max_ngrams=wide["max_ngrams"],
        lowercase=wide.get("lowercase", True),
        name="wide_ngrams",
    )
    fit.wide = {**wide, "num_buckets": ngrams.num_buckets, "lookup": "vocabulary"}
    with_ngrams = type(preprocessor)(
        preprocessor.tokenizer, ngrams=ngrams, name=preprocessor.name
    )
    return with_ngrams, {"wide_min_df": min_df}


def _wide_stage(fit: TextFit, net, train, validation, staged: bool) -> dict:
    """[wide]: the wide part's IDF and naive-Bayes ratios from the training
    documents; with `staged` ("ensemble", "residual") it is fitted alone
    (`WIDE_FIT`) and frozen. Returns its settings (`wide_val_accuracy`)."""
    wide_part = wide_layer(net)
    if wide_part is None:
        return {}
    if wide_part.use_idf or wide_part.nb_ratio:
        wide_part.adapt(train[0]["ngram_ids"], labels=train[1])
    if not staged:
        return {}
    settings = _fit_wide_part(
        net,
        train[0],
        train[1],
        *(validation or (None, None)),
        fit.strategy,
        fit.compile_kwargs,
        fit.seed,
        fit.static,
    )
    wide_part.trainable = False
    return settings


def _mix_stage(fit: TextFit, net, fitted, train, validation, refit: bool) -> dict:
    """[mix] ("ensemble"): the mix of the wide and deep logits of least validation
    log loss (`_choose_mix`), folded into the two parts' last weights; with
    `refit` (the validation part was carved from the training documents) the
    wide part is first fitted again on all of them.

    Returns:
        The mix's settings: `deep_val_accuracy`, `mix_val_accuracy`,
        `wide_weight`, `temperature` (and `wide_refit_documents`).
    """
    inputs, y = validation or (None, None)
    mix = _choose_mix(net, fitted, inputs, y, fit.strategy)
    if refit:
        # The wide part needs no early stopping: once the mix is chosen, it is
        # fitted again on every training document, the carved ones included.
        everything = {
            "ngram_ids": np.concatenate([train[0]["ngram_ids"], inputs["ngram_ids"]])
        }
        y_everything = np.concatenate([train[1], y])
        wide_part = wide_layer(net)
        wide_part.trainable = True
        for weight in (wide_part.kernel, wide_part.bias):
            if weight is not None:
                weight.assign(tf.zeros_like(weight))
        wide_part.adapt(everything["ngram_ids"], labels=y_everything)
        _fit_wide_part(
            net,
            everything,
            y_everything,
            None,
            None,
            fit.strategy,
            fit.compile_kwargs,
            fit.seed,
            fit.static,
        )
        wide_part.trainable = False
        mix["wide_refit_documents"] = len(y_everything)
    _fold_mix(net, mix["wide_weight"], mix["temperature"], fit.strategy)
    return mix


def _fit_wide_part(
    net, train, y, validation, y_validation, strategy, compile_kwargs, seed, static
) -> dict:
    """Fits the wide part alone (`WIDE_FIT`): a logistic regression on its
    features. Returns its validation accuracy (None without validation data)."""
    with strategy.scope():
        wide_model = wide_part_model(net)
        wide_model.compile(
            optimizer=keras.optimizers.Adam(WIDE_FIT["learning_rate"]),
            loss={"probabilities": "sparse_categorical_crossentropy"},
            **compile_kwargs,
        )
    ds = tf.data.Dataset.from_tensor_slices((train["ngram_ids"], y))
    ds = ds.shuffle(len(y), seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(WIDE_FIT["batch_size"], drop_remainder=static)
    ds = ds.map(lambda x, t: (x, {"probabilities": t})).prefetch(tf.data.AUTOTUNE)
    wide_model.fit(ds, epochs=WIDE_FIT["epochs"], shuffle=False, verbose=0)
    accuracy = None
    if validation is not None:
        probabilities = _predict(wide_model, validation["ngram_ids"])
        accuracy = float(np.mean(probabilities.argmax(-1) == y_validation))
    return {"wide_val_accuracy": accuracy}


def _choose_mix(net, deep_model, validation, y, strategy) -> dict:
    """The mix `t·(α·wide + (1 - α)·deep)` of the two parts' logits of least
    validation log loss (α = 0.5, t = 1 without validation data), the deep
    part's validation accuracy and the mix's (`mix_val_accuracy`)."""
    if validation is None:
        return {"deep_val_accuracy": None, "wide_weight": 0.5, "temperature": 1.0}
    with strategy.scope():
        wide_model = wide_part_model(net)
    # Log-probabilities differ from the logits by one constant per document,
    # which the softmax of their weighted sum ignores.
    wide_log = np.log(np.maximum(_predict(wide_model, validation["ngram_ids"]), 1e-30))
    deep_probabilities = _predict(deep_model, _deep_inputs(validation))
    deep_log = np.log(np.maximum(deep_probabilities, 1e-30))
    best = None
    for a in _MIX_WEIGHTS:
        for t in _MIX_TEMPERATURES:
            z = t * (a * wide_log + (1.0 - a) * deep_log)
            z = z - z.max(axis=1, keepdims=True)
            log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
            loss = -float(np.mean(log_p[np.arange(len(y)), y]))
            if best is None or loss < best[0] - 1e-12:
                best = (loss, float(a), float(t), float(np.mean(z.argmax(1) == y)))
    return {
        "deep_val_accuracy": float(np.mean(deep_probabilities.argmax(-1) == y)),
        "mix_val_accuracy": best[3],
        "wide_weight": best[1],
        "temperature": best[2],
    }


def _fold_mix(net, alpha, temperature, strategy) -> None:
    """Scales the wide part's and the deep head's weights by `t·α` and
    `t·(1 - α)`: `net`'s logits become the mix."""
    wide, dense = wide_layer(net), net.output_dense
    with strategy.scope():
        for layer, factor in (
            (wide, temperature * alpha),
            (dense, temperature * (1.0 - alpha)),
        ):
            layer.kernel.assign(layer.kernel * factor)
            if layer.bias is not None:
                layer.bias.assign(layer.bias * factor)


def _wide_settings(layer):
    """The hashing and combining settings of a wide part, or False without one."""
    if layer is None:
        return False
    config = layer.get_config()
    keys = (
        "num_buckets",
        "combiner",
        "dropout",
        "scale",
        "ngram_widths",
        "max_ngrams",
        "term_weighting",
        "idf",
        "lookup",
    )
    return {k: config[k] for k in keys}
