"""How `fit_text_classifier` trains the deep part: masked-LM pretraining of a BERT
encoder on the training documents (`pretrain_epochs`), the fine-tuning schedule of
a pretrained checkpoint (`FINE_TUNING`), and the epoch loop with keras_attn's
callbacks, of the deep part alone or of the whole classifier; with the deep part's
inputs and the probabilities of a classifier or of one of its parts."""

from __future__ import annotations

import time

import numpy as np

from keras_attn import training
from keras_attn.backend import keras, tf
from keras_attn.models.bert_pretraining import (
    compile_bert_pretrainer,
    fit_bert_pretrainer,
)
from keras_attn.models.classifier_head import deep_part_model
from keras_attn.models.text import compile_text_classifier
from keras_attn.models.text_kinds import FINE_TUNING, TextFit, TextModelKind
from keras_attn.models.text_preprocessor import model_structure
from keras_attn.optimizers import FusedAdamW, LinearWarmUpDecay
from keras_attn.text.pretraining import pretraining_dataset

# FINE_TUNING lives with the kinds (TextFit defaults to its `truncate`); it stays
# importable from here.
__all__ = ["FINE_TUNING"]

#: Weights AdamW does not decay (regular expressions on the variable names).
_NO_DECAY = ("bias", "gamma", "beta")


def _deep_optimizer(fit: TextFit, kind, epochs, steps_per_epoch):
    """`(optimizer, settings)`: None (Adam at the learning rate) from scratch; for a
    fine-tuned kind AdamW with `FINE_TUNING`'s schedule, and `fine_tuning`."""
    if not kind.fine_tune:
        return None, {}
    total = max(epochs * steps_per_epoch, 1)
    warmup = int(FINE_TUNING["warmup_fraction"] * total)
    optimizer = FusedAdamW(
        LinearWarmUpDecay(fit.learning_rate, warmup, max(total, warmup + 1)),
        weight_decay=FINE_TUNING["weight_decay"],
    )
    optimizer.exclude_from_weight_decay(var_names=list(_NO_DECAY))
    settings = {
        "learning_rate": fit.learning_rate,
        "weight_decay": FINE_TUNING["weight_decay"],
        "warmup_steps": warmup,
        "total_steps": total,
    }
    return optimizer, {"fine_tuning": settings}


