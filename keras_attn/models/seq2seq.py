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

from keras_attn._deprecation import moved
from keras_attn._validation import check_bool, check_positive_int
from keras_attn.backend import ReplicaBuild, keras, register, tf
from keras_attn.layers import seq2seq as seq2seq_layers
from keras_attn.layers.seq2seq import ENCODERS, AttentionDecoder

__all__ = [
    "ENCODERS",
    "SPECIAL_TOKENS",
    "Seq2Seq",
    "build_character_vocabulary",
    "build_seq2seq",
    "encode_characters",
    "fit_seq2seq",
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


@register
class Seq2Seq(ReplicaBuild, keras.Model):
    """Encoder + `AttentionDecoder`, for teacher-forced training.

    Inputs `{"source_ids": (batch, src_len), "decoder_input_ids": (batch, tgt_len)}`
    (the targets behind a start token), output `{"logits": (batch, tgt_len,
    target_vocabulary_size)}`. The parts are attributes: `encoder`
    (`Seq2SeqEncoder`) and `decoder` (`AttentionDecoder`, whose `decode` generates).

    Args:
        source_vocabulary_size: int. Source ids (0 is padding).
        target_vocabulary_size: int. Target ids (0 is padding).
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
        name: str. Model name. Defaults to "seq2seq".

    Example:

    >>> import numpy as np
    >>> model = Seq2Seq(10, 12, units=8, embedding_dim=4)
    >>> out = model({"source_ids": np.array([[4, 5, 0]]),
    ...              "decoder_input_ids": np.array([[2, 6]])})
    >>> out["logits"].shape
    TensorShape([1, 2, 12])
    """

    def __init__(
        self,
        source_vocabulary_size: int,
        target_vocabulary_size: int,
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
        name: str = "seq2seq",
        **kwargs,
    ):
        encoder_layer = seq2seq_layers.Seq2SeqEncoder(
            source_vocabulary_size,
            units,
            embedding_dim=embedding_dim,
            encoder=encoder,
            num_layers=num_layers,
            num_heads=num_heads,
            dropout=dropout,
            name="encoder",
        )
        decoder = AttentionDecoder(
            target_vocabulary_size,
            units,
            embedding_dim=embedding_dim,
            cell=cell,
            attention=attention,
            score=score,
            window=window,
            max_source_length=max_source_length,
            dropout=dropout,
            name="decoder",
        )
        source = keras.Input(shape=(None,), dtype="int32", name="source_ids")
        target = keras.Input(shape=(None,), dtype="int32", name="decoder_input_ids")
        states, mask = encoder_layer(source)
        logits = decoder(target, states, source_mask=mask)
        super().__init__(
            inputs={"source_ids": source, "decoder_input_ids": target},
            outputs={"logits": logits},
            name=name,
            **kwargs,
        )
        self.encoder = encoder_layer
        self.decoder = decoder
        self._settings = {
            "source_vocabulary_size": source_vocabulary_size,
            "target_vocabulary_size": target_vocabulary_size,
            "encoder": encoder,
            "attention": attention,
            "score": score,
            "cell": cell,
            "units": units,
            "embedding_dim": embedding_dim,
            "num_layers": num_layers,
            "num_heads": num_heads,
            "window": window,
            "max_source_length": max_source_length,
            "dropout": dropout,
        }

    def get_config(self):
        return {**self._settings, "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


def build_seq2seq(
    source_vocabulary_size: int, target_vocabulary_size: int, **kwargs
) -> Seq2Seq:
    """`Seq2Seq(source_vocabulary_size, target_vocabulary_size, **kwargs)`.

    Example:

    >>> model = build_seq2seq(10, 12, encoder="transformer", attention="bahdanau",
    ...                       units=8, embedding_dim=4)
    >>> sorted(model.output)
    ['logits']
    """
    return Seq2Seq(source_vocabulary_size, target_vocabulary_size, **kwargs)


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
    source_vocabulary,
    target_vocabulary,
    epochs: int = 10,
    batch_size: int = 64,
    learning_rate: float = 1e-3,
    validation_data=None,
    verbose: int = 0,
    seed: int = 0,
    callbacks=None,
    jit_compile: bool = False,
):
    """Trains `model` with teacher forcing on pairs of strings.

    Decoder inputs are "[START]" + target characters, labels the target characters +
    "[END]"; the loss is the cross-entropy over the real (non-padding) positions.

    Args:
        model: a `Seq2Seq`.
        sources, targets: lists of str of the same length.
        source_vocabulary, target_vocabulary: lists from `build_character_vocabulary`.
        epochs: int. Defaults to 10.
        batch_size: int. Defaults to 64.
        learning_rate: float. Adam's. Defaults to 1e-3.
        validation_data: optional `(sources, targets)`.
        verbose: int. Keras' `fit` verbosity. Defaults to 0.
        seed: int. Shuffling seed. Defaults to 0.
        callbacks: optional list of Keras callbacks for `fit`.
        jit_compile: bool. Compile the train step with XLA. Defaults to False.

    Returns:
        The Keras `History`.
    """
    if len(sources) != len(targets):
        raise ValueError(
            "`sources` and `targets` must have the same length. Received: "
            f"len(sources)={len(sources)}, len(targets)={len(targets)}"
        )
    check_positive_int("epochs", epochs)
    check_positive_int("batch_size", batch_size)
    check_bool("jit_compile", jit_compile)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss={
            "logits": keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, ignore_class=PAD_ID
            )
        },
        jit_compile=jit_compile,
    )
    x, y = _training_arrays(sources, targets, source_vocabulary, target_vocabulary)
    data = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(len(sources), seed=seed)
        .batch(batch_size)
    )
    validation = None
    if validation_data is not None:
        vx, vy = _training_arrays(
            *validation_data, source_vocabulary, target_vocabulary
        )
        validation = tf.data.Dataset.from_tensor_slices((vx, vy)).batch(batch_size)
    return model.fit(
        data,
        epochs=epochs,
        validation_data=validation,
        verbose=verbose,
        shuffle=False,
        callbacks=callbacks,
    )


__getattr__ = moved(
    __name__,
    {
        "Seq2SeqEncoder": "keras_attn.layers.seq2seq:Seq2SeqEncoder",
        "export_seq2seq": "keras_attn.serving.seq2seq:export_seq2seq",
    },
)
