"""Sequence-to-sequence over characters: an encoder and an `AttentionDecoder`.

`Seq2Seq` (and its short spelling `build_seq2seq`) is an encoder (a bidirectional GRU
stack, or Transformer encoder blocks) and an `AttentionDecoder` (Bahdanau or Luong
attention), trained with teacher forcing: dict inputs `source_ids` and
`decoder_input_ids`, dict output `logits`. `fit_seq2seq` trains it on pairs of
strings; `keras_attn.serving.export_seq2seq` writes a SavedModel whose
`serving_default` takes raw strings and returns raw strings (character split, lookup,
in-graph decoding, join), so it runs in TensorFlow alone or in TF Serving.

Character vocabularies: `build_character_vocabulary` lists the special tokens
(`SPECIAL_TOKENS`: padding "", "[UNK]", "[START]", "[END]", ids 0-3) and then the
characters of the texts; `encode_characters` turns strings into padded id arrays.
"""

from __future__ import annotations

import collections

import numpy as np

from keras_attn import training
from keras_attn._deprecation import moved, warn_deprecated
from keras_attn._validation import check_at_most, check_positive_int
from keras_attn.backend import keras, register, tf
from keras_attn.layers import seq2seq as seq2seq_layers
from keras_attn.layers.seq2seq import ENCODERS, AttentionDecoder
from keras_attn.models.base import FunctionalModel, Parts, arguments_of

__all__ = [
    "ENCODERS",
    "SPECIAL_TOKENS",
    "Seq2Seq",
    "build_character_vocabulary",
    "build_seq2seq",
    "encode_characters",
    "fit_seq2seq",
    "seq2seq_vocabularies",
]

SPECIAL_TOKENS = ("", "[UNK]", "[START]", "[END]")
PAD_ID, UNK_ID, START_ID, END_ID = range(4)


def build_character_vocabulary(texts, min_count: int = 1) -> list[str]:
    """`SPECIAL_TOKENS` followed by the characters of `texts`, most frequent first.

    Args:
        texts: iterable of str.
        min_count: int. Characters seen fewer times map to "[UNK]". Defaults to 1.

    Returns:
        list of str; the index of a character is its id.

    Example:

    >>> build_character_vocabulary(["abb", "b"])
    ['', '[UNK]', '[START]', '[END]', 'b', 'a']
    """
    check_positive_int("min_count", min_count)
    counts = collections.Counter(ch for text in texts for ch in text)
    chars = sorted(
        (c for c, n in counts.items() if n >= min_count), key=lambda c: (-counts[c], c)
    )
    return list(SPECIAL_TOKENS) + chars