def _deep_stage(
    fit: TextFit,
    kind: TextModelKind,
    net,
    train,
    validation,
    *,
    ensemble: bool,
    epochs: int,
    patience,
    backup_dir=None,
    checkpoint_dir=None,
    timer=None,
    callbacks=(),
):
    """deep: the epoch loop of the deep part alone (`ensemble`) or of the whole
    classifier (its wide part frozen for "residual"), with keras_attn's callbacks
    (`timer`, backup, checkpoints, the kind's warm-up, halving on a plateau, early
    stopping) before `callbacks`.

    Returns:
        `(fitted, history, settings)`: the model trained, its `History`, and
        `fine_tuning` for a fine-tuned kind.
    """
    n = len(train[1])
    batch_size, strategy = fit.batch_size, fit.strategy
    steps_per_epoch = n // batch_size if fit.static else -(-n // batch_size)
    with strategy.scope():  # a model records the strategy it is made under
        fitted = deep_part_model(net) if ensemble else net
        optimizer, settings = _deep_optimizer(fit, kind, epochs, steps_per_epoch)
        compile_text_classifier(
            fitted,
            learning_rate=fit.learning_rate,
            optimizer=optimizer,
            **fit.compile_kwargs,
        )

    def dataset(inputs, y, shuffle):
        # The structure the model takes (the token ids alone when that is all).
        inputs = _deep_inputs(inputs) if fitted is not net else model_structure(inputs)
        if shuffle and backup_dir is not None:
            ds = training.epoch_batches(
                (inputs, y),
                len(y),
                batch_size,
                seed=fit.seed,
                start_epoch=training.completed_epochs(backup_dir),
                drop_remainder=fit.static,
            )
        else:
            ds = tf.data.Dataset.from_tensor_slices((inputs, y))
            if shuffle:
                ds = ds.shuffle(len(y), seed=fit.seed, reshuffle_each_iteration=True)
            ds = ds.batch(batch_size, drop_remainder=fit.static)
        ds = ds.map(
            lambda t, y: (t, {"probabilities": y, "label": y}),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        return ds.prefetch(tf.data.AUTOTUNE)

    train_ds = dataset(*train, shuffle=True)
    # With a backup, an endless stream: `fit` counts the epochs.
    steps = steps_per_epoch if backup_dir is not None else None
    val_ds = None
    deep_callbacks = training.fit_callbacks(
        [timer] if timer is not None else [], backup_dir, None
    )
    if checkpoint_dir is not None:
        deep_callbacks.append(training.weights_checkpoint(net, checkpoint_dir))
    if kind.warm_up:
        deep_callbacks.append(training.WarmUp(fit.learning_rate, -(-n // batch_size)))
    if validation is not None:
        val_ds = dataset(*validation, shuffle=False).cache()
        if not kind.fine_tune:  # a checkpoint's schedule decays on its own
            deep_callbacks.append(
                keras.callbacks.ReduceLROnPlateau(
                    monitor="val_loss",
                    factor=0.5,
                    patience=2,
                    min_lr=fit.learning_rate / 32,
                )
            )
        if patience:
            deep_callbacks.append(
                keras.callbacks.EarlyStopping(
                    monitor="val_probabilities_accuracy"
                    if _metric_prefixed(fitted)
                    else "val_accuracy",
                    mode="max",
                    patience=patience,
                    restore_best_weights=True,
                )
            )
    history = fitted.fit(
        train_ds,
        validation_data=val_ds,
        epochs=epochs,
        steps_per_epoch=steps,
        callbacks=deep_callbacks + list(callbacks),
        shuffle=False,  # the dataset is shuffled
        verbose=fit.verbose,
    )
    return fitted, history, settings


def _deep_inputs(inputs):
    """The deep part's inputs: all but the n-gram ids (the token ids alone when
    nothing else is left)."""
    return model_structure({k: v for k, v in inputs.items() if k != "ngram_ids"})


def _predict(model, inputs, batch_size=256) -> np.ndarray:
    return model.predict(inputs, batch_size=batch_size, verbose=0)["probabilities"]


def _pretrain(
    pretrainer,
    tokenizer,
    texts,
    *,
    epochs,
    steps,
    batch_size,
    learning_rate,
    seed,
    static,
    compile_kwargs,
    strategy,
    verbose,
) -> dict:
    """Masked-LM pretraining of the encoder on `texts` (see `fit_text_classifier`).

    Returns the last epoch's MLM loss and accuracy, the steps and the seconds.
    """
    start = time.perf_counter()
    length = tokenizer.sequence_length

    def data(num_epochs):
        return pretraining_dataset(
            texts,
            tokenizer,
            sequence_length=length,
            batch_size=batch_size,
            # Enough slots for 15% of every window: no selected token is dropped.
            max_predictions=max(1, int(np.ceil(0.15 * (length - 2)))),
            num_epochs=num_epochs,
            drop_remainder=static,
            seed=seed,
            sentence_pairs=False,
        )

    # Batches of one pass over the windows; the stream repeats with fresh masks.
    passes = None
    if steps is None:
        passes = sum(1 for _ in data(1))
        steps = max(passes, 1)
    with strategy.scope():
        compile_bert_pretrainer(
            pretrainer, learning_rate=learning_rate, nsp_weight=0.0, **compile_kwargs
        )
    warm_up = training.WarmUp(learning_rate, -(-epochs * steps // 10))
    history = fit_bert_pretrainer(
        pretrainer,
        data(None),
        epochs=epochs,
        steps_per_epoch=steps,
        callbacks=[warm_up],
        verbose=verbose,
    )
    return {
        "epochs": epochs,
        "steps_per_epoch": steps,
        "batches_per_pass": passes,
        "documents": len(texts),
        "mlm_loss": float(history.history["mlm_loss"][-1]),
        "mlm_accuracy": float(history.history["mlm_accuracy"][-1]),
        "seconds": time.perf_counter() - start,
    }


def _metric_prefixed(net) -> bool:
    """Whether the accuracy of the `probabilities` output is logged with a prefix.

    Keras 3 and tf_keras both prefix per-output metrics with the output name when a
    model has several outputs.
    """
    return len(net.outputs) > 1
