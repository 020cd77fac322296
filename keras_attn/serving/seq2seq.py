"""The seq2seq export: raw strings in, raw strings out, decoded inside the graph."""

from __future__ import annotations

from keras_attn._publish import written_whole
from keras_attn._validation import check_positive_int
from keras_attn.backend import quiet_save, tf
from keras_attn.models.seq2seq import (
    END_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    START_ID,
    UNK_ID,
    Seq2Seq,
    seq2seq_vocabularies,
)

__all__ = ["export_seq2seq"]


class _Seq2SeqServing(tf.Module):
    """Raw strings in, raw strings out: split, lookup, encode, decode, join."""

    def __init__(self, model, source_vocabulary, target_vocabulary, decode_kwargs):
        super().__init__()
        self.encoder = model.encoder
        self.decoder = model.decoder
        self.decode_kwargs = decode_kwargs
        first = len(SPECIAL_TOKENS)
        self.source_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(source_vocabulary[first:]), tf.string),
                tf.range(first, len(source_vocabulary), dtype=tf.int32),
            ),
            default_value=UNK_ID,
        )
        # Special tokens read as "": what comes out is the characters alone.
        self.target_strings = tf.constant(
            [""] * first + list(target_vocabulary[first:]), tf.string
        )
        self.serve = tf.function(
            self._serve,
            autograph=False,  # explicit tf.while_loop: nothing to convert
            input_signature=[tf.TensorSpec([None], tf.string, name="text")],
        )

    def _serve(self, text):
        chars = tf.strings.unicode_split(text, "UTF-8")  # ragged (batch, None)
        ids = self.source_table.lookup(chars).to_tensor(default_value=PAD_ID)
        # At least one column, so a batch of empty strings still has a source axis.
        ids = tf.pad(ids, [[0, 0], [0, tf.maximum(1 - tf.shape(ids)[1], 0)]])
        states, mask = self.encoder(ids)
        out = self.decoder.decode(
            states, mask, start_token=START_ID, end_token=END_ID, **self.decode_kwargs
        )
        pieces = tf.gather(self.target_strings, out["token_ids"])
        return {
            "text": tf.strings.reduce_join(pieces, axis=-1),
            "scores": out["scores"],
        }


def export_seq2seq(
    model: Seq2Seq,
    *args,
    export_dir: str | None = None,
    max_length: int = 32,
    beam_width: int = 1,
    length_penalty: float = 0.0,
) -> str:
    """Writes a SavedModel that turns raw strings into raw strings.

    `serving_default` takes `text` (a batch of strings) and returns `text` (the
    decoded strings, special tokens dropped) and `scores` (their log-probability).
    Characters are split with `tf.strings.unicode_split`, looked up in a table of
    the model's source vocabulary, and decoded inside the graph (greedy for
    `beam_width=1`, else beam search with GNMT's length penalty `length_penalty`)
    into its target vocabulary, so the export loads in TensorFlow alone.

    Called `export_seq2seq(model, export_dir, ...)` on a `Seq2Seq` built with its
    vocabularies. The old spelling `export_seq2seq(model, source_vocabulary,
    target_vocabulary, export_dir, ...)` works for one release and warns.

    Args:
        model: a `Seq2Seq`.
        export_dir: str. The folder to write, which must not exist yet.
        max_length: int. Most characters decoded. Defaults to 32.
        beam_width: int. 1 decodes greedily. Defaults to 1.
        length_penalty: float. GNMT's alpha for the beam search. Defaults to 0.0.

    Returns:
        `export_dir`: the SavedModel is written beside it and moved in whole.
    """
    if len(args) in (1, 3):
        *vocabularies, given_dir = args
    else:
        vocabularies, given_dir = args, None
    if given_dir is not None and export_dir is not None:
        raise TypeError("`export_seq2seq` got two values for `export_dir`")
    export_dir = given_dir if export_dir is None else export_dir
    if export_dir is None:
        raise ValueError("`export_dir` must be a folder path. Received: None")
    source_vocabulary, target_vocabulary = seq2seq_vocabularies(
        model, tuple(vocabularies), "export_seq2seq"
    )
    check_positive_int("max_length", max_length)
    check_positive_int("beam_width", beam_width)
    module = _Seq2SeqServing(
        model,
        source_vocabulary,
        target_vocabulary,
        {
            "max_length": max_length,
            "beam_width": beam_width,
            "length_penalty": length_penalty,
        },
    )
    # Written beside and moved in whole: a server never sees half a model.
    with written_whole(export_dir) as folder, quiet_save():
        tf.saved_model.save(
            module, str(folder), signatures={"serving_default": module.serve}
        )
    return export_dir