def encode_characters(
    texts,
    vocabulary,
    length: int | None = None,
    add_start: bool = False,
    add_end: bool = False,
) -> np.ndarray:
    """Character ids of `texts`, padded with 0 to `length`.

    Args:
        texts: iterable of str.
        vocabulary: list of str from `build_character_vocabulary`.
        length: int. Row length. Defaults to the longest row; a longer row raises
            (nothing is cut silently).
        add_start: bool. Put "[START]" first (decoder inputs). Defaults to False.
        add_end: bool. Put "[END]" last (decoder targets). Defaults to False.

    Returns:
        int32 array `(len(texts), length)`.

    Example:

    >>> vocabulary = build_character_vocabulary(["abc"])
    >>> encode_characters(["ca", "b"], vocabulary, add_end=True).tolist()
    [[6, 4, 3], [5, 3, 0]]
    """
    index = {ch: i for i, ch in enumerate(vocabulary) if i >= len(SPECIAL_TOKENS)}
    rows = [
        [START_ID] * add_start
        + [index.get(ch, UNK_ID) for ch in text]
        + [END_ID] * add_end
        for text in texts
    ]
    longest = max((len(r) for r in rows), default=0)
    if length is None:
        length = max(longest, 1)
    elif longest > length:
        raise ValueError(
            f"`length` must hold the longest text ({longest} ids). Received: "
            f"length={length}"
        )
    out = np.zeros((len(rows), length), "int32")
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def _check_vocabulary(name: str, vocabulary):
    """A character vocabulary of `build_character_vocabulary`: str entries,
    `SPECIAL_TOKENS` first (the export reads the characters after them)."""
    if vocabulary is None:
        return None
    vocabulary = list(vocabulary) if isinstance(vocabulary, (list, tuple)) else None
    if (
        vocabulary is None
        or not all(isinstance(token, str) for token in vocabulary)
        or tuple(vocabulary[: len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS
    ):
        raise ValueError(
            f"`{name}` must be a list of str from `build_character_vocabulary` "
            f"(starting with {list(SPECIAL_TOKENS)}). Received: {name}="
            f"{vocabulary!r}"
        )
    return vocabulary


def _vocabulary_size(side: str, size, vocabulary) -> int:
    """The `{side}_vocabulary_size`: given, or the vocabulary's length (both given
    must agree)."""
    name = f"{side}_vocabulary_size"
    if vocabulary is None:
        return check_positive_int(name, size)
    check_positive_int(name, size, allow_none=True)
    if size is not None and size != len(vocabulary):
        raise ValueError(
            f"`{name}` must be the length of `{side}_vocabulary` "
            f"({len(vocabulary)}) when both are given. Received: {name}={size}"
        )
    return len(vocabulary)


#: The constructor arguments `Seq2Seq` keeps as attributes (`encoder` and
#: `decoder` are its parts; the encoder's kind is `model.encoder.encoder`).
_SETTINGS = (
    "source_vocabulary_size",
    "target_vocabulary_size",
    "attention",
    "score",
    "cell",
    "units",
    "embedding_dim",
    "num_layers",
    "num_heads",
    "window",
    "max_source_length",
    "dropout",
    "source_vocabulary",
    "target_vocabulary",
)


@register
class Seq2Seq(FunctionalModel):
    """Encoder + `AttentionDecoder`, for teacher-forced training.

    Inputs `{"source_ids": (batch, src_len), "decoder_input_ids": (batch, tgt_len)}`
    (the targets behind a start token), output `{"logits": (batch, tgt_len,
    target_vocabulary_size)}`. The parts are attributes: `encoder`
    (`Seq2SeqEncoder`) and `decoder` (`AttentionDecoder`, whose `decode` generates);
    the settings too (`model.units`, `model.source_vocabulary`, ...). A model
    given its character vocabularies keeps them (in its config, so a `.keras` file
    has them): `fit_seq2seq` and `keras_attn.serving.export_seq2seq` read them
    from it.

    Args:
        source_vocabulary_size: int. Source ids (0 is padding). Defaults to the
            length of `source_vocabulary`.
        target_vocabulary_size: int. Target ids (0 is padding). Defaults to the
            length of `target_vocabulary`.
        encoder: str. "bigru" or "transformer". Defaults to "bigru".
        attention: str. "bahdanau", "luong" or "none" (the control without
            attention: the source only through the decoder's initial state).
            Defaults to "luong".
        score: str. The attention score (see `AttentionDecoder`). Defaults to the
            attention's own ("additive" / "general").
        cell: str. Decoder cell, "gru" or "lstm". Defaults to "gru".
        units: int. Decoder state width, and the encoder's (per direction for the
            BiGRU). Defaults to 64.
        embedding_dim: int. Character embedding width. Defaults to 32.
        num_layers: int. Encoder depth. Defaults to 1.
        num_heads: int. Transformer encoder heads. Defaults to 2.
        window: int or None. Luong's local-p window. Defaults to None.
        max_source_length: int. Source positions of the "location" score.
        dropout: float. Dropout in the encoder and decoder. Defaults to 0.0.
        source_vocabulary: list of str from `build_character_vocabulary`, or None.
            Defaults to None.
        target_vocabulary: list of str from `build_character_vocabulary`, or None.
            Defaults to None.
        name: str. Model name. Defaults to "seq2seq".

    Example:

    >>> import numpy as np
    >>> model = Seq2Seq(10, 12, units=8, embedding_dim=4)
    >>> out = model({"source_ids": np.array([[4, 5, 0]]),
    ...              "decoder_input_ids": np.array([[2, 6]])})
    >>> out["logits"].shape
    TensorShape([1, 2, 12])
    >>> vocabulary = build_character_vocabulary(["abc"])
    >>> Seq2Seq(source_vocabulary=vocabulary, target_vocabulary=vocabulary,
    ...         units=8, embedding_dim=4).target_vocabulary_size
    7
    """

    def __init__(
        self,
        source_vocabulary_size: int | None = None,
        target_vocabulary_size: int | None = None,
        encoder: str = "bigru",
        attention: str = "luong",
        score: str | None = None,
        cell: str = "gru",
        units: int = 64,
        embedding_dim: int = 32,
        num_layers: int = 1,
        num_heads: int = 2,
        window: int | None = None,
        max_source_length: int | None = None,
        dropout: float = 0.0,
        source_vocabulary: list[str] | None = None,
        target_vocabulary: list[str] | None = None,
        name: str = "seq2seq",
        **kwargs,
    ):
        arguments = arguments_of(locals())
        source_vocabulary = _check_vocabulary("source_vocabulary", source_vocabulary)
        target_vocabulary = _check_vocabulary("target_vocabulary", target_vocabulary)
        arguments.update(
            source_vocabulary=source_vocabulary,
            target_vocabulary=target_vocabulary,
            source_vocabulary_size=_vocabulary_size(
                "source", source_vocabulary_size, source_vocabulary
            ),
            target_vocabulary_size=_vocabulary_size(
                "target", target_vocabulary_size, target_vocabulary
            ),
        )
        parts = Parts(
            encoder=seq2seq_layers.Seq2SeqEncoder(
                arguments["source_vocabulary_size"],
                units,
                embedding_dim=embedding_dim,
                encoder=encoder,
                num_layers=num_layers,
                num_heads=num_heads,
                dropout=dropout,
                name="encoder",
            ),
            decoder=AttentionDecoder(
                arguments["target_vocabulary_size"],
                units,
                embedding_dim=embedding_dim,
                cell=cell,
                attention=attention,
                score=score,
                window=window,
                max_source_length=max_source_length,
                dropout=dropout,
                name="decoder",
            ),
        )
        source = keras.Input(shape=(None,), dtype="int32", name="source_ids")
        target = keras.Input(shape=(None,), dtype="int32", name="decoder_input_ids")
        states, mask = parts.encoder(source)
        logits = parts.decoder(target, states, source_mask=mask)
        self._init_functional(
            {"source_ids": source, "decoder_input_ids": target},
            {"logits": logits},
            parts,
            arguments,
            name,
            _SETTINGS,
            **kwargs,
        )


def build_seq2seq(
    source_vocabulary_size: int | None = None,
    target_vocabulary_size: int | None = None,
    **kwargs,
) -> Seq2Seq:
    """`Seq2Seq(source_vocabulary_size, target_vocabulary_size, **kwargs)`.

    Example:

    >>> model = build_seq2seq(10, 12, encoder="transformer", attention="bahdanau",
    ...                       units=8, embedding_dim=4)
    >>> sorted(model.output)
    ['logits']
    """
    return Seq2Seq(source_vocabulary_size, target_vocabulary_size, **kwargs)


def seq2seq_vocabularies(model, given, caller: str) -> tuple[list, list]:
    """`(source_vocabulary, target_vocabulary)` of `model`, for `caller`.

    The model's own. `given` are the vocabularies of the old spelling
    `caller(model, ..., source_vocabulary, target_vocabulary, ...)` (empty when
    not passed): they warn, must be the model's when it has some, and are used
    for a model built without them.
    """
    if not isinstance(model, Seq2Seq):
        raise ValueError(
            f"`model` must be a Seq2Seq. Received: model={type(model).__name__}"
        )
    own = (model.source_vocabulary, model.target_vocabulary)
    own = tuple(None if v is None else list(v) for v in own)
    if given:
        warn_deprecated(
            f"Passing the vocabularies to `{caller}`",
            f"`{caller}(model, ...)` on a model built with "
            "`Seq2Seq(..., source_vocabulary=..., target_vocabulary=...)`",
            stacklevel=4,
        )
        if len(given) != 2:
            raise TypeError(
                f"`{caller}` takes both vocabularies of its old spelling, "
                f"source then target. Received {len(given)}"
            )
        given = tuple(
            _check_vocabulary(name, list(v))
            for name, v in zip(("source_vocabulary", "target_vocabulary"), given)
        )
        for name, mine, theirs in zip(
            ("source_vocabulary", "target_vocabulary"), own, given
        ):
            if mine is not None and mine != theirs:
                raise ValueError(
                    f"`{name}` must be the model's own (it was built with one). "
                    f"Received a {name} of {len(theirs)} entries for the "
                    f"model's {len(mine)}"
                )
        return given
    if own[0] is None or own[1] is None:
        raise ValueError(
            f"`{caller}` reads the vocabularies from the model: build it with "
            "`Seq2Seq(source_vocabulary=..., target_vocabulary=...)`. Received: a "
            "model without them"
        )
    return own


def _training_arrays(sources, targets, source_vocabulary, target_vocabulary):
    inputs = {
        "source_ids": encode_characters(sources, source_vocabulary),
        "decoder_input_ids": encode_characters(
            targets, target_vocabulary, add_start=True
        ),
    }
    labels = encode_characters(targets, target_vocabulary, add_end=True)
    return inputs, {"logits": labels}


def fit_seq2seq(
    model: Seq2Seq,
    sources,
    targets,
    *vocabularies,
    epochs: int = 10,
    batch_size: int = 64,
    learning_rate: float = 1e-3,
    validation_data=None,
    verbose: int = 0,
    seed: int = 0,
    callbacks=None,
    jit_compile: bool | str | None = False,
    strategy=None,
    tpu: str | None = None,
    backup_dir=None,
    checkpoint_dir=None,
    mixed_precision: str | None = None,
):
    """Trains `model` with teacher forcing on pairs of strings.

    Decoder inputs are "[START]" + target characters, labels the target characters +
    "[END]"; the loss is the cross-entropy over the real (non-padding) positions.
    The characters are looked up in the model's vocabularies (build it with
    `Seq2Seq(..., source_vocabulary=..., target_vocabulary=...)`); the old spelling
    `fit_seq2seq(model, sources, targets, source_vocabulary, target_vocabulary,
    ...)` works for one release and warns. Epoch `e` visits the pairs in the order
    `keras_attn.training.epoch_batches` gives for `(seed, e)`, so a run resumed
    from `backup_dir` sees the batches an uninterrupted run saw.

    Args:
        model: a `Seq2Seq`.
        sources, targets: lists of str of the same length.
        epochs: int. Defaults to 10.
        batch_size: int. The global batch. Defaults to 64.
        learning_rate: float. Adam's. Defaults to 1e-3.
        validation_data: optional `(sources, targets)`.
        verbose: int. Keras' `fit` verbosity. Defaults to 0.
        seed: int. The data order, and the run's dropout
            (`keras_attn.training.seed_run`). Defaults to 0.
        callbacks: optional list of Keras callbacks for `fit`.
        jit_compile: bool, or "auto" / None (see `keras_attn.precision`): compile
            the train step with XLA. Defaults to False.
        strategy: a `tf.distribute.Strategy` or a `get_strategy` kind; the model
            must have been built inside its `scope()`. None trains under the
            strategy the model was built under. Under several replicas the last,
            smaller batch of an epoch is left out.
        tpu: str. TPU name for `strategy="tpu"`.
        backup_dir: str. `BackupAndRestore` directory: a run stopped and started
            again with the same arguments resumes after its last finished epoch,
            with that epoch's data order.
        checkpoint_dir: str. The weights after each epoch go to
            `checkpoint_dir/epoch_NNN.weights.h5`.
        mixed_precision: str or None. The policy the model was built under (build
            it inside `keras_attn.precision.policy_scope(...)`); a different value
            raises. None reads it from the model. Defaults to None.

    Returns:
        The Keras `History` (`history.model` is `model`).
    """
    if len(sources) != len(targets):
        raise ValueError(
            "`sources` and `targets` must have the same length. Received: "
            f"len(sources)={len(sources)}, len(targets)={len(targets)}"
        )
    check_positive_int("epochs", epochs)
    check_positive_int("batch_size", batch_size)
    source_vocabulary, target_vocabulary = seq2seq_vocabularies(
        model, vocabularies, "fit_seq2seq"
    )
    options = training.fit_options(
        model,
        "fit_seq2seq",
        strategy=strategy,
        tpu=tpu,
        backup_dir=backup_dir,
        checkpoint_dir=checkpoint_dir,
        mixed_precision=mixed_precision,
        jit_compile=jit_compile,
        callbacks=callbacks,
        seed=seed,
    )
    strategy = options.strategy
    # Several replicas: only full batches, so no replica gets an empty one.
    full_batches = strategy.num_replicas_in_sync > 1
    rows = len(sources)
    if full_batches:
        check_at_most("batch_size", batch_size, rows, "the number of pairs")
    with strategy.scope():
        model.compile(
            optimizer=keras.optimizers.Adam(learning_rate),
            loss={
                "logits": keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True, ignore_class=PAD_ID
                )
            },
            jit_compile=options.jit_compile,
        )
    tensors = _training_arrays(sources, targets, source_vocabulary, target_vocabulary)

    def dataset_fn(size, context):
        return training.epoch_batches(
            tensors,
            rows,
            size,
            seed=seed,
            start_epoch=options.start_epoch,
            drop_remainder=full_batches,
        )

    validation = None
    if validation_data is not None:
        validation = tf.data.Dataset.from_tensor_slices(
            _training_arrays(*validation_data, source_vocabulary, target_vocabulary)
        ).batch(batch_size, drop_remainder=full_batches)
    return model.fit(
        training.distribute_dataset(strategy, dataset_fn, batch_size),
        epochs=epochs,
        steps_per_epoch=rows // batch_size if full_batches else -(-rows // batch_size),
        validation_data=validation,
        verbose=verbose,
        shuffle=False,  # the dataset shuffles (Keras 3 warns when asked again)
        callbacks=options.callbacks,
    )


__getattr__ = moved(
    __name__,
    {
        "Seq2SeqEncoder": "keras_attn.layers.seq2seq:Seq2SeqEncoder",
        "export_seq2seq": "keras_attn.serving.seq2seq:export_seq2seq",
    },
)
