"""Layers that read token ids: the padding mask, the mask of a placeholder id, and
the segment ids of single-segment inputs."""

from __future__ import annotations

from keras_attn._validation import check_bool, check_int
from keras_attn.backend import Layer, keras, register, tf

__all__ = ["PlaceholderMask", "SegmentIds", "TokenMask"]


@register
class TokenMask(Layer):
    """The boolean mask of token ids: True where `ids != 0` (0 is padding).

    With `reduce_last=True` it marks the rows along the last axis holding at least
    one real token, e.g. the real sentences of `(batch, sentences, words)` ids.

    Args:
        reduce_last: bool. Reduce the last axis with "any". Defaults to False.

    Call arguments:
        inputs: integer ids `(batch, ...)`.

    Returns:
        boolean `(batch, ...)`, one axis fewer with `reduce_last`.

    Example:

    >>> import numpy as np
    >>> TokenMask(reduce_last=True)(np.array([[[3, 0], [0, 0]]])).numpy()
    array([[ True, False]])
    """

    def __init__(self, reduce_last: bool = False, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self.reduce_last = check_bool("reduce_last", reduce_last)

    def call(self, inputs):
        mask = tf.not_equal(inputs, tf.zeros([], inputs.dtype))
        return tf.reduce_any(mask, axis=-1) if self.reduce_last else mask

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_spec(self, inputs):
        shape = inputs.shape[:-1] if self.reduce_last else inputs.shape
        return keras.KerasTensor(shape, "bool")

    def get_config(self):
        return {**super().get_config(), "reduce_last": self.reduce_last}


@register
class SegmentIds(Layer):
    """The segment ids of single-segment inputs: int32 zeros shaped like the ids.

    A `BertClassifier` takes `{"token_ids", "segment_ids"}`; a document is one
    segment (id 0), so its raw-string serving model makes the segment ids from the
    token ids inside the graph with this layer.

    Call arguments:
        inputs: integer token ids `(batch, sequence_length)`.

    Returns:
        int32 zeros `(batch, sequence_length)`.

    Example:

    >>> import numpy as np
    >>> SegmentIds()(np.array([[101, 7592, 102, 0]], "int32")).numpy()
    array([[0, 0, 0, 0]], dtype=int32)
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)

    def call(self, inputs):
        return tf.zeros_like(inputs, dtype=tf.int32)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(inputs.shape, "int32")


@register
class PlaceholderMask(Layer):
    """True where the ids are the placeholder's: the query mask of a cloze head.

    The Attention Sum Reader's dot-product head attends with the encoding of the
    placeholder alone (the "@placeholder" word, or BERT's `[MASK]`).

    Args:
        placeholder_id: int >= 0. The id of the placeholder. Defaults to 2 (its id
            in a `build_cloze_vocabulary` vocabulary).

    Call arguments:
        inputs: integer ids `(batch, ...)`.

    Returns:
        boolean `(batch, ...)`.

    Example:

    >>> import numpy as np
    >>> PlaceholderMask(2)(np.array([[5, 2, 0]])).numpy()
    array([[False,  True, False]])
    """

    def __init__(self, placeholder_id: int = 2, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self.placeholder_id = check_int("placeholder_id", placeholder_id, minimum=0)

    def call(self, inputs):
        return tf.equal(inputs, tf.constant(self.placeholder_id, inputs.dtype))

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(inputs.shape, "bool")

    def get_config(self):
        return {**super().get_config(), "placeholder_id": self.placeholder_id}
