"""`BertPreprocessor`: raw strings (or string pairs) to a BERT backbone's inputs, the
one "raw values -> model inputs" object of the BERT-family models."""

from __future__ import annotations

import json
from pathlib import Path

from keras_attn._validation import check_choice, check_positive_int
from keras_attn.backend import Layer, keras, register, tf
from keras_attn.text.bert_tokenizer import (
    CLS,
    SEP,
    TRUNCATE,
    BertTokenizer,
    pack_segments,
)

__all__ = ["BertPreprocessor"]


def _texts(inputs, name):
    """A `(batch,)` string tensor; `(batch, 1)` (a `keras.Input(shape=(1,))`) is
    squeezed."""
    texts = tf.convert_to_tensor(inputs, tf.string)
    if texts.shape.rank == 2 and texts.shape[-1] == 1:
        texts = tf.squeeze(texts, -1)
    if texts.shape.rank != 1:
        raise ValueError(
            f"`{name}` must be a batch of strings, shape (batch,). Received: "
            f"{name}.shape={tuple(texts.shape)}"
        )
    return texts


@register
class BertPreprocessor(Layer):
    """Raw strings to `{"token_ids", "segment_ids"}` for a `BertBackbone`.

    The checkpoint's WordPiece tokenization (`BertTokenizer`), then
    `[CLS] a [SEP]` for single texts and `[CLS] a [SEP] b [SEP]` for pairs (segment
    ids 0 then 1), truncated to `sequence_length` (the longer segment first for
    pairs, as Hugging Face does; a segment loses its last tokens, or with
    `truncate="middle"` those between its first quarter and its last three
    quarters) and padded with id 0. Everything runs in
    TensorFlow and tensorflow-text ops, so the layer works in `tf.data` and inside an
    exported model that takes raw strings.

    Args:
        tokenizer: a `BertTokenizer`.
        sequence_length: int. Length of the outputs, special tokens included.
            Defaults to 128.
        truncate: str. What a text longer than `sequence_length` loses: "end" (it
            keeps its first pieces; Hugging Face's default) or "middle" (it keeps
            the first quarter of the room and fills the rest from its end: the head
            + tail of long reviews, Sun et al., 2019). Defaults to "end".

    Call arguments:
        inputs: string tensor `(batch,)`, or a tuple/list of two of them (pairs).

    Returns:
        `{"token_ids": int32 (batch, sequence_length), "segment_ids": int32
        (batch, sequence_length)}`.

    Example:

    >>> import tensorflow as tf
    >>> from keras_attn.text.bert_tokenizer import BertTokenizer
    >>> preprocessor = BertPreprocessor(BertTokenizer("bert-base-uncased"), 8)
    >>> out = preprocessor((tf.constant(["Is it?"]), tf.constant(["Yes, it is."])))
    >>> out["token_ids"].numpy().tolist()
    [[101, 2003, 2009, 102, 2748, 1010, 2009, 102]]
    >>> out["segment_ids"].numpy().tolist()
    [[0, 0, 0, 0, 1, 1, 1, 1]]
    """

    def __init__(
        self, tokenizer, sequence_length: int = 128, truncate: str = "end", **kwargs
    ):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        if isinstance(tokenizer, dict):  # from a config
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if not isinstance(tokenizer, BertTokenizer):
            raise ValueError(
                "`tokenizer` must be a BertTokenizer. Received: "
                f"tokenizer={type(tokenizer).__name__}"
            )
        self.tokenizer = tokenizer
        self.sequence_length = check_positive_int("sequence_length", sequence_length)
        if sequence_length < 3:
            raise ValueError(
                "`sequence_length` must be at least 3 ([CLS], [SEP] and a token). "
                f"Received: sequence_length={sequence_length}"
            )
        self.truncate = check_choice("truncate", truncate, TRUNCATE)

    @classmethod
    def from_pretrained(cls, path, sequence_length: int | None = None, **kwargs):
        """The preprocessor of a Hugging Face model folder: its `vocab.txt` and
        `tokenizer_config.json` (`BertTokenizer.from_pretrained`).

        Args:
            path: the folder.
            sequence_length: int. Defaults to the `max_position_embeddings` of its
                `config.json` (512 without one).
        """
        tokenizer = BertTokenizer.from_pretrained(path)
        if sequence_length is None:
            config = Path(path) / "config.json"
            positions = (
                json.loads(config.read_text("utf-8")).get("max_position_embeddings")
                if config.is_file()
                else None
            )
            sequence_length = positions or 512
        return cls(tokenizer, sequence_length, **kwargs)

    def save_pretrained(self, path) -> None:
        """Writes the tokenizer's files (`vocab.txt`, `tokenizer_config.json`,
        `special_tokens_map.json`) into `path`."""
        self.tokenizer.save_pretrained(path)

    @property
    def vocabulary_size(self) -> int:
        return self.tokenizer.vocabulary_size

    def build(self, inputs_shape=None):
        # Nothing to build: the vocabulary is a constant of the graph.
        self.tokenizer.built = True
        self.built = True

    def call(self, inputs):
        if isinstance(inputs, (list, tuple)):
            if len(inputs) not in (1, 2):
                raise ValueError(
                    "`inputs` must be a batch of strings or a pair of them. "
                    f"Received: {len(inputs)} batches"
                )
            texts = [_texts(x, f"inputs[{i}]") for i, x in enumerate(inputs)]
        else:
            texts = [_texts(inputs, "inputs")]
        segments = [self.tokenizer.tokenize(t) for t in texts]
        return pack_segments(
            segments,
            self.sequence_length,
            self.tokenizer.token_id(CLS),
            self.tokenizer.token_id(SEP),
            truncate=self.truncate,
        )

    def compute_output_spec(self, inputs):
        first = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
        shape = (first.shape[0], self.sequence_length)
        return {
            "token_ids": keras.KerasTensor(shape, "int32"),
            "segment_ids": keras.KerasTensor(shape, "int32"),
        }

    def get_config(self):
        return {
            **super().get_config(),
            "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
            "sequence_length": self.sequence_length,
            "truncate": self.truncate,
        }
